"""NUL (which PostgreSQL text and jsonb refuse and SQLite keeps) and lone surrogates (which
neither takes) in long-term memory, alike on sqlite and PostgreSQL: in text a model writes (facts
the importance scorer extracts, facts mem0's extraction returns, reflections) a NUL is dropped
and a lone surrogate becomes U+FFFD; a search's metadata filter holding a NUL is refused, naming
the field, also where PostgreSQL filters a large scope itself. User input with them is refused by
the validation (tests/bad_input_corpus.py)."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
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

            # In the facts' language, so that it passes the reflection's fidelity check.
            llm.push(ScriptedReply.text("用户对花生\u0000过敏。"))
            result = await lifecycle.trigger_reflection(scope, importance_threshold=0.1, min_facts=1)
            assert result.method == "llm" and result.reflection is not None
            assert result.reflection.text == "用户对花生过敏。"
            assert (await memories.get(result.reflection.id)).text == "用户对花生过敏。"


def test_mem0_extraction_facts_are_storable() -> None:
    reply = '{"memory": [{"text": "likes \\u0000green tea \\udc00", "attributed_to": "u\\u0000"}, {"text": "\\u0000"}]}'
    facts = parse_facts(reply, [])
    assert facts is not None
    assert [(f.text, f.attributed_to) for f in facts] == [("likes green tea \ufffd", "u")]


@pytest.mark.parametrize("index_max_vectors", [None, 1], ids=["indexed", "in-database"])
@pytest.mark.parametrize("metadata_filter", ['{"k": "\\u0000"}', '{"\\u0000": 1}', '{"k": {"a": ["\\u0000"]}}'])
async def test_a_metadata_filter_with_nul_is_refused_naming_it(server_factory, store_settings, index_max_vectors,
                                                               metadata_filter) -> None:
    # A scope over `long_term_index_max_vectors` is searched by PostgreSQL itself (jsonb @>).
    extra = {"long_term_index_max_vectors": index_max_vectors} if index_max_vectors else {}
    server = await server_factory(**store_settings, **extra)
    scope = Scope("助手", "用户")
    async with AsyncLongTermClient(server.address, timeout=60) as memories, \
            grpc.aio.insecure_channel(server.address) as channel:
        for text in ("我喜欢绿茶", "I like green tea", "my dog is Rex"):
            await memories.record(scope, [Msg.create(MsgRole.USER, text)], metadata={"k": "v"})
        stub = pb_grpc.LongTermMemoryServiceStub(channel)
        request = pb.SearchLongTermMemoriesRequest(scope=pb.Scope(agent_name="助手", user_id="用户"), query="green tea")
        request.metadata_filter_json = '{"k": "v"}'
        assert len((await stub.SearchLongTermMemories(request)).results) == 3
        request.metadata_filter_json = metadata_filter
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SearchLongTermMemories(request)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert refused.value.details().startswith("metadata_filter_json: contains a NUL character")
