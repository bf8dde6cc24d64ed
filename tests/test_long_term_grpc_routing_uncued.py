"""Routed recall (`route_query`, `long_term_route_queries`) with the offline heuristics finds a
fact that matches no domain cue: the scorer files it where the router sends a question that
matches none (user_preferences); small talk and chatter stay general_chat. The scorer filed such
facts ("my birthday is May 3", "我的生日是五月三日") as general_chat, which a routed search never
shows, so the user's birthday, scored 1.0, was found by no routed recall."""

from __future__ import annotations

import asyncio
import time

from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole

ROUNDS = {"en": "Remember that my birthday is May 3. Thanks!", "zh": "请记住，我的生日是五月三日。谢谢！"}


async def test_a_routed_question_finds_a_fact_no_domain_cue_matches(server_factory) -> None:
    server = await server_factory(lifecycle_reflection_enabled=False)
    async with AsyncLongTermClient(server.address, timeout=60) as memories:
        for lang, question, small_talk in [("en", "When is my birthday?", "Thanks!"),
                                           ("zh", "我的生日是哪天？", "谢谢！")]:
            scope = Scope("助手", f"用户-{lang}")
            await memories.record(scope, [Msg.create(MsgRole.USER, ROUNDS[lang])])
            await memories.record(scope, [Msg.create(MsgRole.USER, small_talk)])
            deadline = time.monotonic() + 30
            while not (facts := [i for i in await memories.list(scope) if i.memory_type == "fact"]) or any(
                    not i.domain for i in await memories.list(scope)):
                assert time.monotonic() < deadline, "the rounds were not assessed"
                await asyncio.sleep(0.1)
            [fact] = facts
            assert fact.importance >= 0.9 and fact.domain == "user_preferences"
            found = await memories.search(scope, question, route_query=True)
            assert fact.id in [i.id for i in found]
            # Small talk stays general_chat: no routed recall shows it.
            assert small_talk not in [i.text for i in found]
            assert {i.domain for i in await memories.list(scope) if i.text == small_talk} == {"general_chat"}
