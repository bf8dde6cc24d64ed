"""Runs inside the AgentScope 1.0.21 virtualenv: RemoteMemory and RemoteLongTermMemory built
before any event loop runs (as an application builds its agent at import time), then used by
two `asyncio.run` calls one after the other, as InMemoryMemory can be. Prints one JSON line."""

import asyncio
import json
import os
from typing import Any

from agentscope.message import Msg

from agentscope_memory.agentscope_adapters.v1 import RemoteLongTermMemory
from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory

TARGET, REST, KEY = os.environ["GRPC_TARGET"], os.environ["MEM0_REST_URL"], os.environ.get("MEM0_KEY")

memory = RemoteMemory(TARGET, "事件循环", api_key=KEY)
long_term = RemoteLongTermMemory(REST, KEY, agent_name="Friday", user_name="循环")


async def turn(i: int) -> dict[str, Any]:
    await memory.add(Msg("user", f"第{i}轮", "user"))
    await long_term.record([Msg("user", f"我喜欢第{i}种茶", "user")])
    return {"texts": [m.get_text_content() for m in await memory.get_memory()],
            "recalled": sorted((await long_term.retrieve(Msg("user", "茶", "user"))).splitlines())}


def run(i: int) -> Any:
    try:
        return asyncio.run(turn(i))
    except Exception as exc:  # noqa: BLE001 - the test shows what failed
        return f"{type(exc).__name__}: {exc}"


print(json.dumps({"first": run(1), "second": run(2)}, ensure_ascii=False))
