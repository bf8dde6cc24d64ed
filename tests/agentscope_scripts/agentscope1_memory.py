"""Runs inside the AgentScope 1.0.21 virtualenv: RemoteMemory as a ReActAgent's memory, marks,
summary and a JSONSession round trip; prints what the test checks as one JSON line."""

import asyncio
import json
import os
import tempfile

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.model import OpenAIChatModel
from agentscope.session import JSONSession

from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory

TARGET, LLM, KEY = os.environ["GRPC_TARGET"], os.environ["LLM_URL"], os.environ.get("MEM0_KEY")


async def main() -> None:
    memory = RemoteMemory(TARGET, "py-chat-1", api_key=KEY)
    model = OpenAIChatModel("scripted", api_key="sk-test", stream=False, client_kwargs={"base_url": LLM})
    agent = ReActAgent(name="Friday", sys_prompt="Be brief.", model=model, formatter=OpenAIChatFormatter(),
                       memory=memory, max_iters=2)
    reply = await agent(Msg("user", "你好, Friday", "user"))
    blocks = Msg("user", [TextBlock(type="text", text="块 one"), TextBlock(type="text", text="two")], "user")
    await memory.add(blocks, marks="hint")
    await memory.add(blocks)  # a duplicate id is skipped
    first = (await memory.get_memory())[0]
    marked = await memory.update_messages_mark("compressed", msg_ids=[first.id])
    await memory.update_compressed_summary("SUMMARY")
    visible = await memory.get_memory(exclude_mark="compressed")
    hints = await memory.get_memory(mark="hint", prepend_summary=False)
    with tempfile.TemporaryDirectory() as d:
        await JSONSession(save_dir=d).save_session_state("s1", user_id="alice", memory=memory)
        other = RemoteMemory(TARGET, "another-id", api_key=KEY)
        await JSONSession(save_dir=d).load_session_state("s1", user_id="alice", memory=other)
    print(json.dumps({
        "reply": reply.get_text_content(), "size": await memory.size(), "marked": marked,
        "visible": [m.get_text_content() for m in visible], "hint_content": [m.content for m in hints],
        "loaded_id": other.memory_id, "loaded_size": await other.size(),
        "loaded_summary": other._compressed_summary, "deleted": await memory.delete([first.id]),
        "after_delete": await memory.size(),
    }, ensure_ascii=False))


asyncio.run(main())
