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
    # Marks are changed in one compare-and-set: a message another client adds meanwhile is
    # kept, and another client's message (a Java tool call) is written back whole.
    from agentscope_memory.client import AsyncMemoryClient
    from agentscope_memory.message import Msg as StoredMsg, MsgRole, ToolUseBlock

    racing, writer = RemoteMemory(TARGET, "py-chat-race", api_key=KEY), AsyncMemoryClient(TARGET, api_key=KEY)
    await racing.add(Msg("user", "第一条", "user"))
    await writer.add_messages("py-chat-race", [StoredMsg.create(
        MsgRole.ASSISTANT, content=[ToolUseBlock(id="call-1", name="search", input={"q": "杭州"})])])
    first_id, raced = (await racing.get_memory())[0].id, []

    def raced_after(read):
        # The other client adds right after the mark change has read the conversation.
        async def read_then_race(*args, **kwargs):
            result = await read(*args, **kwargs)
            if not raced:
                raced.append(True)
                await writer.add_messages("py-chat-race", [StoredMsg.create(MsgRole.USER, "added meanwhile")])
            return result
        return read_then_race

    for name in ("get_messages", "save_state"):
        setattr(racing._client, name, raced_after(getattr(racing._client, name)))
    # More ids than one UpdateMessageMarks call takes: the change is a rewrite (read, then replace
    # at the version read), which another client's add between the two must not lose.
    race_ids = [first_id, *(f"没有的{i}" for i in range(1000))]
    race_marked = await racing.update_messages_mark("seen", msg_ids=race_ids)
    race_stored = await writer.get_messages("py-chat-race")
    race = {"marked": race_marked, "raced": len(raced), "texts": [m.text_content for m in race_stored],
            "tool_use": [b.input for m in race_stored for b in m.content if isinstance(b, ToolUseBlock)],
            "seen": [m.get_text_content() for m in await racing.get_memory(mark="seen")]}
    print(json.dumps({
        "race": race,
        "reply": reply.get_text_content(), "size": await memory.size(), "marked": marked,
        "visible": [m.get_text_content() for m in visible], "hint_content": [m.content for m in hints],
        "loaded_id": other.memory_id, "loaded_size": await other.size(),
        "loaded_summary": other._compressed_summary, "deleted": await memory.delete([first.id]),
        "after_delete": await memory.size(),
    }, ensure_ascii=False))


asyncio.run(main())
