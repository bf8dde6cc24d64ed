"""Runs inside the AgentScope 1.0.21 virtualenv: messages another client wrote (a Java agent, or
any gRPC client: no AgentScope-Python JSON beside them) are the same messages at every read of
RemoteMemory, so they can be deleted and marked by id and an add of their id is skipped, as in
InMemoryMemory; a mark written by Python keeps their blocks. Prints one JSON line."""

import asyncio
import json
import os

from agentscope.message import Msg as PyMsg

from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolUseBlock

TARGET, KEY = os.environ["GRPC_TARGET"], os.environ.get("MEM0_KEY")


async def main() -> None:
    out: dict = {}
    async with AsyncMemoryClient(TARGET, api_key=KEY) as other:
        await other.create_memory("混合对话", allow_existing=True)
        asked = Msg.create(MsgRole.USER, "明天上海天气如何？", name="用户")
        # As a Java agent writes it: its own id and time.
        called = Msg(id="tool-call-1", name="助手", role=MsgRole.ASSISTANT, timestamp="2026-11-27 10:00:00.000",
                     content=[TextBlock("查一下"), ToolUseBlock(id="call-1", name="weather", input={"city": "上海"})])
        await other.add_messages("混合对话", [asked, called])
        memory = RemoteMemory(TARGET, "混合对话", api_key=KEY)
        first = [(m.id, m.timestamp) for m in await memory.get_memory()]
        second = [(m.id, m.timestamp) for m in await memory.get_memory()]
        out["same_at_every_read"] = first == second
        out["ids"] = [i for i, _ in first]
        out["times_kept"] = [t for _, t in first] == [asked.timestamp, called.timestamp]
        # An add of a stored id is skipped (InMemoryMemory's allow_duplicates=False).
        again = PyMsg("用户", "明天上海天气如何？", "user")
        again.id = asked.id
        await memory.add([again, PyMsg("用户", "谢谢", "user")])
        out["after_add"] = [m.get_text_content() for m in await memory.get_memory()]
        out["marked"] = await memory.update_messages_mark("重要", msg_ids=["tool-call-1"])
        out["marked_texts"] = [m.get_text_content() for m in await memory.get_memory(mark="重要")]
        # The tool call written by the other client is still whole on the server.
        stored = await other.get_messages("混合对话")
        out["blocks_kept"] = [type(b).__name__ for b in stored[1].content]
        out["deleted"] = await memory.delete([asked.id])
        out["after_delete"] = [m.get_text_content() for m in await memory.get_memory()]
        await memory.close()
    print(json.dumps(out, ensure_ascii=False))


asyncio.run(main())
