"""Compare-and-set racing deletes and tombstone pruning, over real gRPC on sqlite and PostgreSQL:
however the deletes, saves again and prunes interleave, no two compare-and-sets ever succeed
from the same version of a key (a lost update, or ABA once a pruned key starts over), nor is a
version handed out twice."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from agentscope_memory.agent_state import Slot, StateConflictError
from agentscope_memory.client.agent_state import AsyncAgentStateClient


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request) -> str:
    return request.param


async def test_compare_and_sets_racing_deletes_and_prunes_never_succeed_twice_from_one_version(
        server_factory, store_kind, request) -> None:
    settings: dict[str, Any] = {"agent_state_tombstone_retention_s": 0.001}
    if store_kind == "postgres":
        settings.update(store="postgres", postgres_dsn=request.getfixturevalue("postgres_dsn"))
    server = await server_factory(**settings)
    engine = server.service.agent_state
    slots = [Slot("用户", f"会话{k}") for k in range(3)]
    # (slot, expected version) of every compare-and-set that succeeded, and every version handed out.
    succeeded: list[tuple[str, int]] = []
    handed: dict[str, list[int]] = {s.session_id: [] for s in slots}
    stop = asyncio.Event()

    async def saver(client: AsyncAgentStateClient, slot: Slot, i: int) -> None:
        for j in range(25):
            seen = (await client.get_value(slot, "agent_state")).version
            try:
                version = await client.put_value(slot, "agent_state", json.dumps({"写者": i, "次": j}, ensure_ascii=False),
                                                 expected_version=seen)
            except StateConflictError:
                continue
            succeeded.append((slot.session_id, seen))
            handed[slot.session_id].append(version)

    async def deleter(client: AsyncAgentStateClient, slot: Slot) -> None:
        for _ in range(12):
            await client.delete_key(slot, "agent_state")
            await asyncio.sleep(0.005)

    async def pruner() -> int:
        pruned = 0
        while not stop.is_set():
            pruned += await engine.prune_tombstones(before=time.time() + 1)
            await asyncio.sleep(0.002)
        return pruned

    async with AsyncAgentStateClient(server.address, timeout=30) as one, \
            AsyncAgentStateClient(server.address, timeout=30) as two:
        pruning = asyncio.create_task(pruner())
        await asyncio.gather(*(saver(one if i % 2 else two, slot, i) for slot in slots for i in range(4)),
                             *(deleter(one, slot) for slot in slots))
        stop.set()
        assert await pruning > 0
        for slot in slots:
            final = (await one.get_value(slot, "agent_state")).version
            if final:
                assert final == max(handed[slot.session_id])
    assert len(succeeded) >= 30
    # Version 0 is "absent", a state each delete brings back: creating from it again is right.
    from_versions = [(slot, v) for slot, v in succeeded if v]
    assert len(set(from_versions)) == len(from_versions), "two compare-and-sets succeeded from one version"
    for versions in handed.values():
        assert len(set(versions)) == len(versions), "a version was handed out twice"
