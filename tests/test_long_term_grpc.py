"""LongTermMemoryService over gRPC: Java's tools and texts, the three modes, isolation, faults."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.long_term.tools import wrap
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.convert.to_proto import msg_to_proto
from scripted_llm import ScriptedLLM, ScriptedReply

STATIC = pb.LONG_TERM_MEMORY_MODE_STATIC_CONTROL
AGENT = pb.LONG_TERM_MEMORY_MODE_AGENT_CONTROL
BOTH = pb.LONG_TERM_MEMORY_MODE_BOTH
ALICE = pb.Scope(agent_name="Assistant", user_id="alice")


def user(text: str):
    return msg_to_proto(Msg.create(MsgRole.USER, text))


@pytest.fixture
async def ltm(server):
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.LongTermMemoryServiceStub(channel)


async def test_tools_are_javas(ltm) -> None:
    tools = {t.name: t for t in (await ltm.ListTools(pb.ListToolsRequest())).tools}
    assert list(tools) == ["recordToMemory", "retrieveFromMemory"]
    assert tools["recordToMemory"].description.startswith("Record important information to long-term memory")
    record = json.loads(tools["recordToMemory"].parameters_json_schema)
    assert record["required"] == ["thinking", "content"]
    assert record["properties"]["content"] == {
        "type": "array", "items": {"type": "string"},
        "description": "List of specific facts to remember. Each item should be clear and concise."}
    retrieve = json.loads(tools["retrieveFromMemory"].parameters_json_schema)
    assert retrieve["required"] == ["keywords"]


async def test_tool_result_texts(ltm) -> None:
    cases = [
        (pb.RecordToMemoryRequest(scope=ALICE, thinking="x", content=[]), "No content provided to record"),
        (pb.RecordToMemoryRequest(scope=ALICE, thinking="", content=["", ""]), "No valid content to record"),
    ]
    for request, text in cases:
        response = await ltm.RecordToMemory(request)
        assert (response.text, response.tool_result_text) == (text, json.dumps(text))
    nothing = await ltm.RetrieveFromMemory(pb.RetrieveFromMemoryRequest(scope=ALICE, keywords=["tea"]))
    assert nothing.text == "No relevant memories found"
    assert (await ltm.RetrieveFromMemory(pb.RetrieveFromMemoryRequest(scope=ALICE))).text == "No keywords provided for search"
    ok = await ltm.RecordToMemory(pb.RecordToMemoryRequest(
        scope=ALICE, thinking="The user shared a preference", content=["Alice drinks green tea"]))
    assert ok.text == "Successfully recorded to long-term memory"
    assert ok.tool_result_text == '"Successfully recorded to long-term memory"'
    found = await ltm.RetrieveFromMemory(pb.RetrieveFromMemoryRequest(scope=ALICE, keywords=["green", "tea"]))
    assert found.text.startswith("Below is content retrieved from the long-term memory associated with the current user, Please")
    assert "<long_term_memory>\n" in found.text and "Alice drinks green tea" in found.text
    assert json.loads(found.tool_result_text) == found.text and "\\n" in found.tool_result_text


async def test_record_retrieve_list_get_delete(ltm) -> None:
    recorded = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("I like tea"), user("I live in Oslo")],
                                                 metadata_json='{"source":"chat"}'))
    assert [m.memory for m in recorded.memories] == ["I like tea", "I live in Oslo"]
    got = await ltm.Retrieve(pb.RetrieveRequest(scope=ALICE, message=user("where does she live"), limit=1))
    assert got.text == "I live in Oslo" and got.memories[0].HasField("score")
    listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
    assert len(listed.memories) == 2 and json.loads(listed.memories[0].metadata_json) == {"source": "chat"}
    one = await ltm.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=listed.memories[0].id))
    assert one.memory.scope.user_id == "alice"
    await ltm.DeleteLongTermMemory(pb.DeleteLongTermMemoryRequest(id=one.memory.id))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await ltm.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=one.memory.id))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    deleted = await ltm.DeleteScope(pb.DeleteScopeRequest(scope=pb.Scope(user_id="alice")))
    assert deleted.deleted_count == 1
    empty = await ltm.Retrieve(pb.RetrieveRequest(scope=ALICE, message=user("anything")))
    assert empty.text == "" and not empty.memories


async def test_bad_input(ltm) -> None:
    for call, request, field in [
        (ltm.Record, pb.RecordRequest(messages=[user("x")]), "scope"),
        (ltm.Retrieve, pb.RetrieveRequest(scope=pb.Scope(user_id="a\x00b"), message=user("x")), "scope.user_id"),
        (ltm.Retrieve, pb.RetrieveRequest(scope=ALICE, message=user("x"), limit=-1), "limit"),
        # Not `top_k` (the search's name for it): the request has no such field.
        (ltm.Retrieve, pb.RetrieveRequest(scope=ALICE, message=user("x"), limit=100_000), "limit:"),
        (ltm.Record, pb.RecordRequest(scope=ALICE, messages=[user("x")], metadata_json="[1]"), "metadata_json"),
        (ltm.BeginTurn, pb.BeginTurnRequest(memory_id="m", scope=ALICE), "mode"),
        (ltm.GetLongTermMemory, pb.GetLongTermMemoryRequest(), "id"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(request)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await ltm.BeginTurn(pb.BeginTurnRequest(memory_id="missing", scope=ALICE, mode=STATIC, input=[user("hi")]))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def _turn_setup(server, ltm):
    client = AsyncMemoryClient(server.address)
    await client.create_memory("chat")
    await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("Alice is allergic to peanuts")]))
    return client


@pytest.mark.parametrize(("mode", "injects", "lists_tools"), [(STATIC, True, False), (AGENT, False, True), (BOTH, True, True)])
async def test_begin_turn_by_mode(server, ltm, mode, injects, lists_tools) -> None:
    client = await _turn_setup(server, ltm)
    try:
        question = user("Can you suggest a snack? I have allergies")
        begun = await ltm.BeginTurn(pb.BeginTurnRequest(memory_id="chat", scope=ALICE, mode=mode, input=[question]))
        stored = await client.get_messages("chat")
        assert [m.id for m in stored] == [msg_from_proto(m).id for m in begun.input]
        if injects:
            injected = msg_from_proto(begun.input[-1])
            assert len(begun.input) == 2 and injected.role is MsgRole.USER and injected.name == "long_term_memory"
            assert injected.text_content == wrap("Alice is allergic to peanuts")
        else:
            assert list(begun.input) == [question]
        assert [t.name for t in begun.tools] == (["recordToMemory", "retrieveFromMemory"] if lists_tools else [])
    finally:
        await client.close()


async def test_begin_turn_without_memories_or_user_input_injects_nothing(server, ltm) -> None:
    client = AsyncMemoryClient(server.address)
    await client.create_memory("chat")
    begun = await ltm.BeginTurn(pb.BeginTurnRequest(memory_id="chat", scope=ALICE, mode=STATIC, input=[user("hello")]))
    assert len(begun.input) == 1
    assistant_only = msg_to_proto(Msg.create(MsgRole.ASSISTANT, "peanuts"))
    begun = await ltm.BeginTurn(pb.BeginTurnRequest(memory_id="chat", scope=ALICE, mode=STATIC, input=[assistant_only]))
    assert len(begun.input) == 1
    assert len(await client.get_messages("chat")) == 2
    await client.close()


@pytest.mark.parametrize(("mode", "records"), [(STATIC, True), (AGENT, False), (BOTH, True)])
async def test_end_turn_by_mode(server, ltm, mode, records) -> None:
    client = AsyncMemoryClient(server.address)
    await client.create_memory("chat")
    await client.add_messages("chat", [Msg.create(MsgRole.USER, "My cat is called Mochi"),
                                       Msg.create(MsgRole.ASSISTANT, "Lovely name")])
    ended = await ltm.EndTurn(pb.EndTurnRequest(memory_id="chat", scope=ALICE, mode=mode))
    assert ended.recorded is records
    listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
    assert sorted(m.memory for m in listed.memories) == (["Lovely name", "My cat is called Mochi"] if records else [])
    await client.close()


async def test_a_message_longer_than_one_memory_is_recorded_in_parts(server, ltm) -> None:
    """STATIC_CONTROL records the whole conversation after every reply. One message over a
    memory's 65,536 characters (a pasted report, a fetched page) used to refuse that record, so
    long-term recording stopped for the rest of the conversation. Now it is stored as
    consecutive parts, split at sentence ends, and recording it again adds nothing."""
    report = " ".join(f"第{i}节：区域 {i} 的季度数字符合计划。Region {i} met its plan." for i in range(2800))
    report += " The backup generator is kept in building 7."
    assert 130_000 < len(report) < 196_000
    client = AsyncMemoryClient(server.address)
    await client.create_memory("long-chat")
    await client.add_messages("long-chat", [Msg.create(MsgRole.USER, report),
                                            Msg.create(MsgRole.ASSISTANT, "已总结。")])
    ended = await ltm.EndTurn(pb.EndTurnRequest(memory_id="long-chat", scope=ALICE, mode=STATIC))
    assert ended.recorded
    listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
    texts = [m.memory for m in listed.memories]
    parts = [t for t in texts if t != "已总结。"]
    assert len(parts) == 3 and "已总结。" in texts
    assert all(len(p) <= 65_536 for p in parts)
    ordered = sorted(parts, key=report.index)
    # Only the whitespace between two parts is dropped.
    assert "".join(ordered).replace(" ", "") == report.replace(" ", "")
    assert all(p.endswith((".", "。")) for p in ordered)
    await client.add_message("long-chat", Msg.create(MsgRole.USER, "谢谢"))
    assert (await ltm.EndTurn(pb.EndTurnRequest(memory_id="long-chat", scope=ALICE, mode=STATIC))).recorded
    again = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
    assert sorted(m.memory for m in again.memories) == sorted([*texts, "谢谢"])
    await client.close()


async def test_background_record_is_finished_on_shutdown(server_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(server.address) as channel, AsyncMemoryClient(server.address) as client:
        await client.create_memory("chat")
        await client.add_message("chat", Msg.create(MsgRole.USER, "I speak Basque"))
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        ended = await ltm.EndTurn(pb.EndTurnRequest(memory_id="chat", scope=ALICE, mode=BOTH, async_record=True))
        assert ended.recorded
    await server.stop(5)
    restarted = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(restarted.address) as channel:
        listed = await pb_grpc.LongTermMemoryServiceStub(channel).ListLongTermMemories(
            pb.ListLongTermMemoriesRequest(scope=ALICE))
        assert [m.memory for m in listed.memories] == ["I speak Basque"]


async def _listed(server, scope=ALICE, wait_s: float = 30.0) -> list[str]:
    """The scope's memories once there are any (background records land a little later)."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        for _ in range(int(wait_s * 10)):
            listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=scope))
            if listed.memories:
                break
            await asyncio.sleep(0.1)
        return [m.memory for m in listed.memories]


async def _store_with_memory(data, text: str):
    from agentscope_memory.short_term.in_memory import InMemoryKind
    from agentscope_memory.short_term.manager import MemoryManager
    from agentscope_memory.store import open_store

    store = open_store("sqlite", data)
    manager = MemoryManager(store, [InMemoryKind()])
    await manager.create_memory("default", "chat", "IN_MEMORY")
    await manager.add_messages("default", "chat", [Msg.create(MsgRole.USER, text)])
    return store


async def test_a_background_record_left_by_an_older_version_is_replayed(server_factory, tmp_path) -> None:
    data = tmp_path / "data"
    store = await _store_with_memory(data, "I was born in Tartu")
    # What EndTurn(async_record) wrote before the job queue existed; that server died before recording.
    pending = json.dumps({"scope": ["Assistant", "alice", ""], "count": 1})
    await store.run("default", lambda tx: tx.kv_put("chat", "ltm_pending:crashed", pending))
    await store.close()
    server = await server_factory(data_dir=data)
    assert await _listed(server) == ["I was born in Tartu"]
    assert await server.store.run("default", lambda tx: tx.kv_keys("chat", "ltm_pending:"), write=False) == []
    assert await server.service.jobs.wait_idle(30)
    assert await server.service.jobs.list_jobs("default") == []


async def test_a_background_record_queued_by_a_dead_server_runs_on_the_next(server_factory, tmp_path) -> None:
    from agentscope_memory.jobs import JobRunner
    from agentscope_memory.long_term.turns import RECORD_JOB

    data = tmp_path / "data"
    store = await _store_with_memory(data, "I keep bees")
    # A server accepted EndTurn(async_record) and died before its runner took the job.
    queued = JobRunner(store)
    payload = {"memory_id": "chat", "scope": ["Assistant", "alice", ""], "count": 1}
    await store.run("default", lambda tx: queued.enqueue_in(tx, RECORD_JOB, payload))
    await store.close()
    server = await server_factory(data_dir=data)
    assert await _listed(server) == ["I keep bees"]
    assert await server.service.jobs.wait_idle(30)
    assert await server.service.jobs.list_jobs("default") == []


async def test_background_records_go_through_the_job_queue(server_factory) -> None:
    server = await server_factory()
    await server.service.jobs.stop(0)  # nobody runs jobs: the queued one stays visible
    async with grpc.aio.insecure_channel(server.address) as channel, AsyncMemoryClient(server.address) as client:
        await client.create_memory("chat")
        await client.add_message("chat", Msg.create(MsgRole.USER, "Call me Ishmael"))
        ended = await pb_grpc.LongTermMemoryServiceStub(channel).EndTurn(
            pb.EndTurnRequest(memory_id="chat", scope=ALICE, mode=BOTH, async_record=True))
        assert ended.recorded
    [job] = await server.service.jobs.list_jobs("default")
    assert (job.kind, job.state, job.payload["count"]) == ("long_term.record", "pending", 1)
    assert await server.service.jobs.list_jobs("another-tenant") == []
    # The record job, then the scoring job the record queued for its round.
    assert await server.service.jobs.run_due() == 2
    assert await _listed(server) == ["Call me Ishmael"]
    assert await server.service.jobs.list_jobs("default") == []

async def test_tenants_are_isolated(server_factory) -> None:
    server = await server_factory(api_keys={"alice-tenant-key-0001": "tenant-a", "bob-tenant-key-00001": "tenant-b"})
    async with grpc.aio.insecure_channel(server.address) as channel:
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        a = [("x-api-key", "alice-tenant-key-0001")]
        b = [("x-api-key", "bob-tenant-key-00001")]
        recorded = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("tenant A secret")]), metadata=a)
        got = await ltm.Retrieve(pb.RetrieveRequest(scope=ALICE, message=user("secret")), metadata=b)
        assert got.text == ""
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await ltm.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=recorded.memories[0].id), metadata=b)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert (await ltm.DeleteScope(pb.DeleteScopeRequest(scope=ALICE), metadata=b)).deleted_count == 0
        assert (await ltm.Retrieve(pb.RetrieveRequest(scope=ALICE, message=user("secret")), metadata=a)).text == "tenant A secret"


async def _wait_for(predicate, timeout: float = 30.0):
    """Poll an async predicate until it is truthy (background jobs finishing); no timing asserted."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value or asyncio.get_running_loop().time() > deadline:
            return value
        await asyncio.sleep(0.05)


async def test_the_configured_llm_scores_each_round_and_extracts_its_fact(server_factory) -> None:
    verdict = {"importance_score": 0.9, "extracted_fact": "The user prefers window seats", "domain": "user_preferences"}
    stub = ScriptedLLM(default=ScriptedReply.json(verdict))
    try:
        # The scorer's fact (mem0's extraction, the default, is tested in test_long_term_lib_mem0_extraction).
        server = await server_factory(llm_base_url=stub.base_url, llm_api_key="sk-test", llm_model="scripted",
                                      long_term_fact_extraction="scorer")
        async with grpc.aio.insecure_channel(server.address) as channel:
            ltm = pb_grpc.LongTermMemoryServiceStub(channel)
            recorded = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[
                user("When I fly I always book a window seat"), msg_to_proto(Msg.create(MsgRole.ASSISTANT, "Noted"))]))
            # The round is stored as said at once; scoring runs in the background.
            assert [m.memory for m in recorded.memories] == ["When I fly I always book a window seat", "Noted"]
            assert all(m.memory_type == "message" and m.importance_method == "default" for m in recorded.memories)

            async def fact():
                listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
                return [m for m in listed.memories if m.memory_type == "fact"]

            [stored] = await _wait_for(fact)
            assert stored.memory == "The user prefers window seats" and stored.importance == pytest.approx(0.9)
            assert stored.domain == "user_preferences" and stored.importance_method == "llm"
            assert sorted(json.loads(stored.source_json)["memory_ids"]) == sorted(m.id for m in recorded.memories)
            listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
            messages = [m for m in listed.memories if m.memory_type == "message"]
            # The round's score is the user's message's; the assistant's "Noted" gets none of it.
            assert {m.memory: (round(m.importance, 3), m.importance_method) for m in messages} == {
                "When I fly I always book a window seat": (0.9, "llm"), "Noted": (0.0, "llm")}
        # One JSON call for the round.
        assert len(stub.chat_requests) == 1
        body = stub.chat_requests[0].body
        assert stub.chat_requests[0].path == "/v1/chat/completions" and body["model"] == "scripted"
        assert stub.chat_requests[0].headers.get("authorization") == "Bearer sk-test"
        assert "When I fly I always book a window seat" in body["messages"][-1]["content"]
    finally:
        stub.close()


async def test_a_low_score_stores_no_fact(server_factory) -> None:
    verdict = {"importance_score": 0.2, "extracted_fact": "The user said hello", "domain": "general_chat"}
    stub = ScriptedLLM(default=ScriptedReply.json(verdict))
    try:
        server = await server_factory(llm_base_url=stub.base_url, llm_api_key="sk-test")
        async with grpc.aio.insecure_channel(server.address) as channel:
            ltm = pb_grpc.LongTermMemoryServiceStub(channel)
            await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("hello there")]))

            async def scored():
                listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
                return [m for m in listed.memories if m.importance_method == "llm"]

            [message] = await _wait_for(scored)
            assert message.memory == "hello there" and message.domain == "general_chat"
            listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
            assert [m.memory_type for m in listed.memories] == ["message"]
    finally:
        stub.close()


async def test_a_failing_llm_delays_scoring_but_loses_nothing(server_factory) -> None:
    stub = ScriptedLLM(default=ScriptedReply.error(500))
    try:
        server = await server_factory(llm_base_url=stub.base_url, llm_api_key="sk-test", llm_max_retries=0)
        async with grpc.aio.insecure_channel(server.address) as channel:
            ltm = pb_grpc.LongTermMemoryServiceStub(channel)
            recorded = await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("x")]))
            assert [m.memory for m in recorded.memories] == ["x"]
            listed = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE))
            assert [m.memory for m in listed.memories] == ["x"]
            tool = await ltm.RecordToMemory(pb.RecordToMemoryRequest(scope=ALICE, content=["y"]))
            assert tool.text == "Successfully recorded to long-term memory"

            async def retried():
                jobs = await server.service.jobs.list_jobs("default", kind="long_term.score_round")
                return [j for j in jobs if j.last_error]

            # The scoring jobs stay queued with their error, to be retried.
            assert await _wait_for(retried)
    finally:
        stub.close()


async def test_python_client_runs_a_static_control_conversation(server) -> None:
    from agentscope_memory.client import AsyncLongTermClient
    from agentscope_memory.long_term import Scope

    scope = Scope(agent_name="Assistant", user_id="carol")
    async with AsyncMemoryClient(server.address) as memory, AsyncLongTermClient(server.address) as ltm:
        await memory.create_memory("carol-chat")
        turn = await ltm.begin_turn("carol-chat", scope, "BOTH", [Msg.create(MsgRole.USER, "I am vegan")])
        assert len(turn.input) == 1 and set(turn.tools) == {"recordToMemory", "retrieveFromMemory"}
        await memory.add_message("carol-chat", Msg.create(MsgRole.ASSISTANT, "Noted, vegan meals only."))
        assert await ltm.end_turn("carol-chat", scope, "BOTH") is True
        turn = await ltm.begin_turn("carol-chat", scope, "STATIC_CONTROL", [Msg.create(MsgRole.USER, "dinner ideas?")])
        assert turn.input[-1].name == "long_term_memory" and "I am vegan" in turn.input[-1].text_content
        assert "I am vegan" in await ltm.retrieve(scope, Msg.create(MsgRole.USER, "diet"))
        assert await ltm.forget(scope) >= 2 and await ltm.list(scope) == []


async def test_an_openai_compatible_embedder_can_replace_minilm(server_factory) -> None:
    stub = ScriptedLLM()
    try:
        server = await server_factory(long_term_embedder="openai", long_term_embedder_base_url=stub.base_url,
                                      long_term_embedder_api_key="sk-embed", long_term_embedder_model="embed-1",
                                      long_term_embedder_dims=stub.dims)
        async with grpc.aio.insecure_channel(server.address) as channel:
            ltm = pb_grpc.LongTermMemoryServiceStub(channel)
            await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[user("Alice plays the violin"), user("Bob likes golf")]))
            got = await ltm.Retrieve(pb.RetrieveRequest(scope=ALICE, message=user("which instrument does Alice play"), limit=1))
            assert got.text == "Alice plays the violin"
        embedding_calls = [r for r in stub.requests if r.path.endswith("/embeddings")]
        assert embedding_calls and all(r.body["model"] == "embed-1" and r.headers.get("authorization") == "Bearer sk-embed"
                                       for r in embedding_calls)
    finally:
        stub.close()
