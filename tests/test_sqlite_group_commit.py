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
from agentscope_memory.store.base import MemoryRecord
from agentscope_memory.store.group_commit import _MAX_BATCH
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


# -- what the writes of one batch share: memory rows and list heads, written back once ----------

def append_one(memory_id: str, text: str) -> Callable[[Any], tuple[int, int, int]]:
    """An add as the memory manager makes it: read the memory, append, bump its version."""
    def fn(tx: Any) -> tuple[int, int, int]:
        record = tx.get_memory(memory_id)
        assert record is not None
        tx.append(memory_id, "messages", [text.encode()])
        return tx.touch_memory(memory_id), tx.length(memory_id, "messages"), tx.next_seq(memory_id, "messages")
    return fn


def stored(store: SqliteStore, memory_id: str, tenant: str = "租户") -> tuple[int, int, int, list[bytes]]:
    """What another connection reads from the file: the version, head and items of a memory."""
    conn = sqlite3.connect(store.path)
    try:
        version = conn.execute("SELECT version FROM memories WHERE tenant = ? AND memory_id = ?",
                               (tenant, memory_id)).fetchone()
        head = conn.execute("SELECT next_seq, length FROM list_heads WHERE tenant = ? AND memory_id = ?"
                            " AND list_name = 'messages'", (tenant, memory_id)).fetchone()
        items = conn.execute("SELECT data FROM items WHERE tenant = ? AND memory_id = ? ORDER BY seq",
                             (tenant, memory_id)).fetchall()
        return (version[0] if version else -1, *(head or (0, 0)), [bytes(r[0]) for r in items])
    finally:
        conn.close()


async def create(store: SqliteStore, memory_id: str, tenant: str = "租户") -> None:
    await store.run(tenant, lambda tx: tx.insert_memory(MemoryRecord(memory_id, "IN_MEMORY", version=1)))


async def test_adds_to_one_memory_in_one_batch_each_see_the_one_before(store: SqliteStore) -> None:
    await create(store, "会话")
    await gathering(store)
    before = store.group_commit.stats.batches
    results = await burst(store, [append_one("会话", f"消息{i}") for i in range(20)])
    assert store.group_commit.stats.batches - before <= 2
    # Versions, counts and next seqs step by one, in the order the writes ran.
    assert results == [(2 + i, 1 + i, 2 + i) for i in range(20)]
    assert stored(store, "会话") == (21, 21, 20, [f"消息{i}".encode() for i in range(20)])
    # The next batch starts from what the last one wrote back.
    assert await burst(store, [append_one("会话", "再一条")]) == [(22, 21, 22)]
    assert stored(store, "会话")[:3] == (22, 22, 21)


async def test_a_write_undone_in_a_batch_takes_back_its_version_and_head(store: SqliteStore) -> None:
    await create(store, "会话")
    await gathering(store)

    def append_then_fail(tx: Any) -> None:
        append_one("会话", "不该留下")(tx)
        raise ValueError("失败")

    results = await burst(store, [append_one("会话", "一"), append_then_fail, append_one("会话", "二")])
    assert isinstance(results[1], ValueError)
    # The write after the undone one got the version and seq the undone one had taken.
    assert results[0] == (2, 1, 2) and results[2] == (3, 2, 3)
    assert stored(store, "会话") == (3, 3, 2, ["一".encode(), "二".encode()])


async def test_a_memory_deleted_in_a_batch_is_not_written_back(store: SqliteStore) -> None:
    await create(store, "会话")
    await create(store, "留下")
    await gathering(store)

    def delete(tx: Any) -> None:
        tx.delete_memory("会话")

    def recreate(tx: Any) -> tuple[int, int, int]:
        tx.insert_memory(MemoryRecord("会话", "IN_MEMORY", version=1))
        return append_one("会话", "新的")(tx)

    results = await burst(store, [append_one("会话", "旧的"), append_one("留下", "甲"), delete,
                                  append_one("留下", "乙")])
    assert results[0] == (2, 1, 2) and results[1] == (2, 1, 2) and results[3] == (3, 2, 3)
    # Nothing of the deleted memory comes back: no row, no head, no items.
    assert stored(store, "会话") == (-1, 0, 0, [])
    assert stored(store, "留下") == (3, 3, 2, ["甲".encode(), "乙".encode()])
    # Created again in a later batch, it starts over.
    assert await burst(store, [recreate, append_one("会话", "又一条")]) == [(2, 1, 2), (3, 2, 3)]
    assert stored(store, "会话") == (3, 3, 2, ["新的".encode(), "又一条".encode()])


async def test_listing_memories_inside_a_batch_sees_the_versions_its_writes_made(store: SqliteStore) -> None:
    await create(store, "会话")
    await gathering(store)

    def listed(tx: Any) -> list[tuple[str, int]]:
        return [(r.memory_id, r.version) for r in tx.list_memories("", 10)]

    results = await burst(store, [append_one("会话", "一"), append_one("会话", "二"), listed])
    assert results[2] == [("会话", 3)]


async def test_two_tenants_one_memory_id_in_one_batch_share_nothing(store: SqliteStore) -> None:
    await create(store, "同名", tenant="甲")
    await create(store, "同名", tenant="乙")
    await gathering(store)
    results = await asyncio.gather(*(store.run(t, append_one("同名", f"{t}{i}"), small=True)
                                     for i in range(5) for t in ("甲", "乙")))
    assert [r[1] for r in results[0::2]] == [1, 2, 3, 4, 5] == [r[1] for r in results[1::2]]
    assert stored(store, "同名", "甲") == (6, 6, 5, [f"甲{i}".encode() for i in range(5)])
    assert stored(store, "同名", "乙") == (6, 6, 5, [f"乙{i}".encode() for i in range(5)])


async def test_a_caller_cancelled_once_its_write_was_taken_hears_so_after_the_commit(store: SqliteStore, tmp_path: Path) -> None:
    """The write runs all the same (it may already have), so the cancellation is only reported
    once the commit is over: the caller's next line never runs before its write is settled."""
    await gathering(store)
    other = sqlite3.connect(tmp_path / "s.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        writes = [asyncio.ensure_future(store.run("租户", put(f"取{i}", "v"), small=True)) for i in range(3)]
        # The batch is taken, then waits for the lock the other program holds.
        await asyncio.sleep(0)
        assert store.group_commit.waiting == 3
        while store.group_commit.waiting:
            await asyncio.sleep(0)
        await asyncio.sleep(0.1)
        writes[1].cancel()
        await asyncio.sleep(0.3)
        assert not writes[1].done()
        other.execute("COMMIT")
        done = await asyncio.wait_for(asyncio.gather(*writes, return_exceptions=True), 15)
    finally:
        other.close()
    assert isinstance(done[1], asyncio.CancelledError)
    assert done[0] == done[2] == "v"
    assert [await get(store, f"取{i}") for i in range(3)] == ["v"] * 3


async def test_a_burst_larger_than_a_batch_commits_in_batches_of_at_most_the_limit_in_order(store: SqliteStore) -> None:
    """Writes arriving together past `_MAX_BATCH` start the next batch: one transaction never
    holds more, so the event loop is never held for more than one batch's writes."""
    await create(store, "会话")
    await gathering(store)
    before = store.group_commit.stats.batches
    results = await burst(store, [append_one("会话", f"消息{i}") for i in range(3 * _MAX_BATCH + 5)])
    stats = store.group_commit.stats
    assert stats.largest <= _MAX_BATCH
    assert stats.batches - before >= 4
    # The batches commit in the order their writes arrived.
    assert results == [(2 + i, 1 + i, 2 + i) for i in range(3 * _MAX_BATCH + 5)]
    assert stored(store, "会话")[3] == [f"消息{i}".encode() for i in range(3 * _MAX_BATCH + 5)]
