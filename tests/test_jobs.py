"""The durable job queue and its runner, on every backend (real sqlite, real PostgreSQL)."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentscope_memory.errors import NotFoundError
from agentscope_memory.jobs import Job, JobRunner, JobSettings, PermanentJobError
from agentscope_memory.store import NO_TENANT, open_store


class Clock:
    """A clock the test moves by hand; the runner stores every due time and lease in it."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(params=["sqlite", "memory", "postgres"])
async def store(request, tmp_path):
    dsn = request.getfixturevalue("postgres_dsn") if request.param == "postgres" else None
    store = open_store(request.param, tmp_path, postgres_dsn=dsn)
    yield store
    await store.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def recorder(runs: list[Job], fail: int = 0, error: Exception | None = None):
    """A handler that records each run and raises for the first `fail` runs."""

    async def handler(job: Job) -> None:
        runs.append(job)
        if len(runs) <= fail:
            raise error or RuntimeError(f"boom {len(runs)}")

    return handler


async def test_a_job_runs_once_and_is_deleted(store, clock) -> None:
    runner = JobRunner(store, clock=clock)
    runs: list[Job] = []
    runner.register("greet", recorder(runs))
    job_id = await runner.enqueue("t1", "greet", {"name": "Ada", "n": 1})
    assert [j.state for j in await runner.list_jobs("t1")] == ["pending"]
    assert await runner.run_due() == 1
    assert runs == [Job(job_id, "t1", "greet", {"name": "Ada", "n": 1}, 1)]
    assert await runner.list_jobs("t1") == []
    assert await runner.run_due() == 0


async def test_enqueue_in_is_atomic_with_the_callers_transaction(store, clock) -> None:
    runner = JobRunner(store, clock=clock)

    def failing(tx):
        tx.kv_put("m", "k", "v")
        runner.enqueue_in(tx, "greet", {"n": 1})
        raise RuntimeError("the caller's write failed")

    with pytest.raises(RuntimeError):
        await store.run("t1", failing)
    assert await runner.list_jobs("t1") == []

    def succeeding(tx):
        tx.kv_put("m", "k", "v")
        return runner.enqueue_in(tx, "greet", {"n": 2}, delay_s=60)

    job_id = await store.run("t1", succeeding)
    runner.wake()
    [info] = await runner.list_jobs("t1")
    assert (info.job_id, info.tenant, info.payload, info.run_after) == (job_id, "t1", {"n": 2}, clock.now + 60)


async def test_a_failing_job_is_retried_with_backoff_then_succeeds(store, clock) -> None:
    runner = JobRunner(store, JobSettings(backoff_base_s=1.0, backoff_max_s=300.0), clock=clock)
    runs: list[Job] = []
    runner.register("flaky", recorder(runs, fail=2))
    start = clock.now
    await runner.enqueue("t1", "flaky", {})

    assert await runner.run_due() == 1
    [info] = await runner.list_jobs("t1")
    assert (info.state, info.attempts, info.last_error, info.lease_owner) == ("pending", 1, "RuntimeError: boom 1", None)
    assert start + 1.0 <= info.run_after <= start + 1.1  # base * 2**0, plus at most 10% jitter
    assert await runner.run_due() == 0  # not due yet

    clock.advance(1.2)
    assert await runner.run_due() == 1
    [info] = await runner.list_jobs("t1")
    assert (info.attempts, info.last_error) == (2, "RuntimeError: boom 2")
    assert clock.now + 2.0 <= info.run_after <= clock.now + 2.2  # base * 2**1
    clock.advance(1.9)
    assert await runner.run_due() == 0

    clock.advance(0.4)
    assert await runner.run_due() == 1
    assert [j.attempts for j in runs] == [1, 2, 3]
    assert await runner.list_jobs("t1") == []


@pytest.mark.parametrize("max_attempts", [1, 3], ids=["dead", "retried"])
async def test_an_error_text_with_nul_or_a_lone_surrogate_is_recorded_alike_on_every_store(
        store, clock, max_attempts) -> None:
    # A model's malformed answer, quoted in an UnavailableError: PostgreSQL text cannot hold NUL,
    # and no UTF-8 column a lone surrogate; the job still moves on to its retry or its death.
    runner = JobRunner(store, JobSettings(max_attempts=max_attempts), clock=clock)
    runner.register("flaky", recorder([], fail=1, error=RuntimeError("reply \x00 \ud800 模型")))
    await runner.enqueue("t1", "flaky", {})
    assert await runner.run_due() == 1
    [info] = await runner.list_jobs("t1")
    assert (info.state, info.attempts, info.lease_owner) == ("dead" if max_attempts == 1 else "pending", 1, None)
    assert info.last_error == "RuntimeError: reply \\x00 \\ud800 模型"


async def test_backoff_is_capped(store, clock) -> None:
    runner = JobRunner(store, JobSettings(backoff_base_s=10.0, backoff_max_s=15.0, max_attempts=5), clock=clock)
    runner.register("flaky", recorder([], fail=5))
    await runner.enqueue("t1", "flaky", {})
    waits = []
    for _ in range(3):
        assert await runner.run_due() == 1
        [info] = await runner.list_jobs("t1")
        waits.append(info.run_after - clock.now)
        clock.advance(20)
    assert 10.0 <= waits[0] <= 11.0
    assert all(15.0 <= wait <= 16.5 for wait in waits[1:])  # 20 and 40, capped at 15


async def test_a_job_is_dead_after_max_attempts(store, clock) -> None:
    runner = JobRunner(store, JobSettings(max_attempts=3, backoff_base_s=0.0), clock=clock)
    runs: list[Job] = []
    runner.register("doomed", recorder(runs, fail=100))
    await runner.enqueue("t1", "doomed", {"x": 1})
    # No backoff: every retry is due at once, so one run_due goes through all of them.
    assert await runner.run_due() == 3
    [dead] = await runner.list_jobs("t1", state="dead")
    assert (dead.attempts, dead.last_error, dead.payload, dead.lease_owner) == (3, "RuntimeError: boom 3", {"x": 1}, None)
    clock.advance(10_000)
    assert await runner.run_due() == 0
    assert len(runs) == 3
    assert await runner.wait_idle(1)


@pytest.mark.parametrize("error", [PermanentJobError("bad payload"), NotFoundError("memory 'm' is gone")])
async def test_a_permanent_error_is_dead_at_once(store, clock, error) -> None:
    runner = JobRunner(store, clock=clock)
    runs: list[Job] = []
    runner.register("once", recorder(runs, fail=1, error=error))
    await runner.enqueue("t1", "once", {})
    assert await runner.run_due() == 1
    [dead] = await runner.list_jobs("t1")
    assert (dead.state, dead.attempts) == ("dead", 1)
    assert dead.last_error == f"{type(error).__name__}: {error}"
    clock.advance(10_000)
    assert await runner.run_due() == 0


async def test_the_lease_is_renewed_while_a_long_handler_runs(store) -> None:
    # Real time: the lease (0.3 s) runs out four times over while the handler works.
    settings = JobSettings(lease_s=0.3)
    first, second = JobRunner(store, settings), JobRunner(store, settings)
    started, runs = asyncio.Event(), []

    async def slow(job: Job) -> None:
        runs.append(job.job_id)
        started.set()
        await asyncio.sleep(1.2)

    first.register("slow", slow)
    second.register("slow", slow)
    await first.enqueue("t1", "slow", {})
    running = asyncio.create_task(first.run_due())
    await asyncio.wait_for(started.wait(), 5)
    while not running.done():
        assert await second.run_due() == 0
        await asyncio.sleep(0.05)
    assert await running == 1
    assert len(runs) == 1
    assert await first.list_jobs("t1") == []


async def test_a_dead_runners_job_is_run_by_another_once_its_lease_runs_out(store, clock) -> None:
    runner = JobRunner(store, JobSettings(lease_s=30.0), clock=clock)
    runs: list[Job] = []
    runner.register("work", recorder(runs))
    job_id = await runner.enqueue("t1", "work", {"n": 7})
    # A runner claims the job and dies before finishing: nothing but its claim is left behind.
    claimed = await store.run(
        NO_TENANT, lambda tx: tx.job_claim("killed-runner", ["work"], clock.now, clock.now + 30.0, 10)
    )
    assert [j.job_id for j in claimed] == [job_id]
    [info] = await runner.list_jobs("t1", state="running")
    assert (info.lease_owner, info.lease_until) == ("killed-runner", clock.now + 30.0)

    assert await runner.run_due() == 0  # still leased
    clock.advance(29)
    assert await runner.run_due() == 0
    clock.advance(2)
    assert await runner.run_due() == 1
    assert [(j.job_id, j.payload, j.attempts) for j in runs] == [(job_id, {"n": 7}, 2)]
    assert await runner.list_jobs("t1") == []
    # The dead runner's claim is void: settling it afterwards changes nothing.
    assert await store.run("t1", lambda tx: tx.job_done(job_id, "killed-runner", 1)) is False


async def test_a_job_whose_runners_keep_dying_goes_dead(store, clock) -> None:
    runner = JobRunner(store, JobSettings(lease_s=10.0, max_attempts=2), clock=clock)
    runs: list[Job] = []
    runner.register("poison", recorder(runs))
    await runner.enqueue("t1", "poison", {})
    for _ in range(2):
        await store.run(NO_TENANT, lambda tx: tx.job_claim("killed", ["poison"], clock.now, clock.now + 10.0, 1))
        clock.advance(11)
    assert await runner.run_due() == 1
    assert runs == []
    [dead] = await runner.list_jobs("t1", state="dead")
    assert dead.attempts == 3 and "without finishing" in dead.last_error


async def test_stop_releases_unfinished_jobs_for_the_next_runner(store, clock) -> None:
    stopping = JobRunner(store, JobSettings(poll_interval_s=0.05), clock=clock)
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def endless(job: Job) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stopping.register("endless", endless)
    await stopping.start()
    job_id = await stopping.enqueue("t1", "endless", {"n": 1})
    await asyncio.wait_for(started.wait(), 5)
    began = time.monotonic()
    await stopping.stop(grace=0.2)
    assert cancelled.is_set() and time.monotonic() - began < 2
    [info] = await stopping.list_jobs("t1")
    # Due at once, unleased, and the interrupted run does not count as an attempt.
    assert (info.state, info.run_after, info.lease_owner, info.lease_until, info.attempts) == (
        "pending", clock.now, None, None, 0)

    runs: list[Job] = []
    following = JobRunner(store, clock=clock)
    following.register("endless", recorder(runs))
    assert await following.run_due() == 1  # no clock advance needed
    assert [(j.job_id, j.attempts) for j in runs] == [(job_id, 1)]


async def test_stop_lets_handlers_finish_within_the_grace(store, clock) -> None:
    runner = JobRunner(store, JobSettings(poll_interval_s=0.05), clock=clock)
    started, finished = asyncio.Event(), []

    async def short(job: Job) -> None:
        started.set()
        await asyncio.sleep(0.2)
        finished.append(job.job_id)

    runner.register("short", short)
    await runner.start()
    job_id = await runner.enqueue("t1", "short", {})
    await asyncio.wait_for(started.wait(), 5)
    await runner.stop(grace=5)
    assert finished == [job_id]
    assert await runner.list_jobs("t1") == []


async def test_the_background_loop_runs_jobs_as_they_come(store, clock) -> None:
    settings = JobSettings(poll_interval_s=0.05, concurrency=3)
    runner = JobRunner(store, settings, clock=clock)
    running, most, runs = 0, 0, []

    async def handler(job: Job) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)
        runs.append(job.payload["i"])
        running -= 1

    runner.register("count", handler)
    await runner.start()
    try:
        for i in range(10):
            await runner.enqueue(f"t{i % 2}", "count", {"i": i})
        assert await runner.wait_idle(10)
        assert sorted(runs) == list(range(10))
        assert 1 < most <= 3
        # A delayed job waits for its time; the loop polls and finds it then.
        await runner.enqueue("t0", "count", {"i": 10}, delay_s=5)
        assert await runner.wait_idle(1)
        assert 10 not in runs
        clock.advance(5)
        assert await runner.wait_idle(5)
        assert 10 in runs
    finally:
        await runner.stop(1)


async def test_jobs_of_unknown_kinds_are_left_alone(store, clock) -> None:
    runner = JobRunner(store, clock=clock)
    runner.register("known", recorder([]))
    await runner.enqueue("t1", "unknown", {})
    assert await runner.run_due() == 0
    assert await runner.wait_idle(0.5)  # nothing due *for this runner*
    [info] = await runner.list_jobs("t1")
    assert (info.kind, info.state, info.attempts) == ("unknown", "pending", 0)
    knowing = JobRunner(store, clock=clock)
    knowing.register("unknown", recorder([]))
    assert not await knowing.wait_idle(0)
    assert await knowing.run_due() == 1


async def test_list_jobs_is_per_tenant_and_filters(store, clock) -> None:
    runner = JobRunner(store, JobSettings(max_attempts=1), clock=clock)
    runner.register("bad", recorder([], fail=1))
    a = await runner.enqueue("t1", "good", {"n": 1})
    b = await runner.enqueue("t1", "bad", {"n": 2})
    c = await runner.enqueue("t2", "good", {"n": 3})
    assert await runner.run_due() == 1  # only "bad" has a handler, and it fails for good
    assert {j.job_id for j in await runner.list_jobs("t1")} == {a, b}
    assert [j.job_id for j in await runner.list_jobs("t2")] == [c]
    assert [j.job_id for j in await runner.list_jobs("t1", kind="good")] == [a]
    assert [j.job_id for j in await runner.list_jobs("t1", state="dead")] == [b]
    assert [j.job_id for j in await runner.list_jobs("t1", state="pending", kind="bad")] == []
    assert await runner.list_jobs("t3") == []
    with pytest.raises(ValueError):
        await runner.list_jobs("t1", state="exploded")


async def test_two_replicas_run_each_job_exactly_once(postgres_dsn) -> None:
    from agentscope_memory.store.postgres import PostgresStore

    stores = [PostgresStore(postgres_dsn), PostgresStore(postgres_dsn)]
    settings = JobSettings(poll_interval_s=0.02, concurrency=8, lease_s=10.0)
    runners = [JobRunner(s, settings) for s in stores]
    executions: list[tuple[int, str]] = []

    for runner in runners:
        async def handler(job: Job, runner: JobRunner = runner) -> None:
            await asyncio.sleep(0.005)
            executions.append((job.payload["i"], runner.owner))

        runner.register("count", handler)

    def enqueue_all(tx) -> None:
        for i in range(200):
            runners[0].enqueue_in(tx, "count", {"i": i})

    try:
        await asyncio.gather(*(r.start() for r in runners))
        await stores[0].run("t1", enqueue_all)
        runners[0].wake()
        deadline = time.monotonic() + 60
        while len(executions) < 200 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert all([await r.wait_idle(10) for r in runners])
    finally:
        await asyncio.gather(*(r.stop(1) for r in runners))
        await asyncio.gather(*(s.close() for s in stores))

    done = sorted(i for i, _ in executions)
    assert done == list(range(200))  # none twice, none missing
    assert {owner for _, owner in executions} == {r.owner for r in runners}  # both replicas worked
