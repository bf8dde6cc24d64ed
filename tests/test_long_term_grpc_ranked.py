"""SearchLongTermMemories, UpdateLongTermMemory and GetLongTermMemoryHistory over real gRPC; the
round-scoring job surviving kill -9; memories of the mem0 engine migrated once."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole
from conftest import ServerProcess
from mem0_layout import write_mem0_layout
from scripted_llm import ScriptedLLM, ScriptedReply

ALICE = pb.Scope(agent_name="Assistant", user_id="alice")
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def user(text: str):
    return msg_to_proto(Msg.create(MsgRole.USER, text))


@pytest.fixture
async def ltm(server):
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.LongTermMemoryServiceStub(channel)


async def test_search_returns_every_score_component(ltm) -> None:
    # Separate conversations: a message is indexed lexically with the two before it in its own.
    for text in ("My sister Anna lives in Berlin", "我每天早上喝绿茶", "I play chess"):
        await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user(text)]))
    got = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(scope=ALICE, query="where does Anna live"))
    assert got.results[0].memory.memory == "My sister Anna lives in Berlin" and got.routed_domain == ""
    for r in got.results:
        s = r.scores
        assert s.final == pytest.approx(0.5 * s.semantic + s.dense**2 * (0.2 * s.decay + 0.3 * s.importance))
        assert r.memory.score == pytest.approx(s.final) and r.memory.memory_type == "message"
    first = got.results[0].scores
    assert first.dense > 0 and first.lexical == 1.0
    # Per-request weights and rankings; the seed formula counts importance whatever the relevance.
    only_importance = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
        scope=ALICE, query="Anna", alpha=0.0, beta=0.0, gamma=1.0, top_k=2, ranking=pb.LONG_TERM_RANKING_SEED))
    assert len(only_importance.results) == 2
    assert all(r.scores.final == pytest.approx(r.scores.importance) for r in only_importance.results)
    seed = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
        scope=ALICE, query="where does Anna live", ranking=pb.LONG_TERM_RANKING_SEED))
    for r in seed.results:
        s = r.scores
        assert s.final == pytest.approx(0.5 * s.semantic + 0.2 * s.decay + 0.3 * s.importance)
    lexical = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
        scope=ALICE, query="绿茶", ranking=pb.LONG_TERM_RANKING_LEXICAL))
    assert [r.memory.memory for r in lexical.results] == ["我每天早上喝绿茶"]
    chinese = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(scope=ALICE, query="她喝什么茶", top_k=1))
    assert chinese.results[0].memory.memory == "我每天早上喝绿茶"
    small_talk = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(scope=ALICE, query="thanks!", route_query=True))
    assert (list(small_talk.results), small_talk.routed_domain) == ([], "general_chat")
    filtered = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
        scope=ALICE, query="Anna", memory_types=["fact"]))
    assert list(filtered.results) == []


async def test_update_and_history(ltm) -> None:
    recorded = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("I like tea")], metadata_json='{"k":1}'))
    memory_id = recorded.memories[0].id
    updated = await ltm.UpdateLongTermMemory(pb.UpdateLongTermMemoryRequest(
        id=memory_id, text="I like coffee now", importance=0.9, metadata_json='{"来源":"用户"}'))
    assert updated.memory.memory == "I like coffee now" and updated.memory.importance == pytest.approx(0.9)
    assert json.loads(updated.memory.metadata_json) == {"k": 1, "来源": "用户"}
    assert updated.memory.importance_method == "user"
    only_metadata = await ltm.UpdateLongTermMemory(pb.UpdateLongTermMemoryRequest(id=memory_id, metadata_json='{"k":2}'))
    assert only_metadata.memory.memory == "I like coffee now"
    history = await ltm.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=memory_id))
    events = [(e.event, e.old_text if e.HasField("old_text") else None, e.new_text) for e in history.entries]
    assert events[0] == ("ADD", None, "I like tea")
    assert ("UPDATE", "I like tea", "I like coffee now") in events
    assert json.loads(history.entries[-1].detail_json)["metadata"]["new"]["k"] == 2
    found = await ltm.Retrieve(pb.RetrieveRequest(scope=ALICE, message=user("what do I drink"), limit=1))
    assert found.text == "I like coffee now"
    # A page size over the maximum (1000) is served as the maximum (AIP-158), not refused.
    whole = await ltm.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=memory_id, page_size=5000))
    assert [e.event for e in whole.entries] == [e.event for e in history.entries] and not whole.next_page_token
    listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE, page_size=5000))
    assert memory_id in [m.id for m in listed.memories]


async def test_bad_input_names_the_field_and_changes_nothing(ltm) -> None:
    recorded = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("x")]))
    memory_id = recorded.memories[0].id
    search = pb.SearchLongTermMemoriesRequest
    cases = [
        (ltm.SearchLongTermMemories, search(scope=pb.Scope(), query="x"), "scope"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query=" "), "query"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", top_k=-1), "top_k"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", top_k=1001), "top_k"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", top_k_semantic=-5), "top_k_semantic"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", ranking=99), "ranking"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", alpha=1.5), "alpha"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", beta=-0.1), "beta"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", gamma=float("nan")), "gamma"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", delta=2), "delta"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", decay_rate=0), "decay_rate"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", dense_weight=-1), "dense_weight"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", memory_types=["note"]), "memory_types"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", domains=["天气"]), "domains"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", created_after=-1), "created_after"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", created_after=10, created_before=5), "created_before"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", metadata_filter_json="[1]"), "metadata_filter_json"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id), "text"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, text=""), "text"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, importance=1.1), "importance"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, metadata_json="{"), "metadata_json"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(text="y"), "id"),
        (ltm.GetLongTermMemoryHistory, pb.GetLongTermMemoryHistoryRequest(), "id"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", alpha=float("inf")), "alpha"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", top_k_semantic=100_000), "top_k_semantic"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", created_before=float("nan")), "created_before"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", metadata_filter_json="{bad"), "metadata_filter_json"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", metadata_filter_json='{"a":' * 300 + "1" + "}" * 300),
         "metadata_filter_json"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", compress=True, compress_min_results=-1),
         "compress_min_results"),
        (ltm.SearchLongTermMemories, search(scope=ALICE, query="x", compress=True, compress_max_chars=-1),
         "compress_max_chars"),
        (ltm.SearchLongTermMemories, search(scope=pb.Scope(user_id="a" * 10_000), query="x"), "scope"),
        (ltm.SearchLongTermMemories, search(scope=pb.Scope(user_id="bad\x00id"), query="x"), "scope"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, importance=float("nan")), "importance"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, metadata_json="[1, 2]"), "metadata"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, metadata_json='{"k": "\\u0000"}'),
         "metadata"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id="a\x00b", text="y"), "id"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, text="a\x00b"), "text"),
        (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, metadata_json=json.dumps({"k": "m" * 70_000})),
         "metadata_json"),
        (ltm.GetLongTermMemoryHistory, pb.GetLongTermMemoryHistoryRequest(id="x" * 10_000), "id"),
        (ltm.ListLongTermMemories, pb.ListLongTermMemoriesRequest(scope=ALICE, page_token="不是令牌"), "page_token"),
        (ltm.ListLongTermMemories, pb.ListLongTermMemoriesRequest(scope=ALICE, page_size=-1), "page_size"),
    ]
    failures = []
    for n, (call, request, field_name) in enumerate(cases):
        try:
            await call(request)
            failures.append(f"case {n} ({field_name}): accepted")
        except grpc.aio.AioRpcError as err:
            if err.code() not in (INVALID, grpc.StatusCode.RESOURCE_EXHAUSTED) or field_name not in (err.details() or ""):
                failures.append(f"case {n} ({field_name}): {err.code().name} {err.details()!r}")
    assert not failures, "\n".join(failures)
    got = await ltm.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=memory_id))
    # Only the background scoring (ASSESS) may have touched it, never a rejected update.
    assert got.memory.memory == "x" and got.memory.importance_method in ("default", "heuristic")
    history = await ltm.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=memory_id))
    assert [e.event for e in history.entries if e.event != "ASSESS"] == ["ADD"]


async def test_new_rpcs_are_tenant_and_scope_isolated(server_factory) -> None:
    server = await server_factory(api_keys={"alice-tenant-key-0001": "tenant-a", "bob-tenant-key-00001": "tenant-b"})
    a = [("x-api-key", "alice-tenant-key-0001")]
    b = [("x-api-key", "bob-tenant-key-00001")]
    async with grpc.aio.insecure_channel(server.address) as channel:
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        mine = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("tenant A secret")]), metadata=a)
        await ltm.Record(pb.RecordRequest(scope=pb.Scope(user_id="bob"), messages=[user("bob's secret")]), metadata=a)
        memory_id = mine.memories[0].id
        found = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(scope=ALICE, query="secret"), metadata=b)
        assert list(found.results) == []
        found = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(scope=ALICE, query="secret"), metadata=a)
        assert [r.memory.memory for r in found.results] == ["tenant A secret"]
        for call, request in [
            (ltm.UpdateLongTermMemory, pb.UpdateLongTermMemoryRequest(id=memory_id, text="stolen")),
            (ltm.GetLongTermMemoryHistory, pb.GetLongTermMemoryHistoryRequest(id=memory_id)),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(request, metadata=b)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND
        got = await ltm.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=memory_id), metadata=a)
        assert got.memory.memory == "tenant A secret"


def _config(tmp_path: Path, llm_url: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(f'llm_base_url = "{llm_url}"\nllm_api_key = "sk-test"\nllm_max_retries = 0\nllm_timeout_s = 120\n')
    return str(path)


@pytest.mark.slow
async def test_round_scoring_survives_kill_9(tmp_path) -> None:
    verdict = {"importance_score": 0.95, "extracted_fact": "The user's cat is called Miso", "domain": "lifestyle_and_interests"}
    slow = ScriptedLLM(default=ScriptedReply.json(verdict).after(120))
    fast = ScriptedLLM(default=ScriptedReply.json(verdict))
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data, None, "--config", _config(tmp_path, slow.base_url))
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            ltm = pb_grpc.LongTermMemoryServiceStub(channel)
            await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("My cat is called Miso")]))
        # Kill the server while the scoring call is in flight.
        deadline = time.monotonic() + 60
        while not slow.chat_requests and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert slow.chat_requests
        server.kill()
        restarted = ServerProcess(data, None, "--config", _config(tmp_path, fast.base_url))
        try:
            async with grpc.aio.insecure_channel(restarted.address) as channel:
                ltm = pb_grpc.LongTermMemoryServiceStub(channel)

                async def facts():
                    listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
                    return [m for m in listed.memories if m.memory_type == "fact"]

                deadline = time.monotonic() + 120  # the dead server's lease runs out first
                while not await facts() and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                assert [m.memory for m in await facts()] == ["The user's cat is called Miso"]
                listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
                assert sorted(m.memory for m in listed.memories) == ["My cat is called Miso", "The user's cat is called Miso"]
        finally:
            restarted.close()
    finally:
        server.close()
        slow.close()
        fast.close()


async def test_mem0_data_is_migrated_once_losing_nothing(tmp_path, server_factory) -> None:
    from agentscope_memory.long_term import Scope

    data = tmp_path / "data"
    # Today's layout: the mem0 engine's embedded Qdrant and history under <data_dir>/mem0.
    layout = await write_mem0_layout(data)
    kept, other = layout.kept, layout.other

    server = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(server.address) as channel:
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
        assert {(m.id, m.memory) for m in listed.memories} == {(kept[0].id, "I like green tea"), (kept[1].id, "好的，记住了")}
        assert all(json.loads(m.metadata_json) == {"source": "chat"} for m in listed.memories)
        history = await ltm.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=kept[0].id))
        assert [(e.event, e.new_text) for e in history.entries] == [("ADD", "I like tea"), ("UPDATE", "I like green tea")]
        found = await ltm.Retrieve(pb.RetrieveRequest(scope=ALICE, message=user("what do I drink"), limit=1))
        assert found.text == "I like green tea"
        # Recording the same conversation again stores nothing new (hashes came along).
        again = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("I like green tea")]))
        assert list(again.memories) == []
    migrated = await server.service.long_term.list("tenant-b", Scope(user_id="bob"))
    assert [(m.id, m.text) for m in migrated] == [(other[0].id, "Bob sails")]
    assert await server.service.long_term.list("default", Scope(user_id="carol")) == []
    # The old directory is left as it was.
    assert (data / "mem0" / "qdrant").exists()
    await server.stop(0)

    # A second start migrates nothing again.
    again_server = await server_factory(data_dir=data)
    assert len(await again_server.service.long_term.list("default", Scope(agent_name="Assistant", user_id="alice"))) == 2


@pytest.mark.parametrize("where", ["sqlite", "postgres-indexed", "postgres-in-database"])
async def test_a_metadata_filter_means_equal_values_wherever_the_scope_is_searched(server_factory, request,
                                                                                    where) -> None:
    # `metadata_filter_json` keeps memories whose metadata holds each key "with an equal value":
    # true is not 1, and a list or object is equal only to the same list or object. A scope
    # over `long_term_index_max_vectors` on PostgreSQL is searched by the database, the others
    # by the in-memory index: the same filter must keep the same memories either way.
    settings: dict[str, object] = {}
    if where != "sqlite":
        settings = {"store": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")}
    if where == "postgres-in-database":
        settings["long_term_index_max_vectors"] = 1
    server = await server_factory(**settings)
    scope = pb.Scope(user_id=f"过滤-{where}")
    stored = {
        "真 verified true": {"verified": True}, "一 verified one": {"verified": 1},
        "字 verified text": {"verified": "true"}, "标签 tags a b": {"tags": ["a", "b"]}, "标签 tags a": {"tags": ["a"]},
        "地点 place full": {"place": {"城市": "北京", "区": "海淀"}}, "地点 place city": {"place": {"城市": "北京"}},
    }
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.LongTermMemoryServiceStub(channel)
        for text, metadata in stored.items():
            await stub.Record(pb.RecordRequest(scope=scope, messages=[user(text)], metadata_json=json.dumps(metadata)))

        async def kept(wanted: dict[str, object]) -> set[str]:
            found = await stub.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
                scope=scope, query="verified tags place 标签 地点", top_k=100, metadata_filter_json=json.dumps(wanted)))
            return {r.memory.memory for r in found.results}

        assert await kept({"verified": True}) == {"真 verified true"}
        assert await kept({"verified": 1}) == {"一 verified one"}
        assert await kept({"verified": 1.0}) == {"一 verified one"}
        assert await kept({"tags": ["a"]}) == {"标签 tags a"}
        assert await kept({"place": {"城市": "北京"}}) == {"地点 place city"}
