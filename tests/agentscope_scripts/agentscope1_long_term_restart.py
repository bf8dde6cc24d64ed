"""Runs inside the AgentScope 1.0.21 virtualenv: RemoteLongTermMemory records, prints "recorded",
waits for a line on stdin (the test has killed the server meanwhile), then retrieves while the
server is restarted. Prints one JSON line."""

import asyncio
import json
import os
import sys

from agentscope.message import Msg

from agentscope_memory.agentscope_adapters.v1 import RemoteLongTermMemory


async def main() -> None:
    ltm = RemoteLongTermMemory(os.environ["MEM0_REST_URL"], agent_name="Friday", user_name="重启", timeout=30)
    await ltm.record([Msg("user", "我喜欢白茶", "user")])
    print("recorded", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    try:
        found = await ltm.retrieve(Msg("user", "白茶", "user"))
    except Exception as exc:  # noqa: BLE001 - the test shows what was raised
        found = f"raised {type(exc).__name__}: {exc}"
    await ltm.close()
    print(json.dumps({"found": found}, ensure_ascii=False))


asyncio.run(main())
