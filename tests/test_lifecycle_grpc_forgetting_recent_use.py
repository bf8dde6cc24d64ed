"""Forgetting never takes what a user has just used: a memory recalled by a search, or corrected
or re-weighted by an update (UpdateLongTermMemory, the mem0 REST update, the tools), is fresh
again, however long ago it was last recalled. An update did not count: a user who corrected an
old memory ("my locker is now 918") or raised its importance to keep it saw the next forgetting
run take it. And the forgetting scheduler waits quietly for long-term memory to open."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

import pytest

from agentscope_memory.client.lifecycle_reflect import AsyncReflectionClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole

DAY = 86400.0


def _age(data: Path, memory_id: str, days: float) -> None:
    """Last recalled and written `days` ago (the server's clock is the wall clock)."""
    then = time.time() - days * DAY
    with sqlite3.connect(data / "agentscope-memory.sqlite3") as conn:
        conn.execute("UPDATE ltm SET created = ?, updated = ?, last_accessed = ? WHERE memory_id = ?",
                     (then, then, then, memory_id))


async def test_a_memory_just_recalled_or_updated_is_not_forgotten(server_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data, lifecycle_reflection_enabled=False)
    scope = Scope("助手", "王五")
    texts = {"idle": "My locker number is 217.", "recalled": "我的储物柜密码是三五八。",
             "corrected": "My gym is on Baker Street.", "weighted": "我每周三下午三点去游泳。"}
    async with AsyncLongTermClient(server.address, timeout=60) as memories, \
            AsyncReflectionClient(server.address, timeout=60) as lifecycle:
        ids = {}
        for name, text in texts.items():  # one round each: messages, no facts extracted offline
            [item] = await memories.record(scope, [Msg.create(MsgRole.USER, text)])
            ids[name] = item.id
            _age(data, item.id, 90)
        assert len((await lifecycle.forget(scope, dry_run=True)).forgotten) == 4  # all faded

        found = await memories.search(scope, "储物柜密码", top_k=1)
        assert [i.id for i in found] == [ids["recalled"]]
        corrected = await memories.update(ids["corrected"], "My gym moved to Camden Road.")
        weighted = await memories.update(ids["weighted"], importance=1.0)
        assert corrected.access_count == weighted.access_count == 1  # an edit counts as a use

        report = await lifecycle.forget(scope)
        assert [f.item.id for f in report.forgotten] == [ids["idle"]]
        left = {i.id: i.text for i in await memories.list(scope)}
        assert left == {ids["recalled"]: texts["recalled"], ids["corrected"]: "My gym moved to Camden Road.",
                        ids["weighted"]: texts["weighted"]}
        found = await memories.search(scope, "Where is my gym?", top_k=1)
        assert [i.text for i in found] == ["My gym moved to Camden Road."]


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_the_scheduler_waits_quietly_for_long_term_memory_to_open(server_factory, request, caplog, store) -> None:
    # A new store has no long-term tables until long-term memory first opens (here: not
    # preloaded). Every tick failed meanwhile, logging an error with a traceback each second.
    settings = {"store": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")} if store == "postgres" else {}
    caplog.set_level(logging.INFO, logger="agentscope_memory.lifecycle")
    server = await server_factory(lifecycle_forgetting_interval_s=1.0, lifecycle_forgetting_threshold=0.99,
                                  **settings)
    await asyncio.sleep(2.5)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    # Once memories exist, the scheduler forgets as configured.
    scope = Scope("助手", "赵六")
    async with AsyncLongTermClient(server.address, timeout=60) as memories:
        [item] = await memories.record(scope, [Msg.create(MsgRole.USER, "我把伞忘在了咖啡馆。")])
        deadline = time.monotonic() + 30
        while "FORGET" not in [h.event for h in await memories.history(item.id)]:
            assert time.monotonic() < deadline, "the scheduled forgetting did not run"
            await asyncio.sleep(0.1)
