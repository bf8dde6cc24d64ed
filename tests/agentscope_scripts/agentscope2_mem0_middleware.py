"""Runs inside the AgentScope 2.x virtualenv: an Agent with Mem0Middleware whose client is
RemoteMem0Client, driven by the scripted model; prints what the test checks as JSON."""

import asyncio
import json
import os

from agentscope_memory.agentscope_adapters import RemoteMem0Client

REST, LLM, KEY = os.environ["MEM0_REST_URL"], os.environ["LLM_URL"], os.environ.get("MEM0_KEY")


async def main() -> None:
    from agentscope.agent import Agent
    from agentscope.credential import OpenAICredential
    from agentscope.message import Msg, TextBlock
    from agentscope.middleware import Mem0Middleware
    from agentscope.model import OpenAIChatModel

    async with RemoteMem0Client(REST, KEY) as client:
        def agent() -> Agent:
            model = OpenAIChatModel(OpenAICredential(api_key="sk-test", base_url=LLM), "scripted", stream=False)
            memory = Mem0Middleware(user_id="alice", agent_id="Friday", client=client)
            return Agent(name="Friday", system_prompt="You remember what the user likes.", model=model,
                         middlewares=[memory])

        def user(text: str) -> Msg:
            return Msg(name="user", content=[TextBlock(type="text", text=text)], role="user")

        first = await agent().reply(user("我喜欢龙井茶 (I like Longjing tea)"))
        second = await agent().reply(user("what tea do I like?"))
        found = await client.search("tea", filters={"user_id": "alice", "agent_id": "Friday"}, top_k=5)
    print(json.dumps({"first": str(first), "second": str(second), "found": found}, ensure_ascii=False))


asyncio.run(main())
