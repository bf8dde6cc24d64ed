"""Runs inside the AgentScope 1.0.21 virtualenv: the same calls on AgentScope's own
Mem0LongTermMemory and on RemoteLongTermMemory, both against the server's mem0 REST facade
(through the test's recording proxy, `MEM0_REST_URL`). Mem0LongTermMemory's mem0 `AsyncMemory`
is replaced by `Mem0Shape`, which sends each of its `add` / `search` calls to the facade as
mem0's own REST client would, so what reaches the server and what comes back is AgentScope's
own code at work. Each implementation runs in its own tenant (its own key), so both start from
an empty store. Before each call the script asks the proxy for `/__step__/<impl>/<name>`, which
the proxy records and does not forward. Prints one JSON line: per implementation, per step, the
text (or the repr of the dict) returned, or what was raised."""

import asyncio
import base64
import json
import os
from typing import Any

import httpx
from agentscope.memory import LongTermMemoryBase, Mem0LongTermMemory
from agentscope.message import Msg

from agentscope_memory.agentscope_adapters.mem0_client import RemoteMem0Client
from agentscope_memory.agentscope_adapters.v1 import RemoteLongTermMemory

REST = os.environ["MEM0_REST_URL"]
KEYS = {"upstream": os.environ["KEY_UPSTREAM"], "ours": os.environ["KEY_OURS"]}
AGENT, USER = "Friday", "小明"
# A 75 KB picture sent inline, as AgentScope's ImageBlock carries one.
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": base64.b64encode(bytes(range(256)) * 300).decode()}}


class Mem0Shape:
    """mem0's `AsyncMemory.add` / `search`, as Mem0LongTermMemory calls them, over the REST facade."""

    def __init__(self, client: RemoteMem0Client) -> None:
        self._client = client

    async def add(self, messages: Any, **kwargs: Any) -> dict[str, Any]:
        return await self._client.add(messages, **kwargs)  # memory_type: mem0's REST server has none

    async def search(self, query: str, agent_id: str | None = None, user_id: str | None = None,
                     run_id: str | None = None, limit: int = 100, **_: Any) -> dict[str, Any]:
        ids = {"agent_id": agent_id, "user_id": user_id, "run_id": run_id}
        return await self._client.search(query, filters={k: v for k, v in ids.items() if v}, top_k=limit)


def upstream() -> Mem0LongTermMemory:
    # Its constructor builds a mem0 AsyncMemory (models, a vector store); the methods under test
    # need only the scope, the default memory type and the AsyncMemory.
    ltm = Mem0LongTermMemory.__new__(Mem0LongTermMemory)
    LongTermMemoryBase.__init__(ltm)
    ltm.agent_id, ltm.user_id, ltm.run_id, ltm.default_memory_type = AGENT, USER, None, None
    ltm.long_term_working_memory = Mem0Shape(RemoteMem0Client(REST, KEYS["upstream"]))
    return ltm


def steps(ltm: Any) -> list[tuple[str, Any]]:
    return [
        ("record_to_memory", lambda: ltm.record_to_memory("用户的饮料偏好", ["The user likes Longjing tea", "用户住在杭州"])),
        ("record_to_memory_again", lambda: ltm.record_to_memory("用户的饮料偏好", ["The user likes Longjing tea", "用户住在杭州"])),
        ("record_to_memory_no_thinking", lambda: ltm.record_to_memory("", ["我每天早上六点跑步"])),
        ("record_to_memory_nul", lambda: ltm.record_to_memory("思考", ["坏\x00文本"])),
        ("retrieve", lambda: ltm.retrieve(Msg("user", "龙井茶", "user"))),
        ("retrieve_list", lambda: ltm.retrieve([Msg("user", "杭州", "user"), Msg("user", "Longjing tea", "user")], limit=1)),
        ("retrieve_blocks", lambda: ltm.retrieve(Msg("user", [{"type": "text", "text": "跑步"}], "user"))),
        ("retrieve_empty_list", lambda: ltm.retrieve([])),
        ("retrieve_str", lambda: ltm.retrieve("龙井茶")),
        ("retrieve_list_with_none", lambda: ltm.retrieve([Msg("user", "龙井茶", "user"), None])),
        ("retrieve_from_memory", lambda: ltm.retrieve_from_memory(["龙井", "Longjing tea"], limit=2)),
        ("retrieve_from_memory_empty_keyword", lambda: ltm.retrieve_from_memory(["跑步", ""])),
        # Differs on purpose (README): Mem0LongTermMemory searches the picture's base64 too.
        ("retrieve_image", lambda: ltm.retrieve(Msg("user", [{"type": "text", "text": "我喜欢什么茶？"}, IMAGE], "user"))),
        # Differs on purpose (README): a message longer than a query the server takes.
        ("retrieve_long", lambda: ltm.retrieve(Msg("user", "我喜欢什么茶？" * 10_000, "user"))),
        ("retrieve_image_only", lambda: ltm.retrieve(Msg("user", [IMAGE], "user"))),
        ("record_str", lambda: ltm.record(["我喜欢龙井茶"])),
        # Differs on purpose (README): Mem0LongTermMemory refuses None, which its signature allows.
        ("retrieve_none", lambda: ltm.retrieve(None)),
        # Differs on purpose (README): one assistant message joining all vs one message each.
        ("record", lambda: ltm.record([Msg("user", "我喜欢喝白茶", "user"), None, Msg(AGENT, "好的，记住了", "assistant")])),
        ("record_again", lambda: ltm.record([Msg("user", "我喜欢喝白茶", "user"), Msg(AGENT, "好的，记住了", "assistant"),
                                             Msg("user", "I also like oolong", "user")])),
        ("retrieve_after_record", lambda: ltm.retrieve(Msg("user", "白茶", "user"), limit=10)),
    ]


def shown(value: Any) -> Any:
    if hasattr(value, "content"):  # a ToolResponse
        return value.content[0]["text"]
    return value if isinstance(value, str) else repr(value)


async def main() -> None:
    out: dict[str, dict[str, Any]] = {}
    async with httpx.AsyncClient() as http:
        for impl, ltm in (("upstream", upstream()),
                          ("ours", RemoteLongTermMemory(REST, KEYS["ours"], agent_name=AGENT, user_name=USER))):
            out[impl] = {}
            for name, call in steps(ltm):
                (await http.get(f"{REST}/__step__/{impl}/{name}")).raise_for_status()
                try:
                    out[impl][name] = shown(await call())
                except Exception as exc:  # noqa: BLE001 - the test compares what was raised
                    out[impl][name] = f"raised {type(exc).__name__}: {exc}"
    print(json.dumps(out, ensure_ascii=False))


asyncio.run(main())
