"""Runs inside the AgentScope 1.0.21 virtualenv: RemoteLongTermMemory's agent tools called while
its server cannot be reached answer with an error text, as AgentScope's Mem0LongTermMemory
does, instead of raising. Prints one JSON line."""

import asyncio
import json
import os

from agentscope_memory.agentscope_adapters.v1 import RemoteLongTermMemory


async def main() -> None:
    ltm = RemoteLongTermMemory(os.environ["MEM0_REST_URL"], user_name="用户", timeout=1)
    results = {}
    for name, call in (("record", lambda: ltm.record_to_memory("要记住", ["我喜欢龙井"])),
                       ("retrieve", lambda: ltm.retrieve_from_memory(["龙井"]))):
        try:
            results[name] = (await call()).content[0]["text"]
        except Exception as exc:  # noqa: BLE001 - the test shows what was raised
            results[name] = f"raised {type(exc).__name__}"
    await ltm.close()
    print(json.dumps(results, ensure_ascii=False))


asyncio.run(main())
