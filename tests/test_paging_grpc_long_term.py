"""ListLongTermMemories pages with signed tokens bound to the tenant, the scope and the page size."""

from __future__ import annotations

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2 as pb,
)
from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2_grpc as pb_grpc,
)
from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole

ALICE = pb.Scope(agent_name="Assistant", user_id="alice")
BOB = pb.Scope(agent_name="Assistant", user_id="bob")


async def test_long_term_memories_page_and_tokens_are_bound(server) -> None:
    facts = [f"事实 {i}: fact number {i}" for i in range(7)]
    async with grpc.aio.insecure_channel(server.address) as channel:
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        await ltm.Record(pb.RecordRequest(scope=ALICE, messages=[msg_to_proto(Msg.create(MsgRole.USER, f)) for f in facts]))
        await ltm.Record(pb.RecordRequest(scope=BOB, messages=[msg_to_proto(Msg.create(MsgRole.USER, "bob's"))]))
        seen: list[str] = []
        token, pages = "", 0
        while True:
            page = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=ALICE, page_size=3, page_token=token))
            seen += [m.memory for m in page.memories]
            token, pages = page.next_page_token, pages + 1
            if pages == 1:
                first_token = token
            if not token:
                break
        assert sorted(seen) == sorted(facts) and pages == 3
        for request in (pb.ListLongTermMemoriesRequest(scope=BOB, page_size=3, page_token=first_token),
                        pb.ListLongTermMemoriesRequest(scope=ALICE, page_size=4, page_token=first_token),
                        pb.ListLongTermMemoriesRequest(scope=ALICE, page_size=3, page_token="OTk5OTk5OTk5OTk5OTk5OTk5OTk5")):
            with pytest.raises(grpc.aio.AioRpcError) as failure:
                await ltm.ListLongTermMemories(request)
            assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert failure.value.details() == "page_token: invalid or expired"
    # The Python client follows the pages up to its limit.
    async with AsyncLongTermClient(server.address) as client:
        scope = Scope(agent_name="Assistant", user_id="alice")
        assert sorted(i.text for i in await client.list(scope, limit=1000)) == sorted(facts)
        assert len(await client.list(scope, limit=5)) == 5


async def test_record_search_and_retrieve_answers_fit_a_stock_client(server) -> None:
    # 80 memories carrying 64 KB of metadata each are 5 MB: Record's echo of them, a search with
    # a large top_k and a retrieve with a large limit each used to answer more than a stock
    # client's 4 MiB, failing after the records were stored. Each answer now carries the best
    # memories that fit (the rest stay stored and listed).
    import json

    scope = pb.Scope(user_id="big-metadata")
    texts = [f"entry {i} about sailing boats" for i in range(80)]
    async with grpc.aio.insecure_channel(server.address) as channel:  # gRPC's default 4 MiB limit
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        recorded = await ltm.Record(pb.RecordRequest(
            scope=scope, messages=[msg_to_proto(Msg.create(MsgRole.USER, t)) for t in texts],
            metadata_json=json.dumps({"blob": "m" * 65_000})))
        assert 50 < len(recorded.memories) < 80 and recorded.ByteSize() <= 4 * 1024 * 1024
        listed: list[str] = []
        token = ""
        while True:
            page = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=scope, page_token=token))
            listed += [m.memory for m in page.memories]
            token = page.next_page_token
            if not token:
                break
        assert sorted(listed) == sorted(texts)
        found = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
            scope=scope, query="sailing boats", top_k=1000, top_k_semantic=1000))
        assert 50 < len(found.results) < 80
        finals = [r.scores.final for r in found.results]
        assert finals == sorted(finals, reverse=True)
        got = await ltm.Retrieve(pb.RetrieveRequest(scope=scope, message=msg_to_proto(Msg.create(MsgRole.USER, "sailing")),
                                                    limit=1000))
        assert 0 < len(got.memories) < 80 and got.text == "\n".join(m.memory for m in got.memories)
    # The Python client reads them all although the byte budget cuts its pages short (a page
    # token is bound to the page size, so each page must ask for the same size).
    async with AsyncLongTermClient(server.address) as client:
        listed_by_client = await client.list(Scope(user_id="big-metadata"), limit=1000)
        assert sorted(i.text for i in listed_by_client) == sorted(texts)
        assert len(await client.list(Scope(user_id="big-metadata"), limit=70)) == 70


@pytest.mark.parametrize("call", ["search", "retrieve"])
async def test_an_answer_cut_by_the_byte_budget_touches_only_what_it_holds(server_factory, call) -> None:
    # Recall keeps a memory from decaying: the memories an answer's byte budget (4 MiB; here
    # `max_page_bytes`, smaller) had no room for were not recalled, so their access count and
    # last access stay as they were.
    import asyncio
    import json

    server = await server_factory(max_page_bytes=1024 * 1024)
    scope = pb.Scope(user_id=f"被截断-{call}")
    texts = [f"记录 {i}：关于帆船的笔记 notes on sailing boats" for i in range(40)]
    async with grpc.aio.insecure_channel(server.address) as channel:
        ltm = pb_grpc.LongTermMemoryServiceStub(channel)
        await ltm.Record(pb.RecordRequest(
            scope=scope, messages=[msg_to_proto(Msg.create(MsgRole.USER, t)) for t in texts],
            metadata_json=json.dumps({"blob": "帆" * 21_000})))
        ids = []
        token = ""
        while True:
            page = await ltm.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=scope, page_token=token))
            ids += [m.id for m in page.memories]
            token = page.next_page_token
            if not token:
                break
        assert len(ids) == len(texts)
        if call == "search":
            found = await ltm.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
                scope=scope, query="sailing boats 帆船", top_k=1000, top_k_semantic=1000))
            answered = [r.memory.id for r in found.results]
        else:
            got = await ltm.Retrieve(pb.RetrieveRequest(
                scope=scope, message=msg_to_proto(Msg.create(MsgRole.USER, "sailing boats 帆船")), limit=1000))
            answered = [m.id for m in got.memories]
        assert 0 < len(answered) < len(texts)
        for _ in range(100):  # touches land in the background: one transaction for an answer
            first = await ltm.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=answered[0]))
            if first.memory.access_count:
                break
            await asyncio.sleep(0.05)
        counts = {i: (await ltm.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=i))).memory.access_count for i in ids}
        assert {counts[i] for i in answered} == {1}
        assert {counts[i] for i in ids if i not in answered} == {0}
