"""Forgetting on Ebbinghaus' curve, restore, purge and the lifecycle scheduler over the real
HybridEngine (sqlite and PostgreSQL + pgvector) with the real MiniLM embedder and a
controllable clock; English and Chinese memories."""

from __future__ import annotations

import time
import uuid

import pytest

from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from agentscope_memory.jobs import Job
from agentscope_memory.lifecycle.forgetting import FORGET_JOB, Forgetter, ForgettingSettings, retention
from agentscope_memory.lifecycle.scheduler import LifecycleScheduler
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermRow

DAY = 86400.0
ALICE = Scope(agent_name="助手", user_id="alice")


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request) -> str:
    return request.param


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_engine(store_kind, tmp_path, request, embedder, clock):
    dsn = request.getfixturevalue("postgres_dsn") if store_kind == "postgres" else None
    async def make() -> HybridEngine:
        store = open_store(store_kind, tmp_path, postgres_dsn=dsn)
        engine = HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                              settings=EngineSettings(scoring=False), in_database=store_kind == "postgres", clock=clock)
        await engine.open()
        return engine

    return make  # each test closes what it made


@pytest.fixture
async def engine(open_engine):
    made = await open_engine()
    yield made
    await made.close()
    await made._store.close()


def row(scope: Scope, text: str, importance: float, *, memory_type: str = "fact", accessed: float,
        access_count: int = 0) -> LongTermRow:
    return LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                       user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                       memory_type=memory_type, importance=importance, importance_method="user", created=accessed,
                       updated=accessed, last_accessed=accessed, access_count=access_count, content_hash=content_hash(text))


def test_retention_follows_the_curve() -> None:
    s = ForgettingSettings()
    now = 1_000_000.0
    fresh = row(ALICE, "x", 1.0, accessed=now)
    assert retention(fresh, now, s) == pytest.approx(1.0)
    day_old = row(ALICE, "x", 1.0, accessed=now - DAY)
    assert retention(day_old, now, s) == pytest.approx(0.9)
    assert retention(row(ALICE, "x", 0.0, accessed=now - DAY), now, s) == pytest.approx(0.45)
    # One recall stretches the day to 36 hours: 0.9 ** (24 / 36).
    assert retention(row(ALICE, "x", 1.0, accessed=now - DAY, access_count=1), now, s) == pytest.approx(0.9 ** (2 / 3))
    # Thirty days unrecalled at middling importance is below the threshold; recalled often it is not.
    assert retention(row(ALICE, "x", 0.5, accessed=now - 30 * DAY), now, s) < 0.1
    assert retention(row(ALICE, "x", 0.5, accessed=now - 30 * DAY, access_count=8), now, s) > 0.1
    with pytest.raises(InvalidArgumentError, match="base_retention"):
        ForgettingSettings(base_retention=1.0).validate()
    with pytest.raises(InvalidArgumentError, match="excluded_types"):
        ForgettingSettings(excluded_types=("memo",)).validate()


async def test_faded_memories_are_forgotten_reflections_kept_and_a_dry_run_changes_nothing(engine, clock) -> None:
    now = clock.now
    old = now - 40 * DAY
    stored = await engine.insert("t", ALICE, [
        row(ALICE, "The user once mentioned a rainy Tuesday.", 0.2, accessed=old),
        row(ALICE, "用户上个月提到过一次天气。", 0.2, accessed=old),
        row(ALICE, "The user is allergic to peanuts.", 0.95, accessed=now - DAY),
        row(ALICE, "用户对花生过敏。", 0.3, accessed=old, access_count=10),
        row(ALICE, "The user values quiet mornings and long walks.", 0.1, memory_type="reflection", accessed=old),
    ])
    ids = {r.text: r.memory_id for r in stored}
    forgetter = Forgetter(engine)

    dry = await forgetter.forget("t", ALICE, dry_run=True)
    assert dry.dry_run and dry.scanned == 5
    assert sorted(f.item.text for f in dry.forgotten) == sorted(["The user once mentioned a rainy Tuesday.", "用户上个月提到过一次天气。"])
    assert all(f.retention < 0.1 for f in dry.forgotten)
    assert len(await engine.list("t", ALICE, 100)) == 5  # nothing changed

    done = await forgetter.forget("t", ALICE)
    assert {f.item.id for f in done.forgotten} == {ids["The user once mentioned a rainy Tuesday."], ids["用户上个月提到过一次天气。"]}
    left = {i.text for i in await engine.list("t", ALICE, 100)}
    assert left == {"The user is allergic to peanuts.", "用户对花生过敏。", "The user values quiet mornings and long walks."}
    found = await engine.search("t", ALICE, "天气", 10)
    assert "用户上个月提到过一次天气。" not in {i.text for i in found}
    history = await engine.history("t", ids["用户上个月提到过一次天气。"])
    forget = history[-1]
    assert forget.event == "FORGET" and forget.detail["job"] == "forgetting" and forget.detail["retention"] < 0.1
    # Forgetting again finds nothing more; a higher threshold from the request finds more.
    assert (await forgetter.forget("t", ALICE)).forgotten == []
    more = await forgetter.forget("t", ALICE, dry_run=True, threshold=0.99, excluded_types=[])
    assert "The user values quiet mornings and long walks." in {f.item.text for f in more.forgotten}


async def test_restore_brings_a_memory_back_and_purge_removes_it_for_good(engine, clock) -> None:
    old = clock.now - 60 * DAY
    (gone,) = await engine.insert("t", ALICE, [row(ALICE, "用户以前喜欢喝咖啡。", 0.1, accessed=old)])
    forgetter = Forgetter(engine, ForgettingSettings(purge_after_s=7 * DAY))
    assert len((await forgetter.forget("t", ALICE)).forgotten) == 1

    restored = await forgetter.restore("t", gone.memory_id)
    assert restored.text == "用户以前喜欢喝咖啡。"
    assert [i.id for i in await engine.list("t", ALICE, 10)] == [gone.memory_id]
    # Restoring counts as a recall: it is not forgotten again at once.
    assert (await forgetter.forget("t", ALICE)).forgotten == []
    with pytest.raises(FailedPreconditionError, match="not deleted"):
        await forgetter.restore("t", gone.memory_id)
    with pytest.raises(NotFoundError):
        await forgetter.restore("other-tenant", gone.memory_id)

    # The same text recorded again while it was forgotten: restoring would hold it twice.
    clock.now += 60 * DAY
    assert len((await forgetter.forget("t", ALICE)).forgotten) == 1
    await engine.insert("t", ALICE, [row(ALICE, "用户以前喜欢喝咖啡。", 0.9, accessed=clock.now)])
    with pytest.raises(FailedPreconditionError, match="same text"):
        await forgetter.restore("t", gone.memory_id)

    # Purge: live memories are left alone; a forgotten one goes, its history stays.
    live = (await engine.list("t", ALICE, 10))[0].id
    assert await forgetter.purge("t", [live, gone.memory_id]) == [gone.memory_id]
    with pytest.raises(NotFoundError):
        await engine.get("t", gone.memory_id)
    assert [h.event for h in await engine.history("t", gone.memory_id)][-3:] == ["RESTORE", "FORGET", "PURGE"]
    with pytest.raises(InvalidArgumentError, match="ids"):
        await forgetter.purge("t", [])


async def test_purge_after_the_retention_period(engine, clock) -> None:
    (faded,) = await engine.insert("t", ALICE, [row(ALICE, "A note nobody needs.", 0.0, accessed=clock.now - 90 * DAY)])
    forgetter = Forgetter(engine, ForgettingSettings(purge_after_s=7 * DAY))
    await forgetter.forget("t", ALICE)
    assert await forgetter.purge_due("t") == []  # deleted just now
    clock.now += 8 * DAY
    assert await forgetter.purge_due("t") == [faded.memory_id]
    assert await Forgetter(engine, ForgettingSettings(purge_after_s=0)).purge_due("t") == []


async def test_tenants_are_apart(engine, clock) -> None:
    old = clock.now - 90 * DAY
    await engine.insert("a", ALICE, [row(ALICE, "tenant a's old note", 0.0, accessed=old)])
    (b_row,) = await engine.insert("b", ALICE, [row(ALICE, "tenant b's old note", 0.0, accessed=old)])
    forgetter = Forgetter(engine)
    assert [f.item.text for f in (await forgetter.forget("a", ALICE)).forgotten] == ["tenant a's old note"]
    assert [i.text for i in await engine.list("b", ALICE, 10)] == ["tenant b's old note"]
    # Another tenant's memory cannot be purged (nor restored) from here, even once forgotten.
    await forgetter.forget("b", ALICE)
    assert await forgetter.purge("a", [b_row.memory_id]) == []
    with pytest.raises(NotFoundError):
        await forgetter.restore("a", b_row.memory_id)
    assert (await forgetter.restore("b", b_row.memory_id)).text == "tenant b's old note"


class Jobs:
    """The job runner's queueing side, enough for the scheduler (it only wakes the runner)."""

    def __init__(self) -> None:
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1


async def test_two_replicas_schedule_each_run_once_and_the_job_forgets(open_engine, clock) -> None:
    first, second = await open_engine(), await open_engine()  # two stores on one database: two replicas
    try:
        old = clock.now - 90 * DAY
        await first.insert("t", ALICE, [row(ALICE, "an old note", 0.0, accessed=old)])
        await first.insert("u", Scope(user_id="bob"), [row(Scope(user_id="bob"), "鲍勃的旧笔记", 0.0, accessed=old)])
        schedulers = [LifecycleScheduler(e._store, Jobs(), clock) for e in (first, second)]
        for s in schedulers:
            s.register("forgetting", FORGET_JOB, 3600.0)
        counts = [await s.tick() for s in schedulers] + [await s.tick() for s in schedulers]
        assert sum(counts) == 2  # one run per tenant for this hour, whichever replica ticks
        clock.now += 3600
        assert sum([await s.tick() for s in schedulers]) == 2  # the next hour's runs

        jobs = [j for tenant in ("t", "u") for j in await first._store.run(tenant, lambda tx: tx.job_list(None, FORGET_JOB), write=False)]
        assert len(jobs) == 4
        forgetter = Forgetter(first)
        for job in jobs:
            await forgetter._run_job(Job(job.job_id, job.tenant, job.kind, job.payload, 1))
        assert await first.list("t", ALICE, 10) == []
        assert await second.list("u", Scope(user_id="bob"), 10) == []
        runs = await first._store.run("t", lambda tx: tx.lifecycle_runs("forgetting", 10), write=False)
        assert len(runs) == 2
    finally:
        for e in (first, second):
            await e.close()
            await e._store.close()


async def test_the_records_of_scheduled_runs_stay_bounded_and_a_lagging_replica_runs_nothing_twice(
        open_engine, clock) -> None:
    from agentscope_memory.lifecycle.scheduler import KEEP_SLOTS

    first, second = await open_engine(), await open_engine()  # two replicas on one database
    try:
        await first.insert("t", ALICE, [row(ALICE, "一条笔记", 0.5, accessed=clock.now)])
        lagging = Clock()
        schedulers = [LifecycleScheduler(first._store, Jobs(), clock),
                      LifecycleScheduler(second._store, Jobs(), lagging)]
        for s in schedulers:
            s.register("forgetting", FORGET_JOB, 3600.0)
        hours, lag = 3 * KEEP_SLOTS, 5
        queued = 0
        for hour in range(hours):
            clock.now += 3600
            queued += await schedulers[0].tick()
            if hour >= lag:
                # The second replica's clock is hours behind: the slots it computes were run.
                lagging.now = clock.now - lag * 3600
                queued += await schedulers[1].tick()
        assert queued == hours  # one run per hour, none again
        runs = await first._store.run("t", lambda tx: tx.lifecycle_runs("forgetting", 10 * hours), write=False)
        assert len(runs) <= KEEP_SLOTS + 1
        assert max(slot for slot, _, _ in runs) == int(clock.now // 3600)
    finally:
        for e in (first, second):
            await e.close()
            await e._store.close()


async def test_scheduled_consolidation_queues_only_scopes_over_the_threshold(engine, clock) -> None:
    from agentscope_memory.jobs import JobRunner
    from agentscope_memory.lifecycle.consolidation import CONSOLIDATE_JOB, ConsolidationSettings, Consolidator
    from agentscope_memory.lifecycle.reflect_service import CONSOLIDATE_TENANT_JOB, queue_consolidations

    busy, quiet = Scope(agent_name="助手", user_id="busy"), Scope(agent_name="助手", user_id="quiet")
    await engine.insert("t", busy, [row(busy, text, 0.8, accessed=clock.now) for text in (
        "The user likes green tea.", "The user really likes green tea.", "The user likes drinking green tea.",
        "用户喜欢喝绿茶。")])
    await engine.insert("t", quiet, [row(quiet, "The user likes chess.", 0.8, accessed=clock.now)])
    runner = JobRunner(engine._store, clock=clock)
    consolidator = Consolidator(engine, None, ConsolidationSettings(threshold=3), clock)
    consolidator.attach(runner)
    assert await queue_consolidations(engine, runner, consolidator, Job("j", "t", CONSOLIDATE_TENANT_JOB, {}, 1)) == 1
    (queued,) = await engine._store.run("t", lambda tx: tx.job_list(None, CONSOLIDATE_JOB), write=False)
    assert queued.payload == {"scope": ["助手", "busy", ""]}
    await consolidator._run_job(Job(queued.job_id, "t", CONSOLIDATE_JOB, queued.payload, 1))
    left = [i.text for i in await engine.list("t", busy, 10)]
    assert len(left) < 4 and any("green tea" in text for text in left)
    assert [i.text for i in await engine.list("t", quiet, 10)] == ["The user likes chess."]
