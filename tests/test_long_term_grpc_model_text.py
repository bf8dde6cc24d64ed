"""Text a model writes is stored alike on sqlite and PostgreSQL: a NUL in it (which PostgreSQL
text refuses and SQLite keeps) is dropped and a lone surrogate (which neither takes) becomes
U+FFFD, in facts the importance scorer extracts, facts mem0's extraction returns, and
reflections; user input with them is refused by the validation (tests/bad_input_corpus.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentscope_memory.client.lifecycle_reflect import AsyncReflectionClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.hybrid.extraction import parse_facts
from agentscope_memory.message import Msg, MsgRole
from scripted_llm import ScriptedLLM, ScriptedReply


@pytest.fixture(params=["sqlite", "postgres"])
def store_settings(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "postgres":
        return {"store": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")}
    return {}


async def _facts(client: AsyncLongTermClient, scope: Scope) -> list[str]:
    deadline = time.monotonic() + 60
    while True:
        facts = [i.text for i in await client.list(scope) if i.memory_type == "fact"]
        if facts or time.monotonic() > deadline:
            return facts
        await asyncio.sleep(0.1)


async def test_a_models_nul_and_lone_surrogates_are_stored_alike(server_factory, store_settings) -> None:
    fact = {"importance_score": 0.9, "extracted_fact": "用户对花生\u0000过敏 \ud800.", "domain": "user_preferences"}
    with ScriptedLLM(default=ScriptedReply.json(fact)) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False,
                                      long_term_fact_extraction="scorer", **store_settings)
        scope = Scope("助手", "用户")
        async with AsyncLongTermClient(server.address, timeout=60) as memories, \
                AsyncReflectionClient(server.address, timeout=60) as lifecycle:
            await memories.record(scope, [Msg.create(MsgRole.USER, "请记住，我对花生过敏。谢谢！")])
            assert await _facts(memories, scope) == ["用户对花生过敏 \ufffd."]

            llm.push(ScriptedReply.text("An allergic\u0000 user."))
            result = await lifecycle.trigger_reflection(scope, importance_threshold=0.1, min_facts=1)
            assert result.method == "llm" and result.reflection is not None
            assert result.reflection.text == "An allergic user."
            assert (await memories.get(result.reflection.id)).text == "An allergic user."


def test_mem0_extraction_facts_are_storable() -> None:
    reply = '{"memory": [{"text": "likes \\u0000green tea \\udc00", "attributed_to": "u\\u0000"}, {"text": "\\u0000"}]}'
    facts = parse_facts(reply, [])
    assert facts is not None
    assert [(f.text, f.attributed_to) for f in facts] == [("likes green tea \ufffd", "u")]
