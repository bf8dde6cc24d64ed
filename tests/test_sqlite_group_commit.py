"""Group commit on the embedded store: small writes arriving together share one transaction,
each undone alone when it fails, none acknowledged before the shared commit; a lone caller's
writes still run alone, without waiting for company."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store.sqlite import SqliteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "s.sqlite3")
    try:
        yield store
    finally:
        await store.close()


def put(key: str, value: str) -> Callable[[Any], str]:
    def fn(tx: Any) -> str:
        tx.kv_put("记忆", key, value)
        return value
    return fn


async def get(store: SqliteStore, key: str) -> str | None:
    return await store.run("租户", lambda tx: tx.kv_get("记忆", key), write=False, small=True)


async def burst(store: SqliteStore, fns: list[Callable[[Any], Any]]) -> list[Any]:
    """Writes started together, as concurrent requests' handlers start them."""
    return await asyncio.gather(*(store.run("租户", fn, small=True) for fn in fns), return_exceptions=True)


async def gathering(store: SqliteStore) -> None:
    """Bring the store to gathering: a burst large enough that its probe finds company."""
    await burst(store, [put(f"预热{i}", "v") for i in range(20)])
    assert store.group_commit.stats.largest >= 2


async def test_concurrent_writes_share_transactions_and_all_land(store: SqliteStore) -> None:
    results = await burst(store, [put(f"键{i}", f"值{i}") for i in range(40)])
    assert results == [f"值{i}" for i in range(40)]
    stats = store.group_commit.stats
    # The first writes ran alone until a probe found the rest arriving with it.
    assert stats.largest >= 20 and stats.writes >= 20
    assert [await get(store, f"键{i}") for i in range(40)] == [f"值{i}" for i in range(40)]
    # Now gathering: the next burst commits in a few transactions, not forty.
    before = stats.batches
    assert await burst(store, [put(f"键{i}", f"新{i}") for i in range(40)]) == [f"新{i}" for i in range(40)]
    assert stats.batches - before <= 2
    assert await get(store, "键39") == "新39"


async def test_a_lone_callers_writes_never_wait_for_company(store: SqliteStore) -> None:
    for i in range(100):
        assert await store.run("租户", put(f"键{i}", "v"), small=True) == "v"
    stats = store.group_commit.stats
    # Only the periodic probes gathered, each found itself alone, and gathering never started.
    assert stats.largest == 1 and stats.batches == 100 // 16
    assert await get(store, "键99") == "v"


async def test_a_failing_write_is_undone_alone_and_the_others_commit(store: SqliteStore) -> None:
    await gathering(store)

    def half_then_fail(tx: Any) -> None:
        tx.kv_put("记忆", "失败的", "写了一半")
        raise ValueError("不行")

    results = await burst(store, [put("甲", "1"), half_then_fail, put("乙", "2")])
    assert results[0] == "1" and results[2] == "2"
    assert isinstance(results[1], ValueError) and str(results[1]) == "不行"
    assert await get(store, "失败的") is None
    assert (await get(store, "甲"), await get(store, "乙")) == ("1", "2")
    # The same key written by two writes of one batch: the later wins, as run one after the other.
    await burst(store, [put("同", "先"), put("同", "后")])
    assert await get(store, "同") == "后"


async def test_a_write_cancelled_before_its_batch_commits_never_happens(store: SqliteStore) -> None:
    await gathering(store)
    writes = [asyncio.ensure_future(store.run("租户", put(f"键{i}", "v"), small=True)) for i in range(5)]
    await asyncio.sleep(0)
    assert store.group_commit.waiting == 5
    writes[2].cancel()
    done = await asyncio.gather(*writes, return_exceptions=True)
    assert isinstance(done[2], asyncio.CancelledError)
    assert [done[i] for i in (0, 1, 3, 4)] == ["v"] * 4
    assert await get(store, "键2") is None
    assert await get(store, "键4") == "v"


async def test_a_gathered_batch_waits_for_a_lock_another_program_holds(store: SqliteStore, tmp_path: Path) -> None:
    await gathering(store)
    other = sqlite3.connect(tmp_path / "s.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        writes = asyncio.ensure_future(burst(store, [put(f"锁{i}", "v") for i in range(6)]))
        await asyncio.sleep(0.3)
        assert not writes.done()
        other.execute("COMMIT")
        assert await asyncio.wait_for(writes, 15) == ["v"] * 6
    finally:
        other.close()
    assert [await get(store, f"锁{i}") for i in range(6)] == ["v"] * 6


async def test_closing_commits_the_batch_being_gathered(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.sqlite3")
    await gathering(store)
    writes = asyncio.ensure_future(burst(store, [put(f"关{i}", "v") for i in range(4)]))
    while store.group_commit.waiting < 4:
        await asyncio.sleep(0)
    await store.close()
    assert await writes == ["v"] * 4
    reopened = SqliteStore(tmp_path / "s.sqlite3")
    try:
        assert [await get(reopened, f"关{i}") for i in range(4)] == ["v"] * 4
    finally:
        await reopened.close()


async def test_concurrent_adds_over_grpc_each_land_once(server_factory) -> None:
    """Thirty-two callers adding at once, some retrying a request id inside the same burst:
    every add is acknowledged with its own count and stored once, in acknowledgement order."""
    server = await server_factory(long_term_enabled=False)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="群聊", kind=pb.MEMORY_KIND_IN_MEMORY))

        built = {i: msg_to_proto(Msg.create(MsgRole.USER, f"第{i}条")) for i in range(32 * 4)}

        def request(i: int) -> pb.AddMessagesRequest:
            return pb.AddMessagesRequest(memory_id="群聊", request_id=f"req-{i}", messages=[built[i]])

        for round_ in range(1, 4):
            await asyncio.gather(*(stub.AddMessages(request(32 * round_ + i)) for i in range(32)))
        replies = await asyncio.gather(*(stub.AddMessages(request(i % 32)) for i in range(64)))
        firsts, retries = replies[:32], replies[32:]
        assert sorted(r.message_count for r in firsts) == list(range(97, 129))
        assert [r.message_count for r in retries] == [r.message_count for r in firsts]
        stored = await stub.GetMessages(pb.GetMessagesRequest(memory_id="群聊", page_size=1000))
        texts = [m.content[0].text.text for m in stored.messages[96:]]
        by_count = sorted(range(32), key=lambda i: firsts[i].message_count)
        assert texts == [f"第{i}条" for i in by_count]
    store = server.store
    while not isinstance(store, SqliteStore):
        store = store.inner
    assert store.group_commit.stats.largest >= 2


async def test_expired_request_records_are_pruned_by_lone_and_gathered_writes(store: SqliteStore, tmp_path: Path) -> None:
    """Idempotency records past their day are deleted once every thousand writes, counted alike
    whether writes ran alone or shared a commit."""
    import time

    from agentscope_memory.store.sql import REQUEST_TTL_S

    def records() -> list[str]:
        with sqlite3.connect(tmp_path / "s.sqlite3") as conn:
            return sorted(r[0] for r in conn.execute("SELECT request_id FROM requests"))

    with sqlite3.connect(tmp_path / "s.sqlite3") as conn:
        for request_id, age in (("old", REQUEST_TTL_S + 60), ("recent", 60)):
            conn.execute("INSERT INTO requests (tenant, memory_id, request_id, fingerprint, result_json, created)"
                         " VALUES ('租户', '记忆', ?, 'f', '{}', ?)", (request_id, time.time() - age))
    for i in range(500):
        await store.run("租户", put(f"单{i}", "v"), small=True)
    assert records() == ["old", "recent"]
    while store.group_commit.stats.writes < 600:
        await burst(store, [put(f"群{i}", "v") for i in range(50)])
    assert records() == ["recent"]


async def test_a_batch_whose_gathering_is_cancelled_writes_nothing_and_the_next_write_goes_on(store: SqliteStore) -> None:
    """Shutting the loop down cancels the task gathering a batch: its writers hear of it (nothing
    of theirs written) instead of waiting for ever, and later writes are not stuck behind it."""
    await gathering(store)
    writes = [asyncio.ensure_future(store.run("租户", put(f"弃{i}", "v"), small=True)) for i in range(3)]
    await asyncio.sleep(0)
    assert store.group_commit.waiting == 3
    gathering_tasks = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "GroupCommit._gather"]
    assert len(gathering_tasks) == 1
    gathering_tasks[0].cancel()
    done = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), 5)
    assert all(isinstance(d, asyncio.CancelledError) for d in done)
    assert [await get(store, f"弃{i}") for i in range(3)] == [None] * 3
    assert await asyncio.wait_for(store.run("租户", put("之后", "v"), small=True), 5) == "v"
