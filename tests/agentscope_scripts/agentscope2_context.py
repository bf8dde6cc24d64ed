"""Runs inside the AgentScope 2.x virtualenv: an Agent whose context compression is the server's
(RemoteContextCompression) and whose state is kept in the server (v2_state), driven by the
scripted model; PHASE says which part of the story this process plays. Prints JSON."""

import asyncio
import json
import logging
import os
import re
from pathlib import Path

from agentscope_memory.agentscope_adapters.v2_context import RemoteContextCompression
from agentscope_memory.agentscope_adapters.v2_state import (
    AgentStateConflictError,
    RemoteAgentState,
)
from agentscope_memory.client import AsyncAgentStateClient
from agentscope_memory.short_term.auto_context.config import AutoContextConfig

TARGET, LLM, KEY = os.environ["GRPC_TARGET"], os.environ["LLM_URL"], os.environ.get("MEM0_KEY")
PHASE, SESSION, USER = os.environ["PHASE"], os.environ.get("SESSION", "会话-1"), "小明"
# Small thresholds, so that four rounds cross them: ten working messages, two kept aside.
CONFIG = AutoContextConfig(msg_threshold=10, last_keep=2, min_compression_token_threshold=0, profile="improved")
MARKER = re.compile(r"CONTEXT_OFFLOAD: uuid=([^ >]+)")


def texts(context) -> list[str]:
    out = []
    for msg in context:
        for block in msg.content:
            if block.type == "hint":
                continue  # the agent's runtime reminders (time, context usage)
            out.append(getattr(block, "text", None) or getattr(block, "output", None) or getattr(block, "name", ""))
    return [str(t) for t in out]


async def main() -> None:
    from agentscope.agent import Agent
    from agentscope.credential import OpenAICredential
    from agentscope.message import Msg, TextBlock
    from agentscope.model import OpenAIChatModel
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import FunctionTool, Toolkit

    def lookup(city: str) -> str:
        """Looks up the weather of a city.

        Args:
            city: The city.
        """
        return f"{city}：晴，二十五度。"

    async def agent(compression: RemoteContextCompression, state=None) -> Agent:
        model = OpenAIChatModel(OpenAICredential(api_key="sk-test", base_url=LLM), "scripted", stream=False)
        allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test")
        toolkit = Toolkit(tools=[FunctionTool(lookup, permission=allow), *await compression.list_tools()])
        return Agent(name="Friday", system_prompt="你是一个助手。", model=model, toolkit=toolkit,
                     middlewares=[compression], state=state)

    def user(text: str, **metadata: str) -> Msg:
        return Msg(name="user", content=[TextBlock(text=text)], role="user", metadata=metadata)

    states = AsyncAgentStateClient(TARGET, api_key=KEY)
    out: dict = {}
    if PHASE == "first":
        compression = RemoteContextCompression(TARGET, api_key=KEY, auto_context_config=CONFIG)
        slot = RemoteAgentState(states, USER, SESSION)
        friday = await agent(compression, await slot.load())
        sizes = []
        for i, text in enumerate(("杭州天气怎么样？", "请记住：我的护照号码是E12345678。上海呢？", "谢谢", "再见")):
            await friday.reply(user(text, 来源=f"第{i + 1}轮"))
            sizes.append(len(friday.state.context))
        out["sizes"] = sizes
        out["memory_id"] = compression.memory_id_of(friday)
        out["uuids"] = MARKER.findall("\n".join(texts(friday.state.context)))
        out["texts"] = texts(friday.state.context)
        out["version"] = await slot.save(friday)
    elif PHASE == "second":
        compression = RemoteContextCompression(TARGET, api_key=KEY, auto_context_config=CONFIG)
        slot = RemoteAgentState(states, USER, SESSION)
        state = await slot.load()
        out["loaded"] = texts(state.context)
        friday = await agent(compression, state)
        reply = await friday.reply(user("我的护照号码是多少？"))
        out["reply"] = reply.get_text_content()
        out["texts"] = texts(friday.state.context)
        out["saved"] = await slot.save(friday)
        # Another session of the same agent and user: its own memory and state.
        other_slot = RemoteAgentState(states, USER, "会话-2")
        other = await agent(compression, await other_slot.load())
        await other.reply(user("你好，我是新的会话。"))
        out["other_memory_id"] = compression.memory_id_of(other)
        out["other_texts"] = texts(other.state.context)
        await other_slot.save(other)
        # Two writers of one slot: the second save is refused.
        first, second = RemoteAgentState(states, USER, SESSION), RemoteAgentState(states, USER, SESSION)
        mine, theirs = await first.load(), await second.load()
        await first.save(mine)
        try:
            await second.save(theirs)
            out["stale"] = "saved"
        except AgentStateConflictError as exc:
            out["stale"] = [type(exc).__name__, str(exc), exc.current_version, exc.loaded_version]
        out["after_stale"] = (await RemoteAgentState(states, USER, SESSION).load()).model_dump_json() == mine.model_dump_json()
        # A state beyond gRPC's 4 MiB message goes and comes back in pieces.
        big_slot = RemoteAgentState(states, USER, "大会话")
        big = await big_slot.load()
        big.context.append(user("长" * (3 * 1024 * 1024)))
        await big_slot.save(big)
        out["big_round_trip"] = (await RemoteAgentState(states, USER, "大会话").load()).model_dump_json() == big.model_dump_json()
        # An agent of the session with a new, empty state picks up the conversation the memory
        # holds, its messages rebuilt whole from what the server stored.
        from agentscope.state import AgentState

        fresh = await agent(RemoteContextCompression(TARGET, api_key=KEY, auto_context_config=CONFIG),
                            AgentState(session_id=SESSION))
        await fresh.reply(user("还记得我们聊过什么吗？"))
        out["fresh_texts"] = texts(fresh.state.context)
        out["fresh_first"] = [fresh.state.context[0].metadata, fresh.state.context[0].id == state.context[0].id]
    elif PHASE == "tools":
        # One reply with two tool calls, the first result long: the server offloads it before
        # the third model call, in the middle of the reply.
        def fetch_report(name: str) -> str:
            """Fetches a report.

            Args:
                name: The report's name.
            """
            return f"{name}报告：" + "数据" * 1500 + "。报告编号R-42。"

        allow = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="test")
        compression = RemoteContextCompression(TARGET, api_key=KEY, auto_context_config=AutoContextConfig(
            msg_threshold=4, last_keep=2, large_payload_threshold=1000, profile="improved"))
        model = OpenAIChatModel(OpenAICredential(api_key="sk-test", base_url=LLM), "scripted", stream=False)
        toolkit = Toolkit(tools=[FunctionTool(lookup, permission=allow), FunctionTool(fetch_report, permission=allow),
                                 *await compression.list_tools()])
        friday = Agent(name="Friday", system_prompt="你是一个助手。", model=model, toolkit=toolkit,
                       middlewares=[compression])
        reply = await friday.reply(user("先取季度报告，再查北京天气。"))
        last = friday.state.context[-1]
        out["reply"] = reply.get_text_content()
        out["reply_id"] = [last.id == friday.state.reply_id, reply.id == last.id]
        out["blocks"] = [b.type for b in last.content if b.type != "hint"]
        out["calls"] = [[b.id, b.state] for b in last.content if b.type == "tool_call"]
        out["results"] = [[b.id, "CONTEXT_OFFLOAD" in str(b.output), len(str(b.output))] for b in last.content if b.type == "tool_result"]
        out["sent_again"] = await compression.send(friday)
    elif PHASE == "twice-setup":
        # A reply whose answer has not reached the memory yet (its send failed, or, here, is
        # left for the next compression), saved with the state.
        compression = RemoteContextCompression(TARGET, api_key=KEY, send_after_reply=False)
        slot = RemoteAgentState(states, USER, "两个进程")
        friday = await agent(compression, await slot.load())
        await friday.reply(user("第一个问题"))
        out["memory_id"] = compression.memory_id_of(friday)
        out["version"] = await slot.save(friday)
    elif PHASE == "twice":
        # One of two processes that loaded that state and go on with the session at once: both
        # hold the unsent answer.
        compression = RemoteContextCompression(TARGET, api_key=KEY, raise_errors=True)
        slot = RemoteAgentState(states, USER, "两个进程")
        friday = await agent(compression, await slot.load())
        # Both have loaded before either goes on.
        barrier = Path(os.environ["BARRIER"])
        (barrier / os.environ["QUESTION"]).touch()
        for _ in range(600):
            if len(list(barrier.iterdir())) >= 2:
                break
            await asyncio.sleep(0.1)
        await friday.reply(user(os.environ["QUESTION"]))
        out["ids"] = [m.id for m in friday.state.context]
        try:
            out["saved"] = await slot.save(friday)
        except AgentStateConflictError as exc:
            out["saved"] = str(exc)
            # What the error says to do: load the other process's state (an agent made with
            # it), whose next compression brings back this turn from the memory; then save.
            again = await agent(compression, await slot.load())
            await compression.compress(again)
            out["again"] = [texts(again.state.context), await slot.save(again)]
    elif PHASE == "big":
        # Tool results of 2.7 MB (more than half the server's 4 MiB per message) and 6 MB (more
        # than all of it) in the context: both sent, the second cut; the agent keeps both whole,
        # and an agent that has only the memory rebuilds the first whole, the second cut.
        from agentscope.message import AssistantMsg, ToolCallBlock, ToolResultBlock
        from agentscope.state import AgentState

        config = AutoContextConfig(msg_threshold=5000, max_token=10**9, large_payload_threshold=10**8)
        long_text, longer_text = "长" * 900_000, "更长" * 1_000_000
        blocks = []
        for call_id, text in (("call_大", long_text), ("call_更大", longer_text)):
            blocks += [ToolCallBlock(id=call_id, name="lookup", input='{"city": "大城市"}', state="finished"),
                       ToolResultBlock(id=call_id, name="lookup", output=text, state="success")]
        # And a call whose arguments are 2.4 MB (a tool call carries them twice on the server)
        # and one whose arguments are 4.8 MB.
        arguments = [json.dumps({"content": "写" * n}, ensure_ascii=False) for n in (800_000, 1_600_000)]
        for call_id, written in zip(("call_写", "call_写更多"), arguments, strict=True):
            blocks += [ToolCallBlock(id=call_id, name="lookup", input=written, state="finished"),
                       ToolResultBlock(id=call_id, name="lookup", output="已写入", state="success")]
        state = AgentState(session_id="大结果", context=[user("查一下"), AssistantMsg("Friday", blocks)])
        friday = await agent(RemoteContextCompression(TARGET, api_key=KEY, auto_context_config=config,
                                                      raise_errors=True), state)
        await friday.reply(user("总结一下"))
        results = [b for m in friday.state.context for b in m.content if b.type == "tool_result"]
        out["own"] = [(b.id, b.output in (long_text, longer_text)) for b in results]
        fresh = await agent(RemoteContextCompression(TARGET, api_key=KEY, raise_errors=True),
                            AgentState(session_id="大结果"))
        await fresh.reply(user("还在吗？"))
        results = [b for m in fresh.state.context for b in m.content if b.type == "tool_result"]
        out["rebuilt"] = [(b.id, b.output == long_text, len(b.output.encode()) < 3.1 * 1024 * 1024,
                           b.output.startswith("更长更长"), b.output.endswith("beyond what one message holds on the server]"))
                          for b in results]
        out["texts"] = texts(fresh.state.context)[:2]
        calls = {b.id: b.input for m in fresh.state.context for b in m.content if b.type == "tool_call"}
        mine = {b.id: b.input for m in friday.state.context for b in m.content if b.type == "tool_call"}
        out["calls"] = [mine["call_写"] == arguments[0], mine["call_写更多"] == arguments[1],
                        calls["call_写"] == arguments[0], calls["call_写更多"].startswith('{"content": "写写'),
                        calls["call_写更多"].endswith("beyond what one message holds on the server]")]
    elif PHASE == "deleted":
        # Another client deletes the session's memory between two replies: the next compression
        # makes it again and gives it the agent's context.
        from agentscope_memory.client import AsyncMemoryClient

        compression = RemoteContextCompression(TARGET, api_key=KEY, raise_errors=True)
        friday = await agent(compression)
        await friday.reply(user("删除之前"))
        async with AsyncMemoryClient(TARGET, api_key=KEY) as other:
            await other.delete_memory(compression.memory_id_of(friday))
            await friday.reply(user("删除之后"))
            out["texts"] = texts(friday.state.context)
            out["stored"] = [m.text_content for m in await other.get_messages(compression.memory_id_of(friday))]
    elif PHASE == "many":
        # A long conversation: sent in several AddMessages calls, read back in several pages.
        from agentscope.message import AssistantMsg
        from agentscope.state import AgentState

        compression = RemoteContextCompression(TARGET, api_key=KEY, auto_context_config=AutoContextConfig(
            msg_threshold=5000, max_token=10**9, profile="improved"))
        state = AgentState(context=[user(f"第{i}条") if i % 2 == 0 else AssistantMsg("Friday", f"回答{i}")
                                    for i in range(1500)])
        before = list(state.context)
        friday = await agent(compression, state)
        await friday.reply(user("最后一条"))
        out["same_objects"] = all(a is b for a, b in zip(before, friday.state.context[:1500], strict=True))
        out["size"] = len(friday.state.context)
        out["last"] = texts(friday.state.context[-2:])
    elif PHASE == "options":
        # The memory named by a function of the agent, and by a string; no offload instruction
        # in the prompt; the reply's last answer left for the next compression to send.
        named = RemoteContextCompression(TARGET, api_key=KEY, memory_id=lambda a: f"自定义/{a.name}",
                                         offload_instruction=False, send_after_reply=False)
        friday = await agent(named)
        await friday.reply(user("第一个问题"))
        out["named"] = named.memory_id_of(friday)
        fixed = RemoteContextCompression(TARGET, api_key=KEY, memory_id="固定的记忆")
        other = await agent(fixed)
        await other.reply(user("第二个问题"))
        out["fixed"] = fixed.memory_id_of(other)
    elif PHASE == "down":
        logging.basicConfig(level=logging.WARNING)
        friday = await agent(RemoteContextCompression(TARGET, timeout=2))
        reply = await friday.reply(user("服务器不在，你好吗？"))
        out["reply"] = reply.get_text_content()
        out["texts"] = texts(friday.state.context)
        strict = await agent(RemoteContextCompression(TARGET, timeout=2, raise_errors=True))
        try:
            await strict.reply(user("再试一次"))
            out["strict"] = "replied"
        except Exception as exc:  # noqa: BLE001 - the error the middleware raised, as the application sees it
            out["strict"] = type(exc).__name__
    await states.close()
    print(json.dumps(out, ensure_ascii=False))


asyncio.run(main())
