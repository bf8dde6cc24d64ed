"""The store protocol, for every backend: lists, key/values, atomic transactions, tenants."""

from __future__ import annotations

import pytest

from agentscope_memory.store import MemoryRecord, RequestRecord, open_store


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
