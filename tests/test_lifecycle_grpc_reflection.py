"""Reflection, consolidation and compressed recall through the real server over gRPC: the
background reflection after recorded facts (offline, English and Chinese), TriggerReflection
and Consolidate (dry run) through the asyncio, blocking and local Python clients, the scripted
LLM, tenant isolation, bad input, metrics, and kill -9 in the middle of a consolidation."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory.client.lifecycle_reflect import AsyncReflectionClient, ReflectionClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.errors import InvalidArgumentError, MemoryServiceError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings
from conftest import ServerProcess
from lifecycle_reflect_data import rows as cluster_rows
from scripted_llm import ScriptedLLM, ScriptedReply

# Two sentences each: the offline scorer keeps the first as the round's fact.
EN = ["Remember that I am allergic to peanuts. Thanks!", "Please remember my dog is called Biscuit. Thanks!",
      "Remember that I work at Acme Corp in Lisbon. Thanks!", "Remember that my sister Ana lives in Porto. Thanks!"]
ZH = ["请记住，我对花生过敏。谢谢！", "记住：我住在上海，在阿里巴巴工作。谢谢！", "请记住，我的生日是五月三日。谢谢！", "记住：我妹妹住在杭州。谢谢！"]


async def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def record_facts(client: AsyncLongTermClient, scope: Scope, texts: list[str]) -> None:
    for text in texts:
        await client.record(scope, [Msg.create(MsgRole.USER, text)])


async def facts_of(client: AsyncLongTermClient, scope: Scope) -> list:
    return [i for i in await client.list(scope) if i.memory_type == "fact"]


@pytest.mark.parametrize("texts", [EN, ZH], ids=["en", "zh"])
async def test_background_reflection_after_recorded_facts(server_factory, texts) -> None:
    server = await server_factory()
    scope = Scope("助手", "user-1")
    async with AsyncLongTermClient(server.address, timeout=60) as client:
        await record_facts(client, scope, texts)

        async def reflected() -> bool:
            return any(i.memory_type == "reflection" for i in await client.list(scope))

        await wait_for(reflected)
        items = await client.list(scope)
        reflection = next(i for i in items if i.memory_type == "reflection")
        assert reflection.importance == pytest.approx(0.9) and reflection.metadata["summary_method"] == "extractive"
        assert not [i for i in items if i.memory_type == "fact"], "the reflected facts leave recall and listing"
        assert len(reflection.source["memory_ids"]) == 4
        history = await client.history(reflection.id)
        assert history[0].event == "REFLECT" and history[0].detail["from"] == reflection.source["memory_ids"]
        # A reflected fact's own history says where it went (it is out of recall, not lost).
        fact_history = await client.history(reflection.source["memory_ids"][0])
        assert [h.event for h in fact_history] == ["ADD", "REFLECT"]
        assert fact_history[-1].detail["into"] == [reflection.id] and fact_history[-1].old_text


async def test_trigger_reflection_and_consolidation_through_the_clients(server_factory, tmp_path) -> None:
    server = await server_factory(lifecycle_reflection_enabled=False)
    scope = Scope("agent", "u-clients")
    async with AsyncLongTermClient(server.address, timeout=60) as memories, \
            AsyncReflectionClient(server.address, timeout=60) as lifecycle:
        await record_facts(memories, scope, EN[:2])

        async def two_facts() -> bool:
            return len(await facts_of(memories, scope)) == 2

        await wait_for(two_facts)
        not_yet = await lifecycle.trigger_reflection(scope)
        assert not not_yet.reflected and not_yet.reason == "importance below threshold"
        assert not_yet.importance_sum == pytest.approx(2.0) and not_yet.pending_facts == 2
        done = await lifecycle.trigger_reflection(scope, importance_threshold=1.0, cooldown_s=0)
        assert done.reflected and done.reflection is not None and done.method == "extractive"
        assert sorted(done.fact_ids) == sorted(done.reflection.source["memory_ids"])
        assert (await lifecycle.trigger_reflection(scope, importance_threshold=0.0)).reason == "cooldown"
        again = await lifecycle.trigger_reflection(scope, importance_threshold=0.0, min_facts=1, cooldown_s=0)
        assert again.reason == "too few facts" and again.pending_facts == 0

        compressed = await lifecycle.search_compressed(scope, "remember peanuts dog", min_results=1, max_chars=40)
        assert compressed.items and len(compressed.summary) <= 40 and compressed.summary_method == "extractive"

        report = await lifecycle.consolidate(scope, dry_run=True)
        assert not report.ran and "threshold 150" in report.reason

    def blocking_calls() -> None:  # the server runs on this test's event loop: block in a thread
        with ReflectionClient(server.address, timeout=60) as blocking:
            result = blocking.trigger_reflection(Scope("agent", "nobody"))
            assert not result.reflected and result.pending_facts == 0
            assert blocking.consolidate(Scope("agent", "nobody"), threshold=0).facts_before == 0

    await asyncio.to_thread(blocking_calls)

    local = AsyncReflectionClient.local(ServiceSettings(data_dir=tmp_path / "local", long_term_preload=False))
    async with local:
        assert (await local.trigger_reflection(scope)).pending_facts == 0
        report = await local.consolidate(scope, dry_run=True, threshold=0)
        assert not report.ran and report.dry_run and report.reason.startswith("the scope holds 0 facts")


async def test_consolidate_rpc_dry_run_then_merge_and_tenant_isolation(server_factory, tmp_path) -> None:
    keys = {"alice-tenant-key-0001": "tenant-a", "bob-tenant-key-00001": "tenant-b"}
    data = tmp_path / "data"
    await _prefill(data, Scope("agent", "用户"), clusters=10, tenant="tenant-a")
    server = await server_factory(data_dir=data, api_keys=keys)
    scope = Scope("agent", "用户")
    async with AsyncReflectionClient(server.address, api_key="alice-tenant-key-0001", timeout=120) as alice, \
            AsyncReflectionClient(server.address, api_key="bob-tenant-key-00001", timeout=120) as bob:
        dry = await alice.consolidate(scope, dry_run=True, threshold=10)
        assert dry.dry_run and dry.ran and dry.merged >= 1 and dry.facts_after == dry.facts_before == 30
        assert (await bob.consolidate(scope, threshold=0)).facts_before == 0
        report = await alice.consolidate(scope, threshold=10)
        assert report.merged == dry.merged and report.facts_after == 30 - report.originals_retired + report.merged
        merge = next(m for m in report.merges if m.applied)
        assert merge.fidelity.passed and merge.memory_id
    async with AsyncLongTermClient(server.address, api_key="alice-tenant-key-0001", timeout=60) as memories:
        merged = await memories.get(merge.memory_id)
        assert merged.metadata["fidelity_passed"] is True and "fidelity_lost_keywords" in merged.metadata
        assert sorted(merged.source["memory_ids"]) == sorted(merge.original_ids)
        assert (await memories.history(merge.memory_id))[0].event == "CONSOLIDATE"


async def test_scripted_llm_reflects_and_compresses(server_factory) -> None:
    fact = {"importance_score": 0.9, "extracted_fact": "The user is allergic to peanuts.", "domain": "user_preferences"}
    with ScriptedLLM(default=ScriptedReply.json(fact)) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False,
                                      long_term_fact_extraction="scorer")  # one scripted reply per round
        scope = Scope("agent", "u-llm")
        async with AsyncLongTermClient(server.address, timeout=60) as memories, \
                AsyncReflectionClient(server.address, timeout=60) as lifecycle:
            await memories.record(scope, [Msg.create(MsgRole.USER, EN[0])])
            fact2 = {**fact, "extracted_fact": "The user's dog is called Biscuit."}
            llm.push(ScriptedReply.json(fact2))
            await memories.record(scope, [Msg.create(MsgRole.USER, EN[1])])

            async def two_facts() -> bool:
                return len(await facts_of(memories, scope)) == 2

            await wait_for(two_facts)
            llm.push(ScriptedReply.text("A health-aware dog owner: peanut allergy, dog Biscuit."))
            result = await lifecycle.trigger_reflection(scope, importance_threshold=1.0)
            assert result.method == "llm" and result.reflection is not None
            assert result.reflection.text.startswith("A health-aware dog owner")
            assert "Biscuit" in llm.requests[-1].body["messages"][1]["content"]
            llm.push(ScriptedReply.text("Peanut allergy; dog Biscuit."))
            compressed = await lifecycle.search_compressed(scope, "remember peanuts dog", min_results=1)
            assert compressed.summary == "Peanut allergy; dog Biscuit." and compressed.summary_method == "llm"


async def test_bad_input_names_the_field(server_factory) -> None:
    server = await server_factory()
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.LongTermLifecycleServiceStub(channel)
        cases = [
            (stub.TriggerReflection, pb.TriggerReflectionRequest(), "scope"),
            (stub.TriggerReflection, pb.TriggerReflectionRequest(scope=ltm_pb.Scope(user_id="u"), min_facts=0), "min_facts"),
            (stub.TriggerReflection, pb.TriggerReflectionRequest(scope=ltm_pb.Scope(user_id="u"), cooldown_seconds=-1),
             "cooldown_seconds"),
            (stub.Consolidate, pb.ConsolidateRequest(scope=ltm_pb.Scope(user_id="u"), threshold=-1), "threshold"),
            (stub.Consolidate, pb.ConsolidateRequest(scope=ltm_pb.Scope(user_id="u"), similarity=1.5), "similarity"),
            (stub.Consolidate, pb.ConsolidateRequest(scope=ltm_pb.Scope(user_id="u"), min_cluster_size=1), "min_cluster_size"),
            (stub.Consolidate, pb.ConsolidateRequest(scope=ltm_pb.Scope()), "scope"),
        ]
        for method, request, field in cases:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await method(request)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
            assert field in caught.value.details()
        search = channel.unary_unary(
            "/agentscope.memory.v1.LongTermMemoryService/SearchLongTermMemories",
            request_serializer=ltm_pb.SearchLongTermMemoriesRequest.SerializeToString,
            response_deserializer=ltm_pb.SearchLongTermMemoriesResponse.FromString)
        for request, field in [
            (ltm_pb.SearchLongTermMemoriesRequest(scope=ltm_pb.Scope(user_id="u"), query="q", compress=True,
                                                  compress_max_chars=-5), "compress_max_chars"),
            (ltm_pb.SearchLongTermMemoriesRequest(scope=ltm_pb.Scope(user_id="u"), query="q", compress_min_results=3),
             "compress"),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await search(request)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in caught.value.details()
    async with AsyncReflectionClient(server.address) as client:
        with pytest.raises(TypeError):
            await client.consolidate(Scope("a"), bogus=1)
        with pytest.raises(InvalidArgumentError):
            await client.consolidate(Scope("a"), similarity=-3.0)


async def _prefill(data: Path, scope: Scope, clusters: int, tenant: str = "default") -> None:
    """Facts written straight into the server's sqlite store before it starts."""
    await _prefill_rows(data, scope, cluster_rows(scope, clusters), tenant)


def _fact_rows(scope: Scope, texts: list[str], importance: float = 0.5) -> list:
    """One fact per text, oldest first."""
    import uuid

    from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
    from agentscope_memory.long_term.text import tokenize
    from agentscope_memory.store.base import LongTermRow

    now = time.time() - len(texts)
    return [LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                        user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                        memory_type="fact", importance=importance, importance_method="user", created=now + i,
                        updated=now + i, last_accessed=now + i, content_hash=content_hash(text))
            for i, text in enumerate(texts)]


async def _prefill_rows(data: Path, scope: Scope, rows: list, tenant: str = "default") -> None:
    """Rows written straight into the server's sqlite store before it starts."""
    from agentscope_memory.long_term.embedder import MiniLMEmbedder
    from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
    from agentscope_memory.long_term.importance import HeuristicScorer
    from agentscope_memory.long_term.router import HeuristicRouter
    from agentscope_memory.store import open_store

    data.mkdir(parents=True, exist_ok=True)
    store = open_store("sqlite", data)
    engine = HybridEngine(store, MiniLMEmbedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                          settings=EngineSettings(scoring=False))
    await engine.open()
    await engine.insert(tenant, scope, rows)
    await engine.close()
    await store.close()


def _events(db: Path, event: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM ltm_history WHERE event = ? AND new_text IS NOT NULL",
                            (event,)).fetchone()[0]


def _merge_ids(db: Path) -> set[str]:
    """The ids of the live facts that are merges."""
    import json

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT memory_id, metadata_json FROM ltm WHERE memory_type = 'fact' AND deleted = 0").fetchall()
    return {r[0] for r in rows if "fidelity_passed" in json.loads(r[1])}


def _consistent(db: Path) -> tuple[int, int]:
    """Every merged fact's originals are deleted and every deleted original leads, through the
    merges it went into, to a live merge: (live merges, live facts)."""
    import json

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT memory_id, deleted, metadata_json, source_json FROM ltm WHERE memory_type = 'fact'").fetchall()
    by_id = {r[0]: (bool(r[1]), json.loads(r[2]), json.loads(r[3])) for r in rows}
    merges = [m for m, (deleted, meta, _) in by_id.items() if not deleted and "fidelity_passed" in meta]
    for m in merges:
        assert all(by_id[o][0] for o in by_id[m][2]["memory_ids"])
    for deleted, meta, _ in by_id.values():
        if deleted:
            # A merge may itself be merged again by a later run: follow the chain to a live merge.
            into = meta["retired_into"][0]
            for _ in range(len(by_id)):
                if not by_id[into][0]:
                    break
                into = by_id[into][1]["retired_into"][0]
            assert into in merges
    return len(merges), sum(1 for d, _, _ in by_id.values() if not d)


async def test_kill_9_mid_consolidation_then_a_rerun_completes(tmp_path) -> None:
    data = tmp_path / "data"
    scope = Scope("agent", "kill-9")
    await _prefill(data, scope, clusters=90)
    db = data / "agentscope-memory.sqlite3"
    server = ServerProcess(data)
    try:
        client = AsyncReflectionClient(server.address, timeout=300)
        call = asyncio.ensure_future(client.consolidate(scope, threshold=10))
        deadline = time.monotonic() + 120
        while _events(db, "CONSOLIDATE") < 3:
            assert time.monotonic() < deadline and not call.done(), "no merge was made"
            await asyncio.sleep(0.02)
        server.kill()
        with pytest.raises(MemoryServiceError):  # the call in flight dies with the server
            await call
        await client.close()
    finally:
        server.close()
    merges_at_kill, _ = _consistent(db)
    restarted = ServerProcess(data)
    try:
        async with AsyncReflectionClient(restarted.address, timeout=300) as client:
            report = await client.consolidate(scope, threshold=10)
            assert report.merged > 0 or merges_at_kill > 0
            final = await client.consolidate(scope, threshold=10, dry_run=True)
            # A rerun merges every cluster of the original facts that was left; what a further
            # run could still merge are merges similar to each other (a merge of merges).
            merged_ids = _merge_ids(db)
            assert all(set(m.original_ids) <= merged_ids for m in final.merges), "a rerun completes the consolidation"
    finally:
        restarted.close()
    merges, live = _consistent(db)
    assert merges >= merges_at_kill and live == report.facts_after


async def test_metrics_count_lifecycle_runs_and_durations(server_factory, tmp_path) -> None:
    import httpx

    data = tmp_path / "data"
    scope = Scope("agent", "metrics")
    await _prefill(data, scope, clusters=5)
    server = await server_factory(data_dir=data, metrics_port=0)
    async with AsyncReflectionClient(server.address, timeout=120) as client:
        report = await client.consolidate(scope, threshold=5)
        await client.trigger_reflection(scope)
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics")).text
    assert 'agentscope_memory_lifecycle_job_runs_total{job="consolidation"} 1.0' in text
    assert f'agentscope_memory_lifecycle_job_memories_total{{job="consolidation"}} {float(report.merged)}' in text
    assert 'agentscope_memory_lifecycle_job_runs_total{job="reflection"} 1.0' in text
    assert 'agentscope_memory_lifecycle_job_seconds_count{job="consolidation"} 1.0' in text


# Distinct facts about one user; like any English sentences, they share most character bigrams.
USER_FACTS = ["I am allergic to peanuts.", "My dog is called Biscuit.", "I work at Acme Corp in Lisbon.",
              "My sister Ana lives in Porto.", "I prefer green tea over coffee.", "My birthday is on May 3rd.",
              "I drive a red Toyota.", "I am learning to play the cello.", "My favourite city is Kyoto.",
              "I run marathons in spring.", "My son is named Leo.", "I dislike loud music.",
              "I use dark mode everywhere.", "My flight to Berlin is on Friday.", "I speak Portuguese and English.",
              "I own a cat named Mia.", "I play chess on weekends.", "My password hint is the river.",
              "I am vegetarian.", "I live on the third floor."]


async def test_offline_reflection_holds_every_fact_it_takes_out_of_recall(server_factory, tmp_path) -> None:
    # The offline summary dropped each sentence whose character bigrams it had mostly seen (any
    # English sentence after twenty others) and cut at 8000 characters, yet retired every fact:
    # "I live on the third floor." left recall with nothing saying it.
    data = tmp_path / "data"
    scope = Scope("agent", "u-many")
    notes = [f"My project note {i} lists " + " ".join(f"part{i}-{j}" for j in range(60)) + "." for i in range(20)]
    rows = _fact_rows(scope, USER_FACTS + notes)
    await _prefill_rows(data, scope, rows)
    text_of = {r.memory_id: r.text for r in rows}
    server = await server_factory(data_dir=data, lifecycle_reflection_enabled=False)
    async with AsyncReflectionClient(server.address, timeout=60) as lifecycle, \
            AsyncLongTermClient(server.address, timeout=60) as memories:
        result = await lifecycle.trigger_reflection(scope, cooldown_s=0)
        assert result.reflected and result.method == "extractive" and result.reflection is not None
        assert result.pending_facts == 40
        missing = [text_of[i] for i in result.fact_ids if text_of[i] not in result.reflection.text]
        assert missing == [], "a fact left recall without the reflection saying it"
        assert set(USER_FACTS) <= {text_of[i] for i in result.fact_ids}
        assert len(result.reflection.text) <= 8000
        # What did not fit waits, live, for the next reflection.
        live = {i.id for i in await facts_of(memories, scope)}
        assert live and live == set(text_of) - set(result.fact_ids)
        found = await memories.search(scope, "third floor")
        assert found and found[0].id == result.reflection.id


async def test_an_llm_reflection_that_loses_the_facts_is_replaced_by_the_offline_one(server_factory, tmp_path) -> None:
    # The facts leave recall for the reflection: a refusal, garbage, or an answer in another
    # language than the facts must not stand for them.
    data = tmp_path / "data"
    zh = ["用户对花生过敏。", "用户住在上海，在阿里巴巴工作。", "用户的妹妹住在杭州。"]
    en = ["The user is allergic to peanuts.", "The user's dog is called Biscuit."]
    scopes = {name: Scope("助手", name) for name in ("zh-english", "en-refusal", "en-garbage", "en-faithful")}
    for name, scope in scopes.items():
        await _prefill_rows(data, scope, _fact_rows(scope, zh if name.startswith("zh") else en, importance=0.9))
    with ScriptedLLM() as llm:
        server = await server_factory(data_dir=data, llm_base_url=llm.base_url, llm_max_retries=0,
                                      lifecycle_reflection_enabled=False)
        llm.push(ScriptedReply.text("The user is allergic to peanuts, works at Alibaba in Shanghai and has a sister "
                                    "in Hangzhou."),
                 ScriptedReply.text("I'm sorry, but I can't help with that."),
                 ScriptedReply.text('{"error": "rate limited"}'),
                 ScriptedReply.text("A health-aware dog owner: peanut allergy, dog Biscuit."))
        async with AsyncReflectionClient(server.address, timeout=60) as lifecycle:
            results = {name: await lifecycle.trigger_reflection(scope, importance_threshold=1.0)
                       for name, scope in scopes.items()}
        assert len(llm.chat_requests) == 4
    for name, result in results.items():
        assert result.reflected and result.reflection is not None, name
        facts = zh if name.startswith("zh") else en
        if name == "en-faithful":
            assert result.method == "llm" and result.reflection.metadata["fidelity_passed"] is True
            assert result.reflection.text == "A health-aware dog owner: peanut allergy, dog Biscuit."
        else:
            assert result.method == "extractive" and result.reflection.metadata["offline"] is True, name
            assert all(fact in result.reflection.text for fact in facts), name


async def test_a_fact_updated_while_a_job_writes_is_not_retired_with_its_old_text(server_factory, tmp_path) -> None:
    # The reflection and the merge are written from the texts read before the LLM answered: a
    # fact updated meanwhile was retired with its new text, which then said nowhere in recall.
    import threading

    data = tmp_path / "data"
    reflect_scope, merge_scope = Scope("agent", "reflect-while-updated"), Scope("agent", "merge-while-updated")
    await _prefill_rows(data, reflect_scope, _fact_rows(reflect_scope, USER_FACTS[:2], importance=0.9))
    await _prefill(data, merge_scope, clusters=1)
    with ScriptedLLM() as llm:
        server = await server_factory(data_dir=data, llm_base_url=llm.base_url, llm_max_retries=0,
                                      lifecycle_reflection_enabled=False)
        async with AsyncReflectionClient(server.address, timeout=60) as lifecycle, \
                AsyncLongTermClient(server.address, timeout=60) as memories:

            async def while_held(call, scope: Scope, new_text: str):
                llm.hold = threading.Event()
                pending = asyncio.ensure_future(call)
                try:
                    async def asked_the_llm() -> bool:
                        return len(llm.chat_requests) > asked

                    await wait_for(asked_the_llm, timeout=30)
                    fact = (await facts_of(memories, scope))[0]
                    await memories.update(fact.id, new_text)
                finally:
                    llm.hold.set()
                return await pending, fact.id

            asked = 0
            llm.push(ScriptedReply.text("The user is allergic to peanuts and has a dog called Biscuit."))
            result, updated = await while_held(
                lifecycle.trigger_reflection(reflect_scope, importance_threshold=1.0), reflect_scope,
                "My dog is called Rex now.")
            assert not result.reflected and "changed" in result.reason
            assert (await memories.get(updated)).text == "My dog is called Rex now."
            assert len(await facts_of(memories, reflect_scope)) == 2

            asked = len(llm.chat_requests)
            llm.push(ScriptedReply.text("The user really loves green tea (record 0)."))
            report, updated = await while_held(lifecycle.consolidate(merge_scope, threshold=2), merge_scope,
                                               "The user now prefers black coffee.")
            assert [m.fidelity.passed for m in report.merges] == [True], "the merge was faithful to what it read"
            assert report.merged == 0 and not report.merges[0].applied
            assert (await memories.get(updated)).text == "The user now prefers black coffee."
            assert len(await facts_of(memories, merge_scope)) == 3


# Facts alike but for a number, a name or a dotted identifier: each is a fact of its own.
NEAR_TWINS = [
    ["The user takes the train at 7:15 on weekdays.", "The user takes the train at 8:45 on weekdays.",
     "The user takes the train at 9:05 on weekdays."],
    ["项目 deadline 是 3 月 1 日。", "项目 deadline 是 6 月 30 日。", "项目 deadline 是 9 月 15 日。"],
    ["The user's flight to Berlin departs on Monday.", "The user's flight to Berlin departs on Wednesday.",
     "The user's flight to Berlin departs on Friday."],
    ["The user runs Python 3.11 with settings in config.yaml.", "The user runs Python 3.12 with settings in config.yaml.",
     "The user runs Python 3.13 with settings in config.yaml."],
]


async def test_an_offline_merge_keeps_every_original_word_for_word(server_factory, tmp_path) -> None:
    # The extractive merge dropped a sentence when few of its character bigrams were new ("at
    # 8:45" after "at 7:15"; the fidelity check does not weigh numbers) and cut sentences at
    # every full stop, rejoined with a space: "Python 3. 11 on config. yaml".
    data = tmp_path / "data"
    scope = Scope("助手", "near-twins")
    rows = _fact_rows(scope, [text for group in NEAR_TWINS for text in group])
    await _prefill_rows(data, scope, rows)
    text_of = {r.memory_id: r.text for r in rows}
    server = await server_factory(data_dir=data)
    async with AsyncReflectionClient(server.address, timeout=120) as lifecycle:
        report = await lifecycle.consolidate(scope, threshold=2)
    applied = [m for m in report.merges if m.applied]
    assert len(applied) == len(NEAR_TWINS), [m.text for m in report.merges]
    for merge in applied:
        assert [text_of[i] for i in merge.original_ids if text_of[i] not in merge.text] == [], merge.text


async def test_a_consolidation_stops_asking_an_llm_that_times_out(server_factory, tmp_path) -> None:
    # Each cluster waited out the LLM's timeout and retries again: a scope of a thousand
    # clusters behind a dead LLM took (retries + 1) * timeout a thousand times over.
    data = tmp_path / "data"
    scope = Scope("agent", "slow-llm")
    await _prefill(data, scope, clusters=10)
    with ScriptedLLM(default=ScriptedReply.text("never in time").after(2)) as llm:
        server = await server_factory(data_dir=data, llm_base_url=llm.base_url, llm_timeout_s=0.3, llm_max_retries=1,
                                      lifecycle_reflection_enabled=False)
        async with AsyncReflectionClient(server.address, timeout=120) as lifecycle:
            report = await lifecycle.consolidate(scope, threshold=10)
        asked = len(llm.chat_requests)
    assert report.merged == 10 and {m.method for m in report.merges} == {"extractive"}
    assert asked == 2, "one call and its retry, then the run merges offline"
