"""The store protocol, for every backend: lists, key/values, atomic transactions, tenants."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from pathlib import Path

import pytest

from agentscope_memory.errors import AlreadyExistsError
from agentscope_memory.store import NO_TENANT, KvEntry, MemoryRecord, RequestRecord, open_store
from agentscope_memory.store.in_process import InProcessStore


@pytest.fixture(params=["sqlite", "memory", "postgres"])
async def store(request, tmp_path):
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None
    store = open_store(request.param, tmp_path, postgres_dsn=dsn)
    await store.run("t1", lambda tx: tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)))
    yield store
    await store.close()


async def test_lists_append_read_delete_clear_replace(store) -> None:
    await store.run("t1", lambda tx: tx.append("m", "l", ["a", "b", "c", "d"]))
    rows = await store.run("t1", lambda tx: tx.read("m", "l"), write=False)
    assert [r.data for r in rows] == ["a", "b", "c", "d"]
    assert [r.seq for r in rows] == sorted(r.seq for r in rows)
    assert [r.data for r in await store.run("t1", lambda tx: tx.read("m", "l", rows[1].seq, 2))] == ["c", "d"]
    assert await store.run("t1", lambda tx: tx.delete_at("m", "l", 1)) is True
    assert await store.run("t1", lambda tx: tx.delete_at("m", "l", 3)) is False
    assert await store.run("t1", lambda tx: tx.delete_at("m", "l", -1)) is False
    assert await store.run("t1", lambda tx: tx.length("m", "l")) == 3
    await store.run("t1", lambda tx: tx.replace("m", "l", ["x"]))
    replaced = await store.run("t1", lambda tx: tx.read("m", "l"))
    assert [r.data for r in replaced] == ["x"] and replaced[0].seq > rows[-1].seq
    await store.run("t1", lambda tx: tx.clear("m", "l"))
    assert await store.run("t1", lambda tx: (tx.length("m", "l"), tx.read("m", "l"))) == (0, [])


async def test_kv_and_requests(store) -> None:
    await store.run("t1", lambda tx: (tx.kv_put("m", "a:1", "x"), tx.kv_put("m", "a:2", "y"), tx.kv_put("m", "b", "z")))
    assert await store.run("t1", lambda tx: tx.kv_keys("m", "a:")) == ["a:1", "a:2"]
    await store.run("t1", lambda tx: tx.kv_put("m", "a:1", "new"))
    await store.run("t1", lambda tx: tx.kv_delete("m", "b"))
    assert await store.run("t1", lambda tx: (tx.kv_get("m", "a:1"), tx.kv_get("m", "b"))) == ("new", None)
    await store.run("t1", lambda tx: tx.request_put("m", "r", RequestRecord("f", "{}")))
    assert await store.run("t1", lambda tx: tx.request_get("m", "r")) == RequestRecord("f", "{}")


async def test_a_page_of_keys_with_their_array_lengths_reads_no_value(store) -> None:
    # The inspector lists a memory's offloaded contexts this way: in code point order, a page
    # after a key, each value's item count from the database, and how many in all.
    def fill(tx) -> None:
        tx.kv_put("m", "off:卸载-b", '[{"a": 1}, {"b": [1, 2]}]')
        tx.kv_put("m", "off:卸载-a", "[]")
        tx.kv_put("m", "off:Z_%", '["x", "y", "z"]')
        tx.kv_put("m", "off", "[1]")  # the prefix itself is no key after it
        tx.kv_put("m", "offx", "[1]")
        tx.kv_put("m", "plan", "{}")
        tx.insert_memory(MemoryRecord("n", "IN_MEMORY", version=1))
        tx.kv_put("n", "off:其他", "[1]")

    await store.run("t1", fill)
    await store.run("t2", lambda tx: (tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)),
                                      tx.kv_put("m", "off:别的租户", "[1]")))
    first = await store.run("t1", lambda tx: tx.kv_array_lengths("m", "off:", "off:", 2), write=False)
    assert first == [("off:Z_%", 3), ("off:卸载-a", 0)]
    rest = await store.run("t1", lambda tx: tx.kv_array_lengths("m", "off:", first[-1][0], 2), write=False)
    assert rest == [("off:卸载-b", 2)]
    assert await store.run("t1", lambda tx: tx.kv_array_lengths("m", "off:", "off:卸载-b", 2), write=False) == []
    assert await store.run("t1", lambda tx: tx.kv_count("m", "off:"), write=False) == 3
    assert await store.run("t1", lambda tx: (tx.kv_count("n", "off:"), tx.kv_count("m"))) == (1, 6)
    assert await store.run("t2", lambda tx: tx.kv_array_lengths("m", "off:", "off:", 10), write=False) == [
        ("off:别的租户", 1)]


async def test_a_failing_transaction_changes_nothing(store) -> None:
    await store.run("t1", lambda tx: (tx.append("m", "l", ["a", "b"]), tx.kv_put("m", "k", "v")))

    def half_done(tx):
        tx.append("m", "l", ["c"])
        tx.delete_at("m", "l", 0)
        tx.kv_put("m", "k", "changed")
        tx.kv_put("m", "k2", "new")
        tx.replace("m", "other", ["z"])
        tx.touch_memory("m")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await store.run("t1", half_done)
    state = await store.run("t1", lambda tx: (
        [r.data for r in tx.read("m", "l")], tx.kv_get("m", "k"), tx.kv_get("m", "k2"),
        tx.length("m", "other"), tx.get_memory("m").version))
    assert state == (["a", "b"], "v", None, 0, 1)
    # Sequence numbers are not burnt by the rolled-back append either way: appends still work.
    await store.run("t1", lambda tx: tx.append("m", "l", ["c"]))
    assert [r.data for r in await store.run("t1", lambda tx: tx.read("m", "l"))] == ["a", "b", "c"]


async def test_tenants_are_isolated(store) -> None:
    await store.run("t1", lambda tx: tx.append("m", "l", ["secret"]))
    await store.run("t2", lambda tx: tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)))
    assert await store.run("t2", lambda tx: tx.read("m", "l")) == []
    assert [r.memory_id for r in await store.run("t2", lambda tx: tx.list_memories("", 10))] == ["m"]
    await store.run("t2", lambda tx: tx.delete_memory("m"))
    assert await store.run("t1", lambda tx: tx.get_memory("m")) is not None
    assert [r.data for r in await store.run("t1", lambda tx: tx.read("m", "l"))] == ["secret"]


async def test_delete_memory_removes_everything(store) -> None:
    await store.run("t1", lambda tx: (tx.append("m", "l", ["a"]), tx.kv_put("m", "k", "v")))
    await store.run("t1", lambda tx: tx.delete_memory("m"))
    await store.run("t1", lambda tx: tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)))
    assert await store.run("t1", lambda tx: (tx.read("m", "l"), tx.kv_get("m", "k"), tx.length("m", "l"))) == ([], None, 0)


async def test_sqlite_data_survives_reopening(tmp_path) -> None:
    store = open_store("sqlite", tmp_path)
    await store.run("t", lambda tx: (tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)),
                                     tx.append("m", "l", ["a", "b"])))
    await store.close()
    reopened = open_store("sqlite", tmp_path)
    assert [r.data for r in await reopened.run("t", lambda tx: tx.read("m", "l"))] == ["a", "b"]
    await reopened.run("t", lambda tx: tx.append("m", "l", ["c"]))
    assert await reopened.run("t", lambda tx: tx.length("m", "l")) == 3
    await reopened.close()


async def test_inserting_a_taken_id_is_already_exists_and_the_transaction_goes_on(store) -> None:
    def insert_twice(tx):
        with pytest.raises(AlreadyExistsError):
            tx.insert_memory(MemoryRecord("m", "AUTO_CONTEXT", version=1))
        # The failed insert leaves the transaction usable (PostgreSQL needs a savepoint for it).
        tx.insert_memory(MemoryRecord("m2", "IN_MEMORY", version=1))

    await store.run("t1", insert_twice)
    assert [r.memory_id for r in await store.run("t1", lambda tx: tx.list_memories("", 10))] == ["m", "m2"]
    assert (await store.run("t1", lambda tx: tx.get_memory("m"))).kind == "IN_MEMORY"


async def test_meta_is_global(store) -> None:
    # Written at schema creation, so a later version knows what it opened.
    assert await store.run("t1", lambda tx: tx.meta_get("schema_version")) == "1"
    assert await store.run("t1", lambda tx: tx.meta_get("migrated:x")) is None
    await store.run("t1", lambda tx: tx.meta_put("migrated:x", "yes"))
    await store.run("t2", lambda tx: tx.meta_put("migrated:x", "done"))
    assert await store.run(NO_TENANT, lambda tx: tx.meta_get("migrated:x"), write=False) == "done"

    def half_done(tx):
        tx.meta_put("migrated:y", "yes")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await store.run(NO_TENANT, half_done)
    assert await store.run(NO_TENANT, lambda tx: tx.meta_get("migrated:y")) is None


async def test_kv_scan_reads_a_prefix_across_tenants_and_memories(store) -> None:
    await store.run("t2", lambda tx: tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)))
    await store.run("t1", lambda tx: (tx.kv_put("m", "ltm_pending:b", "1"), tx.kv_put("m", "ltm_pending:a", "2"),
                                      tx.kv_put("m", "other", "3"), tx.kv_put("n", "ltm_pending:c", "4")))
    await store.run("t2", lambda tx: (tx.kv_put("m", "ltm_pending:d", "5"), tx.kv_put("m", "ltm_pendin", "6")))
    found = await store.run(NO_TENANT, lambda tx: tx.kv_scan("ltm_pending:"), write=False)
    assert found == [
        KvEntry("t1", "m", "ltm_pending:a", "2"),
        KvEntry("t1", "m", "ltm_pending:b", "1"),
        KvEntry("t1", "n", "ltm_pending:c", "4"),
        ("t2", "m", "ltm_pending:d", "5"),  # entries are plain tuples too
    ]
    # A prefix is compared as text, not as a LIKE pattern.
    await store.run("t1", lambda tx: (tx.kv_put("m", "50%_off", "x"), tx.kv_put("m", "50ab", "y")))
    assert [e.key for e in await store.run("t1", lambda tx: tx.kv_scan("50%_"))] == ["50%_off"]
    assert [e.key for e in await store.run("t1", lambda tx: tx.kv_scan("é"))] == []
    assert len(await store.run("t1", lambda tx: tx.kv_scan(""))) == 8


async def test_binary_and_text_items_come_back_as_they_went_in(store) -> None:
    items = ["text ✓", b"\x00\xffbytes", "", b""]
    await store.run("t1", lambda tx: tx.append("m", "l", items))
    assert [r.data for r in await store.run("t1", lambda tx: tx.read("m", "l"), write=False)] == items


async def test_the_memory_store_leaves_nothing_behind() -> None:
    store = InProcessStore()
    directory = store.path.parent
    await store.run("t", lambda tx: (tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)),
                                     tx.append("m", "l", ["a"])))
    assert directory.exists()
    await store.close()
    assert not directory.exists()
    dropped = InProcessStore()
    directory = dropped.path.parent
    del dropped  # never closed: removed when collected (or at exit)
    gc.collect()
    assert not directory.exists()


async def test_an_existing_sqlite_database_keeps_its_data_and_gains_the_new_tables(tmp_path) -> None:
    from agentscope_memory.store import sqlite as sqlite_store

    path = tmp_path / "agentscope-memory.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(sqlite_store._SCHEMA)  # the tables as every earlier release wrote them
    conn.execute("INSERT INTO memories VALUES ('t', 'm', 'IN_MEMORY', '{}', '{}', 1.0, 1.0, 3)")
    conn.execute("INSERT INTO list_heads VALUES ('t', 'm', 'l', 3, 2)")
    conn.executemany("INSERT INTO items VALUES ('t', 'm', 'l', ?, ?)", [(1, "a"), (2, b"b")])
    conn.execute("INSERT INTO kv VALUES ('t', 'm', 'ltm_pending:x', '{}')")
    conn.commit()
    conn.close()
    store = open_store("sqlite", tmp_path)
    try:
        await _assert_legacy_data(store)
    finally:
        await store.close()


async def test_an_existing_postgres_database_keeps_its_data_and_gains_the_new_tables(postgres_dsn) -> None:
    import psycopg

    from agentscope_memory.store import postgres as postgres_store

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(postgres_store._SCHEMA)
        conn.execute("INSERT INTO asm_memories VALUES ('t', 'm', 'IN_MEMORY', '{}', '{}', 1.0, 1.0, 3)")
        conn.execute("INSERT INTO asm_list_heads VALUES ('t', 'm', 'l', 3, 2)")
        conn.execute("INSERT INTO asm_items VALUES ('t', 'm', 'l', 1, true, 'a'), ('t', 'm', 'l', 2, false, 'b')")
        conn.execute("INSERT INTO asm_kv VALUES ('t', 'm', 'ltm_pending:x', '{}')")
    store = open_store("postgres", Path("."), postgres_dsn=postgres_dsn)
    try:
        await _assert_legacy_data(store)
    finally:
        await store.close()


async def _assert_legacy_data(store) -> None:
    assert (await store.run("t", lambda tx: tx.get_memory("m"))).version == 3
    assert [r.data for r in await store.run("t", lambda tx: tx.read("m", "l"))] == ["a", b"b"]
    await store.run("t", lambda tx: tx.append("m", "l", ["c"]))
    assert [(r.seq, r.data) for r in await store.run("t", lambda tx: tx.read("m", "l"))] == [(1, "a"), (2, b"b"), (3, "c")]
    assert await store.run("t", lambda tx: tx.kv_scan("ltm_pending:")) == [("t", "m", "ltm_pending:x", "{}")]
    assert await store.run("t", lambda tx: tx.meta_get("schema_version")) == "1"
    await store.run("t", lambda tx: tx.job_add("j", "k", {}, 0.0, 0.0))
    assert [j.job_id for j in await store.run("t", lambda tx: tx.job_list())] == ["j"]


async def test_sqlite_keeps_its_write_ahead_log_small_with_checkpoints_off_the_loop(tmp_path) -> None:
    # Checkpoints run on a thread of their own, not inside the commits on the event loop: between
    # bursts of appends they must catch up, so the log starts over instead of growing.
    store = open_store("sqlite", tmp_path)
    try:
        await store.run("t1", lambda tx: tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)))
        item = "x" * 1000
        for _ in range(40):
            for _ in range(100):
                await store.run("t1", lambda tx: (tx.append("m", "l", [item]), tx.touch_memory("m")), small=True)
            await asyncio.sleep(0.05)
        wal = Path(tmp_path) / "agentscope-memory.sqlite3-wal"
        # A burst adds about 1.5 MB to the log. Checkpointed only by SQLite's safety net (10,000
        # pages), the log would reach 40 MB.
        assert wal.stat().st_size < 16 * 1024 * 1024
        assert await store.run("t1", lambda tx: tx.length("m", "l"), write=False) == 4000
    finally:
        await store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_database_of_a_newer_schema_is_refused(backend, request, tmp_path) -> None:
    # A newer version may have changed what its tables mean: this one must not write into them.
    from agentscope_memory.store.base import StoreOpenError

    dsn = request.getfixturevalue("postgres_dsn") if backend == "postgres" else None
    store = open_store(backend, tmp_path, postgres_dsn=dsn)
    await store.run(NO_TENANT, lambda tx: tx.meta_put("schema_version", "2"))
    await store.close()
    with pytest.raises(StoreOpenError, match="schema version 2, newer than this server's 1"):
        open_store(backend, tmp_path, postgres_dsn=dsn)


async def test_a_postgres_deadlock_is_aborted_and_undoes_only_the_loser(postgres_dsn, tmp_path) -> None:
    """Two writes taking the same rows in opposite orders: PostgreSQL undoes one of them. That
    one used to answer INTERNAL; it is ABORTED (retry with fresh state) and left nothing."""
    import threading

    from agentscope_memory.errors import AbortedError

    store = open_store("postgres", tmp_path, postgres_dsn=postgres_dsn)
    try:
        await store.run("t", lambda tx: (tx.kv_put("死锁", "a", "0"), tx.kv_put("死锁", "b", "0")))
        both_hold_one = threading.Barrier(2, timeout=20)

        def writer(first: str, second: str, value: str):  # type: ignore[no-untyped-def]
            def write(tx) -> None:  # type: ignore[no-untyped-def]
                tx.kv_put("死锁", first, value)
                both_hold_one.wait()
                tx.kv_put("死锁", second, value)
            return write

        results = await asyncio.gather(store.run("t", writer("a", "b", "1")), store.run("t", writer("b", "a", "2")),
                                       return_exceptions=True)
        lost = [r for r in results if isinstance(r, BaseException)]
        assert len(lost) == 1 and isinstance(lost[0], AbortedError), results
        assert "deadlock" in str(lost[0]) and "retry" in str(lost[0])
        winner = "2" if results[0] is lost[0] else "1"
        assert await store.run("t", lambda tx: (tx.kv_get("死锁", "a"), tx.kv_get("死锁", "b"))) == (winner, winner)
    finally:
        await store.close()
