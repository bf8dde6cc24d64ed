"""Runs inside the AgentScope 1.0.21 virtualenv (tests/agentscope_python.py): two ReActAgent
conversations with RemoteLongTermMemory in "both" mode, driven by the scripted OpenAI-compatible
model, then a JSONSession save and load. Prints what the test checks as one JSON line."""

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.memory import InMemoryMemory
from agentscope.message import Msg
from agentscope.model import OpenAIChatModel
from agentscope.session import JSONSession

from agentscope_memory.agentscope_adapters.v1 import RemoteLongTermMemory

REST, LLM, KEY = os.environ["MEM0_REST_URL"], os.environ["LLM_URL"], os.environ.get("MEM0_KEY")


def agent(ltm: RemoteLongTermMemory) -> ReActAgent:
    model = OpenAIChatModel("scripted", api_key="sk-test", stream=False, client_kwargs={"base_url": LLM})
    return ReActAgent(name="Friday", sys_prompt="You remember what the user likes.", model=model,
                      formatter=OpenAIChatFormatter(), memory=InMemoryMemory(), long_term_memory=ltm,
                      long_term_memory_mode="both", max_iters=4)


async def main() -> None:
    ltm = RemoteLongTermMemory(REST, KEY, agent_name="Friday", user_name="alice")
    first = await agent(ltm)(Msg("user", "我喜欢龙井茶 (I like Longjing tea)", "user"))
    second = await agent(ltm)(Msg("user", "what tea do I like?", "user"))
    direct = await ltm.retrieve(Msg("user", "tea", "user"))
    await ltm.record(Msg("user", "我住在杭州", "user"))  # one message, not a list
    single = await ltm.retrieve(Msg("user", "杭州", "user"))

    with tempfile.TemporaryDirectory() as d:
        await JSONSession(save_dir=d).save_session_state("s1", user_id="alice", long_term_memory=ltm)
        saved = json.loads(Path(d, "alice_s1.json").read_text(encoding="utf-8"))
        restored = RemoteLongTermMemory(REST, KEY, run_name="placeholder")
        await JSONSession(save_dir=d).load_session_state("s1", user_id="alice", long_term_memory=restored)
        after_load = await restored.retrieve(Msg("user", "tea", "user"))

    print(json.dumps({"first": first.get_text_content(), "second": second.get_text_content(), "direct": direct,
                      "saved": saved, "after_load": after_load, "single": single, "restored_agent": restored.agent_name},
                     ensure_ascii=False))
    sys.stdout.flush()


asyncio.run(main())
