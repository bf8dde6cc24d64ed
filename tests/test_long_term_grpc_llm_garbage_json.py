"""An LLM whose JSON reply is well-formed but hostile (nested deeper than the decoder's
recursion limit, an importance of hundreds of digits, a linked position written with a digit
int() refuses) is an unusable reply like any other: recall falls back to the heuristic router
and a recorded round keeps a fact, where these replies made a search fail with INTERNAL and the
round's scoring job fail at every retry, so the user's fact was never stored. A completion
nested too deeply or with usage counts that are not counts fails no lifecycle call, and a mem0
fact of hundreds of thousands of characters is cut to a memory's text limit (it was stored
whole, past the limit, and recall left it out)."""

from __future__ import annotations

import asyncio
import json
import time

from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from scripted_llm import ScriptedLLM, ScriptedReply

DEEP = "[" * 100_000 + "]" * 100_000
VERDICT = {"importance_score": 0.9, "extracted_fact": "The user drinks green tea", "domain": "user_preferences"}


async def _facts(client: AsyncLongTermClient, scope: Scope) -> list:
    deadline = time.monotonic() + 30
    while True:
        facts = [i for i in await client.list(scope) if i.memory_type == "fact"]
        if facts or time.monotonic() > deadline:
            return facts
        await asyncio.sleep(0.1)


async def test_a_routed_search_survives_deeply_nested_json(server_factory) -> None:
    with ScriptedLLM(default=ScriptedReply.text('{"domain": ' + DEEP + "}")) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False)
        scope = Scope("助手", "用户")
        async with AsyncLongTermClient(server.address, timeout=30) as client:
            [stored] = await client.record(scope, [Msg.create(MsgRole.USER, "我喜欢喝绿茶")])
            found = await client.search(scope, "我喜欢喝什么茶？", route_query=True)
            assert stored.id in [i.id for i in found]
            assert llm.chat_requests, "the router asked the LLM"


async def test_an_importance_too_large_for_a_float_falls_back_to_the_heuristic(server_factory) -> None:
    huge = '{"importance_score": 1' + "0" * 400 + ', "extracted_fact": "x", "domain": "user_preferences"}'
    with ScriptedLLM(default=ScriptedReply.text(huge)) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False,
                                      long_term_fact_extraction="scorer")
        scope = Scope("agent", "u-huge")
        async with AsyncLongTermClient(server.address, timeout=30) as client:
            # Two sentences: the heuristic keeps the first as the round's fact.
            await client.record(scope, [Msg.create(MsgRole.USER, "Remember that I am allergic to peanuts. Thanks!")])
            [fact] = await _facts(client, scope)
            assert fact.text == "Remember that I am allergic to peanuts." and fact.importance_method == "heuristic"
            assert len(llm.chat_requests) == 1, "one call, not one per retry of a failing job"


async def test_mem0_replies_nested_too_deeply_or_linking_odd_digits_keep_the_round(server_factory) -> None:
    with ScriptedLLM() as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False)
        async with AsyncLongTermClient(server.address, timeout=30) as client:
            # Nested past the decoder's depth: unusable, the scorer's fact stands.
            deep_scope = Scope("agent", "u-deep")
            llm.push(ScriptedReply.json(VERDICT), ScriptedReply.text('{"memory": ' + DEEP + "}"))
            await client.record(deep_scope, [Msg.create(MsgRole.USER, "I drink green tea every morning")])
            [fact] = await _facts(client, deep_scope)
            assert fact.text == "The user drinks green tea" and fact.metadata["extracted_by"] == "scorer"

            # "²" is a digit to str.isdigit, not to int(); a position of thousands of digits
            # is no position either: both are ids it was never shown, and ignored.
            odd_scope = Scope("agent", "u-odd")
            mem0 = {"memory": [{"id": "0", "text": "用户每天早上喝绿茶", "linked_memory_ids": ["²", "9" * 5000]}]}
            llm.push(ScriptedReply.json(VERDICT), ScriptedReply.json(mem0))
            await client.record(odd_scope, [Msg.create(MsgRole.USER, "我每天早上喝绿茶")])
            [fact] = await _facts(client, odd_scope)
            assert fact.text == "用户每天早上喝绿茶" and fact.metadata["extracted_by"] == "mem0"
            assert fact.metadata.get("linked_memory_ids", []) == []


async def test_a_completion_nested_too_deeply_or_with_odd_usage_does_not_fail_the_lifecycle(server_factory) -> None:
    from agentscope_memory.client.lifecycle_reflect import AsyncReflectionClient

    answer = "用户对花生过敏，狗叫饼干。"
    odd_usage = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}],
                            "usage": {"prompt_tokens": "n/a", "completion_tokens": 1e400}}).encode()
    deep = DEEP.encode()
    facts = ["用户对花生过敏。", "用户的狗叫饼干。"]
    with ScriptedLLM() as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False,
                                      long_term_fact_extraction="scorer")
        async with AsyncLongTermClient(server.address, timeout=60) as memories, \
                AsyncReflectionClient(server.address, timeout=60) as lifecycle:
            for n, (body, method) in enumerate([(odd_usage, "llm"), (deep, "extractive")]):
                scope = Scope("助手", f"用户{n}")
                for fact in facts:
                    llm.push(ScriptedReply.json({**VERDICT, "extracted_fact": fact}))
                    await memories.record(scope, [Msg.create(MsgRole.USER, f"请记住：{fact}谢谢！")])
                deadline = time.monotonic() + 30
                while len(await _facts(memories, scope)) < len(facts):
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
                # The answer without usable token counts is still the answer; a body nested past
                # the decoder's depth is a malformed answer: the offline reflection stands.
                llm.push(ScriptedReply.raw(body))
                result = await lifecycle.trigger_reflection(scope, importance_threshold=1.0)
                assert result.reflected and result.method == method
                assert result.reflection is not None
                assert result.reflection.text == (answer if method == "llm" else " ".join(facts))
                llm.push(ScriptedReply.raw(body))
                found = await lifecycle.search_compressed(scope, "我对什么过敏？", min_results=1)
                assert len(found.items) > 1 and found.summary_method == method and found.summary


async def test_a_runaway_mem0_fact_is_cut_to_a_memorys_limit(server_factory) -> None:
    import grpc

    from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
    from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
    from agentscope_memory.long_term.hybrid.records import MAX_TEXT_CHARS

    # 160 000 characters, over a memory's limit; the reply (JSON-escaped) stays within the LLM
    # client's limit on a response (a larger one is unusable: test_auto_context_grpc_llm_faults).
    runaway = "用户喜欢喝绿茶。" * 20_000
    with ScriptedLLM() as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False)
        scope = Scope("助手", "u-runaway")
        async with AsyncLongTermClient(server.address, timeout=60) as client:
            llm.push(ScriptedReply.json(VERDICT),
                     ScriptedReply.json({"memory": [{"id": "0", "text": runaway, "attributed_to": "用户" * 50_000}]}))
            await client.record(scope, [Msg.create(MsgRole.USER, "我每天都喝绿茶")])
            [fact] = await _facts(client, scope)
            assert fact.text == runaway[:MAX_TEXT_CHARS] and len(fact.metadata["attributed_to"]) <= 200
            found = await client.search(scope, "我喜欢喝什么茶？")
            assert fact.id in [i.id for i in found]
        # A stock client (4 MiB receive limit) reads it and its history.
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.LongTermMemoryServiceStub(channel)
            got = await stub.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=fact.id))
            assert got.memory.memory == fact.text
            history = await stub.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=fact.id))
            assert history.entries[0].new_text == fact.text
