"""TIERED memories over real gRPC: TieredMemoryService with the asyncio, blocking and local
clients, MemoryService's AddMessages/GetMessages on a TIERED memory, StateService round trip,
restart, tenants, bad input, sqlite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as mem_grpc
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.tiered import AsyncTieredClient, TieredClient
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.errors import InvalidArgumentError, NotFoundError, UnavailableError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.short_term.tiered import MARKER_TEXT, TieredConfig
from conftest import ServerProcess
from tiered_helpers import msg, text

CONFIG = TieredConfig(l1_compact_trigger=65, l2_budget=100, score_importance=False)


@pytest.fixture(params=["sqlite", "postgres"])
async def server(request, server_factory):  # type: ignore[no-untyped-def]
    if request.param == "postgres":
        return await server_factory(store="postgres", postgres_dsn=request.getfixturevalue("postgres_dsn"),
                                    long_term_enabled=False)
    return await server_factory(long_term_enabled=False)


async def test_tiers_over_grpc_end_to_end(server) -> None:  # type: ignore[no-untyped-def]
    async with AsyncTieredClient(server.address, timeout=10) as tiered, AsyncMemoryClient(server.address) as memories:
        created = await tiered.create_memory("代理-一", CONFIG)
        assert created.kind == "TIERED" and created.tiered_config == CONFIG
        assert (await memories.get_memory("代理-一")).tiered_config == CONFIG
        result = await tiered.add("代理-一", [msg(0), msg(1)], importances=[0.9, None])
        assert result.message_count == 2 and result.status.tiers[1].items == 1
        # Plain AddMessages works on a TIERED memory and runs the moves too (5 items: compaction).
        await memories.add_messages("代理-一", [msg(2), msg(3), msg(4)])
        got = await memories.get_messages("代理-一")
        assert got[0].text_content.startswith(MARKER_TEXT)
        assert [m.text_content for m in got[1:]] == [text(3), text(4)]
        status = await tiered.status("代理-一")
        assert status.compacted and status.summaries == 1 and status.tiers[0].items == 3
        # Items and events follow their pages.
        l1 = [i async for i in tiered.iter_items("代理-一", 1, page_size=1)]
        assert [i.kind for i in l1] == ["marker", "message", "message"]
        l3 = await tiered.get_items("代理-一", 3)
        assert len(l3) == 1 and text(1) in l3[0].text and l3[0].method == "extractive-fallback"
        events = [e async for e in tiered.iter_events("代理-一", page_size=1)]
        assert [e.kind for _, e in events] == ["promote", "compact_l1"]
        l2 = await tiered.get_items("代理-一", 2)
        assert events[1][1].detail["held_elsewhere"] == l2[0].origins == [1]  # message 0 is still in L2
        # Query across tiers and project a context.
        hits = await tiered.query("代理-一", "note 0004")
        assert hits[0].text == text(4) and hits[0].tier == 1 and hits[0].relevance == 1.0
        projection = await tiered.project("代理-一", "继续之前的任务", 400, shared_context=[
            Msg.create(MsgRole.ASSISTANT, "共享池: 发布冻结")])
        assert projection.mode == "CONTEXTUAL" and projection.detected and projection.tokens <= 400
        assert projection.messages[-1].text_content == text(4)
        assert any(m.text_content == "共享池: 发布冻结" for m in projection.messages)
        compacted, after = await tiered.compact("代理-一")
        assert compacted == [] and after == await tiered.status("代理-一")


async def test_watch_sees_moves_as_they_happen(server) -> None:  # type: ignore[no-untyped-def]
    async with AsyncTieredClient(server.address, timeout=10) as tiered:
        await tiered.create_memory("w", CONFIG)
        seen: list[str] = []

        async def watch() -> None:
            async for _, event in tiered.watch_events("w"):
                seen.append(event.kind)
                if event.kind == "compact_l1":
                    return

        task = asyncio.create_task(watch())
        await tiered.add("w", [msg(0)], importances=[0.95])
        for i in range(1, 5):
            await tiered.add("w", [msg(i)])
        await asyncio.wait_for(task, 10)
        assert seen == ["promote", "compact_l1"]


async def test_a_watch_rides_out_a_server_restart_and_gives_up_after_the_deadline(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A watch used to end with `UnavailableError` the moment its server restarted, and the
    blocking client had no watch at all. Now both reopen the stream after the last event seen
    (nothing missed or repeated) with growing pauses, and raise once the client's deadline passed
    without reaching the server."""
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data)
    restarted = None
    try:
        async with AsyncTieredClient(server.address, timeout=30) as tiered:
            await tiered.create_memory("观察", CONFIG)
            await tiered.add("观察", [msg(0)], importances=[0.95])
            stream = tiered.watch_events("观察")
            first = await asyncio.wait_for(stream.__anext__(), 10)
            assert first[0] == 1 and first[1].kind == "promote"
            server.kill()
            following = asyncio.ensure_future(stream.__anext__())
            await asyncio.sleep(1.5)
            assert not following.done()
            restarted = ServerProcess(data, server.port)
            for i in range(1, 5):
                await tiered.add("观察", [msg(i)], request_id=f"add-{i}")
            sequence, event = await asyncio.wait_for(following, 20)
            assert (sequence, event.kind) == (2, "compact_l1")
            await stream.aclose()
        with TieredClient(restarted.address, timeout=1) as blocking:
            events = blocking.watch_events("观察")
            assert [(s, e.kind) for s, e in (next(events), next(events))] == [(1, "promote"), (2, "compact_l1")]
            restarted.kill()
            with pytest.raises(UnavailableError):
                await asyncio.wait_for(asyncio.to_thread(next, events), 10)
    finally:
        server.close()
        if restarted is not None:
            restarted.close()


async def test_state_round_trip_and_restart(server_factory, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "restart"
    first = await server_factory(data_dir=data, long_term_enabled=False)
    async with AsyncTieredClient(first.address) as tiered, AsyncMemoryClient(first.address) as memories:
        await tiered.create_memory("s", CONFIG)
        for i in range(12):
            await tiered.add("s", [msg(i)], importances=[0.9 if i % 3 == 0 else 0.3])
        items = {t: await tiered.get_items("s", t) for t in (1, 2, 3)}
        status = await tiered.status("s")
        entries, _ = await memories.save_state("s")
        assert {e.key for e in entries} == {"tieredMemory_l1", "tieredMemory_l2", "tieredMemory_l3",
                                            "tieredMemory_events", "tieredMemory_stats"}
        await tiered.create_memory("copy", CONFIG)
        await memories.load_state("copy", entries)
        assert {t: await tiered.get_items("copy", t) for t in (1, 2, 3)} == items
        assert (await tiered.status("copy")).tiers == status.tiers
    await first.stop(0)
    second = await server_factory(data_dir=data, long_term_enabled=False)
    async with AsyncTieredClient(second.address) as tiered:
        assert {t: await tiered.get_items("s", t) for t in (1, 2, 3)} == items
        assert await tiered.status("s") == status


@pytest.mark.parametrize(("key", "change", "field"), [
    ("tieredMemory_l1", {"created": 1e30}, "tieredMemory_l1[{}].created"),
    ("tieredMemory_l1", {"created": -1e12}, "tieredMemory_l1[{}].created"),
    ("tieredMemory_l1", {"hits": 2**70}, "tieredMemory_l1[{}].hits"),
    ("tieredMemory_l1", {"seq": 2**63 - 1}, "tieredMemory_l1[{}].seq"),
    ("tieredMemory_l1", {"origins": [2**70]}, "tieredMemory_l1[{}].origins[0]"),
    ("tieredMemory_events", {"time": 1e30}, "tieredMemory_events[{}].time"),
    ("tieredMemory_events", {"tokens": 2**70}, "tieredMemory_events[{}].tokens"),
    ("tieredMemory_stats", {"l4_vectors": 2**70}, "tieredMemory_stats.l4_vectors"),
    ("tieredMemory_stats", {"next_seq": 2**63 - 1}, "tieredMemory_stats.next_seq"),
])
async def test_a_state_with_numbers_out_of_range_is_refused_whole(server_factory, key, change, field
                                                                  ) -> None:  # type: ignore[no-untyped-def]
    # Such a state used to load, and then every read of the tier, its events or its status, or the
    # next add, failed INTERNAL (a Timestamp, an int64 or a SQLite integer out of range).
    server = await server_factory(long_term_enabled=False)
    async with AsyncTieredClient(server.address, timeout=10) as tiered, AsyncMemoryClient(server.address) as memories:
        await tiered.create_memory("source", CONFIG)
        for i in range(5):
            await tiered.add("source", [msg(i)], importances=[0.9 if i == 0 else 0.3])
        entries, _ = await memories.save_state("source")
        target = next(e for e in entries if e.key == key)
        index = len(target.items) - 1 if target.items is not None else 0  # the newest item or event
        (target.items[index] if target.items is not None else target.value).update(change)
        await tiered.create_memory("target", CONFIG)
        await tiered.add("target", [msg(9)])
        before = {t: await tiered.get_items("target", t) for t in (1, 2, 3)}
        with pytest.raises(InvalidArgumentError) as info:
            await memories.load_state("target", entries)
        assert info.value.field == field.format(index)
        assert {t: await tiered.get_items("target", t) for t in (1, 2, 3)} == before
        await tiered.add("target", [msg(10)])
        assert (await tiered.status("target")).tiers[0].items == 2


@pytest.mark.parametrize(("key", "kind"), [("tieredMemory_l3", "message"), ("tieredMemory_l2", "summary"),
                                          ("tieredMemory_l2", "marker"), ("tieredMemory_l1", "summary")])
async def test_a_state_item_of_a_kind_its_tier_never_holds_is_refused(server_factory, key, kind
                                                                       ) -> None:  # type: ignore[no-untyped-def]
    # A message loaded into L3 had no summary text: L3 sent "" to long-term memory as a summary.
    from agentscope_memory.message import msg_to_dict
    from agentscope_memory.session.state import StateEntry

    server = await server_factory(long_term_enabled=False)
    item = {"seq": 1, "kind": kind, "msg": msg_to_dict(msg(1)), "text": "a summary", "origins": [1]}
    async with AsyncTieredClient(server.address, timeout=10) as tiered, AsyncMemoryClient(server.address) as memories:
        await tiered.create_memory("target", CONFIG)
        with pytest.raises(InvalidArgumentError) as info:
            await memories.load_state("target", [StateEntry(key, items=[item])])
        assert info.value.field == f"{key}[0].kind"
        assert [await tiered.get_items("target", t) for t in (1, 2, 3)] == [[], [], []]
        # What a pass writes loads: an L3 item without a kind is a summary.
        await memories.load_state("target", [StateEntry("tieredMemory_l3", items=[{"seq": 1, "text": "a summary"}])])
        assert [(i.kind, i.text) for i in await tiered.get_items("target", 3)] == [("summary", "a summary")]


async def test_bad_input_and_wrong_kind(server) -> None:  # type: ignore[no-untyped-def]
    async with grpc.aio.insecure_channel(server.address) as channel:
        memories, tiered = mem_grpc.MemoryServiceStub(channel), pb_grpc.TieredMemoryServiceStub(channel)

        async def invalid(call, field: str) -> None:  # type: ignore[no-untyped-def]
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
            assert field in info.value.details()

        await invalid(memories.CreateMemory(mem_pb.CreateMemoryRequest(
            memory_id="x", kind=mem_pb.MEMORY_KIND_IN_MEMORY, tiered_config=mem_pb.TieredConfig(l1_budget=5))),
            "tiered_config")
        await invalid(memories.CreateMemory(mem_pb.CreateMemoryRequest(
            memory_id="x", kind=mem_pb.MEMORY_KIND_TIERED, tiered_config=mem_pb.TieredConfig(l1_budget=0))),
            "tiered_config.l1_budget")
        await invalid(memories.CreateMemory(mem_pb.CreateMemoryRequest(
            memory_id="x", kind=mem_pb.MEMORY_KIND_TIERED, tiered_config=mem_pb.TieredConfig(l2_compact_to=0.9))),
            "tiered_config.l2_compact_to")
        await memories.CreateMemory(mem_pb.CreateMemoryRequest(memory_id="t", kind=mem_pb.MEMORY_KIND_TIERED))
        from agentscope_memory.convert.to_proto import msg_to_proto

        # The request's own field, as a grpcurl or Java caller wrote it (not the library's `importances`).
        await invalid(tiered.AddTieredItems(pb.AddTieredItemsRequest(memory_id="t", items=[
            pb.TieredItemInput(message=msg_to_proto(msg(1)), importance=1.5)])), "items[0].importance")
        await invalid(tiered.AddTieredItems(pb.AddTieredItemsRequest(memory_id="t", items=[
            pb.TieredItemInput(message=msg_to_proto(msg(1))),
            pb.TieredItemInput(message=msg_to_proto(msg(2)), importance=float("nan"))])), "items[1].importance")
        await invalid(tiered.AddTieredItems(pb.AddTieredItemsRequest(memory_id="t")), "items")
        await invalid(tiered.ProjectContext(pb.ProjectContextRequest(memory_id="t", total_budget=0)), "total_budget")
        await invalid(tiered.ProjectContext(pb.ProjectContextRequest(memory_id="t", total_budget=10, include_plan=True)),
                      "plan")
        await invalid(tiered.ListTierItems(pb.ListTierItemsRequest(memory_id="t")), "tier")
        await invalid(tiered.ListTierItems(pb.ListTierItemsRequest(memory_id="t", tier=pb.TIER_L1, page_token="x")),
                      "page_token")
        await invalid(tiered.QueryTiers(pb.QueryTiersRequest(memory_id="t", weights=pb.QueryWeights(recency=2))),
                      "weights.recency")
        await invalid(tiered.GetTierStatus(pb.GetTierStatusRequest(memory_id="")), "memory_id")
        await memories.CreateMemory(mem_pb.CreateMemoryRequest(memory_id="plain", kind=mem_pb.MEMORY_KIND_IN_MEMORY))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await tiered.CompactTiers(pb.CompactTiersRequest(memory_id="plain"))
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await tiered.GetTierStatus(pb.GetTierStatusRequest(memory_id="missing"))
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        response = await tiered.GetTierStatus(pb.GetTierStatusRequest(memory_id="t"))
        assert [u.budget for u in response.status.tiers] == [8000, 16000, 32000, 100000]


async def test_tenants_do_not_see_each_other(server_factory) -> None:  # type: ignore[no-untyped-def]
    keys = {"key-for-alice-000001": "alice", "key-for-bob-00000001": "bob"}
    server = await server_factory(api_keys=keys, long_term_enabled=False)
    async with AsyncTieredClient(server.address, api_key="key-for-alice-000001") as alice, \
            AsyncTieredClient(server.address, api_key="key-for-bob-00000001") as bob:
        await alice.create_memory("shared-name", CONFIG)
        await alice.add("shared-name", [msg(1)])
        with pytest.raises(NotFoundError):
            await bob.status("shared-name")
        with pytest.raises(NotFoundError):
            await bob.add("shared-name", [msg(2)])
        await bob.create_memory("shared-name", CONFIG)
        assert (await bob.status("shared-name")).tiers[0].items == 0
        assert (await alice.status("shared-name")).tiers[0].items == 1


def test_blocking_and_local_clients(threaded_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from agentscope_memory.service import ServiceSettings

    with TieredClient(threaded_server.address) as remote:
        local = TieredClient.local(ServiceSettings(data_dir=tmp_path / "local", long_term_enabled=False))
        try:
            for client in (remote, local):
                client.create_memory("b", CONFIG)
                client.add("b", [msg(i) for i in range(5)], importances=[0.9, None, None, None, None])
                assert client.status("b").compacted
                assert [e.kind for _, e in client.get_events("b")] == ["promote", "compact_l1"]
                assert client.project("b", "fix the error", 300).mode == "DEBUG"
                assert client.query("b", "note 0004")[0].text == text(4)
                with pytest.raises(InvalidArgumentError):
                    client.project("b", "x", 0)
                with pytest.raises(NotFoundError):
                    client.status("missing")
        finally:
            local.close()


async def test_l4_over_grpc_with_the_long_term_engine(server_factory) -> None:  # type: ignore[no-untyped-def]
    from scripted_llm import ScriptedLLM
    from tiered_helpers import ITEM_TOKENS, offline_summary_tokens

    with ScriptedLLM() as llm:
        server = await server_factory(long_term_embedder="openai", long_term_embedder_base_url=llm.base_url,
                                      long_term_embedder_dims=llm.dims)
        config = TieredConfig(l1_compact_trigger=0, l1_budget=ITEM_TOKENS, l3_budget=5 * offline_summary_tokens(),
                              score_importance=False, agent_name="助手", user_id="用户-1")
        async with AsyncTieredClient(server.address, timeout=20) as tiered:
            await tiered.create_memory("l4", config)
            for i in range(6):  # 5 summaries: L3 at 100% -> its oldest one goes to L4
                await tiered.add("l4", [msg(i)])
            status = await tiered.status("l4")
            assert status.l4_vectors == 1 and status.summaries == 4
            hits = await tiered.query("l4", "note 0000", tiers=[4])
            assert len(hits) == 1 and hits[0].tier == 4 and text(0) in hits[0].text and hits[0].long_term_id
            event = [e for _, e in await tiered.get_events("l4") if e.kind == "vectorize_l3"][0]
            assert event.detail["long_term_ids"] == [hits[0].long_term_id]


async def test_memory_clients_create_tiered_memories(server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from agentscope_memory.service import ServiceSettings

    local = AsyncMemoryClient.local(ServiceSettings(data_dir=tmp_path / "local", long_term_enabled=False))
    async with AsyncMemoryClient(server.address) as remote, local:
        for client in (remote, local):
            created = await client.create_memory("层级", "TIERED", tiered_config=CONFIG)
            assert created.kind == "TIERED" and created.tiered_config == CONFIG and created.auto_context_config is None
            default = await client.create_memory("默认", "tiered")
            assert default.tiered_config == TieredConfig()
            plain = await client.create_memory("普通")
            assert plain.tiered_config is None
        with pytest.raises(InvalidArgumentError, match="tiered_config"):
            await remote.create_memory("错", "IN_MEMORY", tiered_config=CONFIG)


async def test_a_query_hit_of_a_message_near_the_size_limit_fits_a_stock_channel(server_factory) -> None:  # type: ignore[no-untyped-def]
    """A message hit carries its content twice (text and message): a 3 MiB message made a 6 MiB
    response that a stock 4 MiB channel refused (RESOURCE_EXHAUSTED on the client). The hit now
    keeps its message whole and its text cut to fit."""
    server = await server_factory(long_term_enabled=False)
    async with grpc.aio.insecure_channel(server.address) as channel:  # gRPC's default 4 MiB limit
        memories, tiered = mem_grpc.MemoryServiceStub(channel), pb_grpc.TieredMemoryServiceStub(channel)
        await memories.CreateMemory(mem_pb.CreateMemoryRequest(memory_id="大", kind=mem_pb.MEMORY_KIND_TIERED,
                                                               tiered_config=mem_pb.TieredConfig(l1_budget=10**8)))
        big = "樱桃 cherry " * 250_000  # 3.5 MB of UTF-8
        await tiered.AddTieredItems(pb.AddTieredItemsRequest(memory_id="大", items=[
            pb.TieredItemInput(message=msg_to_proto(Msg.create(MsgRole.USER, big)))]))
        hits = (await tiered.QueryTiers(pb.QueryTiersRequest(memory_id="大", query="cherry", limit=10))).hits
        assert hits[0].tier == pb.TIER_L1 and hits[0].message.content[0].text.text == big
        assert 0 < len(hits[0].text) < len(big) and big.startswith(hits[0].text)


async def test_thinking_and_inline_media_count_in_the_budgets(server_factory) -> None:  # type: ignore[no-untyped-def]
    # They were counted as nothing (thinking) or one word ("[image]"): L1 reported 18 tokens for
    # 5.8 MB, and a projection of 100 tokens selected it all and failed RESOURCE_EXHAUSTED.
    import math

    from agentscope_memory.message import Base64Source, ImageBlock, TextBlock, ThinkingBlock

    server = await server_factory(long_term_enabled=False)
    blocks = [ThinkingBlock("t" * 2_000_000), ImageBlock(Base64Source("image/png", "A" * 2_000_000)),
              ThinkingBlock("思" * 600_000)]
    msgs = [Msg(role=MsgRole.ASSISTANT, name="a", content=[b, TextBlock(f"answer {i}")]) for i, b in enumerate(blocks)]
    msgs.append(Msg.create(MsgRole.USER, "thanks", id="last"))
    async with AsyncTieredClient(server.address, timeout=30) as tiered:
        await tiered.create_memory("media", TieredConfig(l1_budget=100_000_000, l1_compact_trigger=0,
                                                         score_importance=False))
        for m in msgs:
            await tiered.add("media", [m])
        # 4 ASCII characters a token, 1.25 a Chinese character, and 4 a message; the image's text
        # is "[image]\nanswer 1".
        estimates = [(2_000_000 + len("answer 0")) / 4, (2_000_000 + len("[image]\nanswer 1")) / 4,
                     600_000 * 1.25 + len("answer 2") / 4, len("thanks") / 4]
        assert (await tiered.status("media")).tiers[0].tokens == sum(4 + math.ceil(e) for e in estimates)
        projection = await tiered.project("media", "go on with the job", total_budget=100)
        assert [m.id for m in projection.messages] == ["last"] and projection.tokens == 4 + math.ceil(6 / 4)


async def test_a_pass_moving_thousands_of_summaries_records_events_a_stock_client_reads(server_factory
                                                                                        ) -> None:  # type: ignore[no-untyped-def]
    # A loaded L3 far beyond this memory's budget left in one pass, as one evict_l3 event of 5.9 MB
    # that neither ListTierEvents nor WatchTierEvents could deliver to a 4 MiB client, ever.
    import time

    from agentscope_memory.session.state import StateEntry

    server = await server_factory(long_term_enabled=False)
    texts = [f"summary {i} " + "s" * 1990 for i in range(3000)]
    l3 = [{"seq": i + 1, "kind": "summary", "importance": 0.5, "created": time.time(), "text": t, "origins": []}
          for i, t in enumerate(texts)]
    async with AsyncTieredClient(server.address, timeout=60) as tiered, AsyncMemoryClient(server.address) as memories:
        await tiered.create_memory("big", TieredConfig(score_importance=False))
        await memories.load_state("big", [StateEntry("tieredMemory_l3", items=l3),
                                          StateEntry("tieredMemory_stats", value={"next_seq": 3001})])
        await tiered.add("big", [msg(1)])
        status = await tiered.status("big")
        left = status.evicted_summaries
        assert left > 2900 and status.tiers[2].items == 3000 - left and status.tiers[2].tokens <= 32_000
    async with grpc.aio.insecure_channel(server.address) as channel:  # stock options: 4 MiB
        stub = pb_grpc.TieredMemoryServiceStub(channel)
        events, token = [], ""
        while True:
            page = await stub.ListTierEvents(pb.ListTierEventsRequest(memory_id="big", page_token=token))
            events += page.events
            token = page.next_page_token
            if not token:
                break
        assert {e.kind for e in events} == {"evict_l3"} and len(events) > 1
        assert [s for e in events for s in e.item_sequences] == list(range(1, left + 1))
        assert [t for e in events for t in json.loads(e.detail_json)["texts"]] == texts[:left]
        watched = []
        async for response in stub.WatchTierEvents(pb.WatchTierEventsRequest(memory_id="big")):
            watched.append(response.event.sequence)
            if len(watched) == len(events):
                break
        assert watched == [e.sequence for e in events]
