"""Deleted agent-state keys' versions (tombstones) are pruned after a retention, over real gRPC
on sqlite and PostgreSQL, without ever handing out a version again (no ABA): what was pruned
raises its tenant's version floor, where keys new to the tenant start."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import Any

import psycopg
import pydantic
import pytest

from agentscope_memory.agent_state import Slot, StateConflictError
from agentscope_memory.client.agent_state import AsyncAgentStateClient
from agentscope_memory.service import ServiceSettings
from agentscope_memory.store import NO_TENANT, SQLITE_FILE_NAME, open_store

TENANT = "default"  # the one tenant of a server without API keys


async def bookkeeping(store: Any, kind: str) -> dict[tuple[str, str, str, str], int]:
    """(tenant, user, session, key) -> version of the rows of `kind` ("deleted value",
    "deleted list", "version floor"), read past the API (which never shows them)."""
    rows = await store.run(NO_TENANT, lambda tx: tx._all(
        "SELECT tenant, user_id, session_id, key, version FROM {agent_states} WHERE kind = ?", (kind,)), write=False)
    return {(r[0], r[1], r[2], r[3]): int(r[4]) for r in rows}


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request) -> str:
    return request.param


async def start(server_factory, store_kind: str, request, **settings: Any) -> Any:
    if store_kind == "postgres":
        settings.update(store="postgres", postgres_dsn=request.getfixturevalue("postgres_dsn"))
    return await server_factory(**settings)


async def test_a_stale_compare_and_set_is_refused_on_a_key_saved_again_after_its_tombstone_was_pruned(
        server_factory, store_kind, request) -> None:
    """A naive prune (delete the tombstones) starts the key over at 1, and a writer still holding
    version 1 of the deleted session compares-and-sets over the new one (ABA)."""
    server = await start(server_factory, store_kind, request)
    engine = server.service.agent_state
    slot = Slot("用户甲", "会话/旧")
    async with AsyncAgentStateClient(server.address, timeout=10) as state:
        assert await state.put_value(slot, "agent_state", '{"context":["旧"]}', expected_version=0) == 1
        stale = await state.get_value(slot, "agent_state")
        old_list = await state.put_list(slot, "memory_messages", ['{"id":"一"}', '{"id":"二"}'])
        assert await state.delete_session(slot) == 2
        assert len(await bookkeeping(server.store, "deleted value")) == 1

        assert await engine.prune_tombstones(before=time.time() + 1) == 2
        assert await bookkeeping(server.store, "deleted value") == {}
        assert await bookkeeping(server.store, "deleted list") == {}
        assert await bookkeeping(server.store, "version floor") == {(TENANT, "", "", ""): 1}

        # Saved again: absent until then (version 0, create-only works), then above the floor.
        assert (await state.get_value(slot, "agent_state")).version == 0
        fresh = await state.put_value(slot, "agent_state", '{"context":["新"]}', expected_version=0)
        assert fresh > stale.version
        with pytest.raises(StateConflictError) as conflict:
            await state.put_value(slot, "agent_state", '{"context":["旧","过期"]}', expected_version=stale.version)
        assert conflict.value.current_version == fresh
        assert (await state.get_value(slot, "agent_state")).json == '{"context":["新"]}'
        new_list = await state.put_list(slot, "memory_messages", ['{"id":"甲"}'], expected_version=0)
        assert new_list.version > old_list.version
        with pytest.raises(StateConflictError):
            await state.append_list(slot, "memory_messages", ['{"id":"三"}'], expected_length=1,
                                    expected_version=old_list.version)
        assert (await state.get_list(slot, "memory_messages")).items == ['{"id":"甲"}']

        # A key new to the tenant starts above the floor too (its deleted past, if any, is
        # gone), and versions still count up one by one from there.
        other = Slot("用户乙", "会话/新")
        first = await state.put_value(other, "agent_state", "{}")
        assert first > 1 and await state.put_value(other, "agent_state", "{}") == first + 1
        # The floor is the tenant's: another tenant's keys start at 1.
        assert await engine.put_value("另一个租户", other, "agent_state", "{}") == 1

        # The floor never goes down: a later prune of a lower version leaves it.
        low = Slot("用户丙", "会话")
        await state.put_value(low, "k", "{}", expected_version=0)
        await state.delete_session(low)
        assert await engine.prune_tombstones(before=time.time() + 1) == 1
        floor = (await bookkeeping(server.store, "version floor"))[(TENANT, "", "", "")]
        assert floor >= first
        # The floor is not state: the anonymous user (its user id is empty) has no sessions.
        assert [s async for s in state.iter_session_ids("")] == []


async def test_the_retention_setting_prunes_old_tombstones_and_keeps_recent_ones(
        server_factory, store_kind, request) -> None:
    server = await start(server_factory, store_kind, request, agent_state_tombstone_retention_s=1.0)
    engine = server.service.agent_state
    assert engine.tombstone_retention_s == 1.0
    slot = Slot("用户", "会话")
    async with AsyncAgentStateClient(server.address, timeout=10) as state:
        for i in range(5):
            await state.put_value(slot, "旧", json.dumps({"次": i}))
        assert await state.delete_key(slot, "旧") is True
        # The first delete of a server starts a pass: nothing is old enough yet.
        if engine.pruning is not None:
            await engine.pruning
        assert set(await bookkeeping(server.store, "deleted value")) == {(TENANT, "用户", "会话", "旧")}
        await asyncio.sleep(1.3)
        await state.put_value(slot, "新", "{}")
        assert await state.delete_key(slot, "新") is True
        # This delete comes a retention after the last pass: the next one forgets "旧" only.
        if engine.pruning is not None:
            await engine.pruning
        assert await bookkeeping(server.store, "deleted value") == {(TENANT, "用户", "会话", "新"): 1}
        assert await bookkeeping(server.store, "version floor") == {(TENANT, "", "", ""): 5}
        # The kept one goes on from its own version, the pruned one from above the floor.
        assert await state.put_value(slot, "新", "{}", expected_version=0) == 2
        assert await state.put_value(slot, "旧", "{}", expected_version=0) == 6
        with pytest.raises(StateConflictError):
            await state.put_value(slot, "旧", "{}", expected_version=5)


async def test_a_retention_of_0_keeps_tombstones_for_ever(server_factory) -> None:
    server = await server_factory(agent_state_tombstone_retention_s=0)
    engine = server.service.agent_state
    slot = Slot("用户", "会话")
    async with AsyncAgentStateClient(server.address, timeout=10) as state:
        await state.put_value(slot, "k", "{}")
        await state.delete_session(slot)
        assert engine.pruning is None
        assert await engine.prune_tombstones() == 0
        assert len(await bookkeeping(server.store, "deleted value")) == 1
    with pytest.raises(pydantic.ValidationError, match="agent_state_tombstone_retention_s"):
        ServiceSettings(agent_state_tombstone_retention_s=-1)
    assert ServiceSettings().agent_state_tombstone_retention_s == 7 * 86400


async def test_deletes_saves_and_prunes_racing_on_two_postgres_replicas_never_repeat_a_version(
        server_factory, postgres_dsn) -> None:
    """Deletes, unconditional saves and prunes of one key's tombstones on two replicas at once:
    a save that takes over a tombstone a prune is deleting waits for the prune and starts above
    the floor it raised. Without the floor, versions started over at 1 and repeated."""
    replicas = [await server_factory(store="postgres", postgres_dsn=postgres_dsn,
                                     agent_state_tombstone_retention_s=0.001) for _ in range(2)]
    slot = Slot("并发", "会话")
    versions: list[int] = []
    stop = asyncio.Event()

    async def writer(client: AsyncAgentStateClient, i: int) -> None:
        for j in range(30):
            if (i + j) % 3 == 0:
                await client.delete_session(slot)
            else:
                versions.append(await client.put_value(slot, "agent_state", json.dumps({"写者": i, "次": j})))

    async def pruner(engine: Any) -> int:
        pruned = 0
        while not stop.is_set():
            pruned += await engine.prune_tombstones(before=time.time() + 1)
            await asyncio.sleep(0)
        return pruned

    async with AsyncAgentStateClient(replicas[0].address, timeout=30) as first, \
            AsyncAgentStateClient(replicas[1].address, timeout=30) as second:
        stale = await first.put_value(slot, "agent_state", "{}")
        prunes = [asyncio.create_task(pruner(r.service.agent_state)) for r in replicas]
        await asyncio.gather(*(writer(first if i % 2 else second, i) for i in range(6)))
        stop.set()
        assert sum(await asyncio.gather(*prunes)) > 0
        last = await first.put_value(slot, "agent_state", "{}")
        with pytest.raises(StateConflictError):
            await second.put_value(slot, "agent_state", "{}", expected_version=stale)
    assert len(versions) == 120 and len(set(versions)) == len(versions)
    assert min(versions) > stale and last > max(versions)


async def test_an_existing_sqlite_database_keeps_its_tombstones_and_gains_their_index(tmp_path) -> None:
    """A database of the release before pruning (no tombstone index, tombstones of any age)
    opens with its state and tombstones, and its old tombstones are then pruned."""
    store = open_store("sqlite", tmp_path)
    await _deleted_keys(store)
    await store.close()
    conn = sqlite3.connect(tmp_path / SQLITE_FILE_NAME)
    conn.execute("DROP INDEX agent_states_tombstones")
    conn.execute("UPDATE agent_states SET update_time = 1000 WHERE kind = 'deleted value'")
    conn.commit()
    conn.close()
    store = open_store("sqlite", tmp_path)
    try:
        await _assert_pruned_after_reopening(store)
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / SQLITE_FILE_NAME)
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'agent_states_tombstones'").fetchone()
    conn.close()


async def test_an_existing_postgres_database_keeps_its_tombstones_and_gains_their_index(tmp_path, postgres_dsn) -> None:
    store = open_store("postgres", tmp_path, postgres_dsn=postgres_dsn)
    await _deleted_keys(store)
    await store.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX asm_agent_states_tombstones")
        conn.execute("UPDATE asm_agent_states SET update_time = 1000 WHERE kind = 'deleted value'")
    store = open_store("postgres", tmp_path, postgres_dsn=postgres_dsn)
    try:
        await _assert_pruned_after_reopening(store)
    finally:
        await store.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('asm_agent_states_tombstones')").fetchone()[0] is not None


async def _deleted_keys(store: Any) -> None:
    from agentscope_memory.agent_state import AgentStateEngine

    engine = AgentStateEngine(store, tombstone_retention_s=0)
    slot = Slot("老用户", "老会话")
    for i in range(3):
        await engine.put_value("租户", slot, "已删", json.dumps({"次": i}))
    await engine.put_value("租户", slot, "留下", '{"留":"下"}')
    assert await engine.delete_key("租户", slot, "已删") is True


async def _assert_pruned_after_reopening(store: Any) -> None:
    from agentscope_memory.agent_state import AgentStateEngine

    engine = AgentStateEngine(store)
    slot = Slot("老用户", "老会话")
    assert (await engine.get_value("租户", slot, "留下")).json == '{"留":"下"}'
    assert await bookkeeping(store, "deleted value") == {("租户", "老用户", "老会话", "已删"): 3}
    assert await engine.prune_tombstones() == 1
    assert await bookkeeping(store, "version floor") == {("租户", "", "", ""): 3}
    assert await engine.put_value("租户", slot, "已删", "{}", expected_version=0) == 4
