"""The job runner: claims due jobs from the store under a lease and runs their handlers.

One runner serves every tenant. Several runners (server replicas) may share one database: a
claim hands each job to exactly one of them at a time, and a runner that dies loses its jobs to
the others once their leases run out. No store transaction is held while a handler runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.jobs.model import Job, JobInfo, JobSettings, PermanentJobError
from agentscope_memory.jobs.retry import backoff_s, describe, is_permanent
from agentscope_memory.store.base import JOB_STATES, NO_TENANT, JobRecord, Store, Tx

log = logging.getLogger("agentscope_memory.jobs")

Handler = Callable[[Job], Awaitable[None]]


@dataclass
class _Claim:
    """A job this runner holds the lease on."""

    job: Job
    task: asyncio.Task[None] = field(init=False)
    # The handler has returned or raised: only settling the claim in the store remains, which
    # stop() lets finish instead of cancelling.
    settled: bool = False


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class JobRunner:
    def __init__(
        self,
        store: Store,
        settings: JobSettings | None = None,
        *,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._settings = settings or JobSettings()
        # Names this runner's leases; unique per runner unless a caller picks one.
        self.owner = owner or _default_owner()
        # Every time stored in the queue (due times, leases) comes from this clock.
        self._clock = clock
        self._handlers: dict[str, Handler] = {}
        self._claims: dict[str, _Claim] = {}
        # Claim transactions under way: jobs that are neither due nor visibly running yet.
        self._claiming = 0
        self._wake = asyncio.Event()
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None
        self._renew_task: asyncio.Task[None] | None = None
        self._random = random.Random()

    # -- queueing ---------------------------------------------------------------------------

    def register(self, kind: str, handler: Handler) -> None:
        """Run `handler` for jobs of `kind`. Jobs of kinds without a handler are left alone."""
        if kind in self._handlers:
            raise ValueError(f"a handler for job kind {kind!r} is registered already")
        self._handlers[kind] = handler

    def enqueue_in(
        self, tx: Tx, kind: str, payload: dict[str, Any], *, delay_s: float = 0.0
    ) -> str:
        """Queue a job for `tx.tenant` inside the caller's transaction, so that it exists if and
        only if the caller's writes commit. Call `wake()` once the transaction has committed."""
        if not kind:
            raise ValueError("a job needs a kind")
        job_id = uuid.uuid4().hex
        now = self._clock()
        tx.job_add(job_id, kind, payload, now + max(0.0, delay_s), now)
        return job_id

    async def enqueue(
        self, tenant: str, kind: str, payload: dict[str, Any], *, delay_s: float = 0.0
    ) -> str:
        """Queue a job in a transaction of its own."""
        job_id = await self._store.run(
            tenant, lambda tx: self.enqueue_in(tx, kind, payload, delay_s=delay_s), small=True
        )
        self.wake()
        return job_id

    def wake(self) -> None:
        """Look for due jobs now rather than at the next poll (call on the event loop)."""
        self._wake.set()

    async def list_jobs(
        self, tenant: str, *, state: str | None = None, kind: str | None = None
    ) -> list[JobInfo]:
        if state is not None and state not in JOB_STATES:
            raise InvalidArgumentError("state", f"must be one of {', '.join(JOB_STATES)}")
        return await self._store.run(tenant, lambda tx: tx.job_list(state, kind), write=False)

    # -- running ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Run due jobs in the background until `stop`."""
        if self._loop_task is not None:
            raise RuntimeError("the job runner is running already")
        self._stopping = False
        self._loop_task = asyncio.create_task(self._loop(), name=f"jobs {self.owner}")

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                asked, claimed = await self._claim_and_start()
            except Exception:  # the database may come back; keep polling
                log.exception("claiming jobs failed; trying again in %.1f s", self._settings.poll_interval_s)
                asked, claimed = 0, []
            if asked and len(claimed) == asked:
                continue  # every free slot was filled: more may be due
            try:
                await asyncio.wait_for(self._wake.wait(), self._settings.poll_interval_s)
            except TimeoutError:
                pass

    async def run_due(self) -> int:
        """Claim and run every job due now, once, without the background loop; returns how many
        ran. Jobs that fail are rescheduled by their backoff, so they run here again only if
        that makes them due at once."""
        ran = 0
        mine: set[asyncio.Task[None]] = set()
        while True:
            _, claimed = await self._claim_and_start()
            ran += len(claimed)
            mine = {t for t in mine if not t.done()} | {c.task for c in claimed}
            if not mine:
                return ran
            await asyncio.wait(mine, return_when=asyncio.FIRST_COMPLETED)

    async def wait_idle(self, timeout: float) -> bool:
        """True once no job is due for this runner and none is running here; False if that
        has not happened within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        kinds = sorted(self._handlers)
        while True:
            if not self._busy():
                next_due = await self._store.run(
                    NO_TENANT, lambda tx: tx.job_next_due(kinds), write=False, small=True
                )
                # Re-checked: a claim may have started while the store was being asked.
                if not self._busy() and (next_due is None or next_due > self._clock()):
                    return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(0.02, remaining))

    def _busy(self) -> bool:
        return bool(self._claims) or self._claiming > 0

    async def stop(self, grace: float) -> None:
        """Stop claiming; give running handlers up to `grace` seconds, then cancel them. Jobs
        they did not finish are released, due at once, for another runner or the next start."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            # It ends after the claim it may be making, so no claimed job is left unstarted.
            await self._loop_task
            self._loop_task = None
        running = [c.task for c in self._claims.values()]
        if running and grace > 0:
            await asyncio.wait(running, timeout=grace)
        unfinished = [c for c in self._claims.values() if not c.settled]
        for claim in unfinished:
            claim.task.cancel()
        remaining = [c.task for c in self._claims.values()]
        if remaining:
            # Settling claims (one short transaction each) finishes; cancelled handlers unwind.
            _, stuck = await asyncio.wait(remaining, timeout=max(grace, 5.0))
            if stuck:
                log.warning("%d job handlers ignored cancellation; releasing their jobs anyway", len(stuck))
        if unfinished:
            ids = [c.job.job_id for c in unfinished]
            released = await self._store.run(
                NO_TENANT, lambda tx: tx.job_release(self.owner, ids, self._clock()), small=True
            )
            log.info("released %d unfinished jobs at shutdown", released)
        if self._renew_task is not None:
            self._renew_task.cancel()
            await asyncio.gather(self._renew_task, return_exceptions=True)
            self._renew_task = None

    # -- claims -----------------------------------------------------------------------------

    async def _claim_and_start(self) -> tuple[int, list[_Claim]]:
        """Claim due jobs for the free slots and start their handlers: (slots asked, claims)."""
        free = self._settings.concurrency - len(self._claims)
        if free <= 0 or not self._handlers:
            return 0, []
        kinds = sorted(self._handlers)
        now = self._clock()
        lease_until = now + self._settings.lease_s
        self._claiming += 1
        try:
            records = await self._store.run(
                NO_TENANT,
                lambda tx: tx.job_claim(self.owner, kinds, now, lease_until, free),
                small=True,
            )
            return free, [self._start(record) for record in records]
        finally:
            self._claiming -= 1

    def _start(self, record: JobRecord) -> _Claim:
        job = Job(record.job_id, record.tenant, record.kind, record.payload, record.attempts)
        claim = self._claims[job.job_id] = _Claim(job)
        claim.task = asyncio.create_task(self._execute(claim), name=f"job {job.kind} {job.job_id}")
        if self._renew_task is None or self._renew_task.done():
            self._renew_task = asyncio.create_task(self._renew_leases(), name=f"job leases {self.owner}")
        return claim

    async def _execute(self, claim: _Claim) -> None:
        job = claim.job
        try:
            try:
                if job.attempts > self._settings.max_attempts:
                    # Only leases that ran out get a job here: its runners kept dying on it.
                    raise PermanentJobError(
                        f"started {job.attempts - 1} times without finishing (its runner stopped"
                        " or lost the lease each time)"
                    )
                await self._handlers[job.kind](job)
            except asyncio.CancelledError:
                raise  # stop() cancelled it, and releases the job
            except Exception as exc:  # noqa: BLE001 - every failure is recorded with the job
                claim.settled = True
                await self._failed(job, exc)
            else:
                claim.settled = True
                done = await self._store.run(
                    job.tenant, lambda tx: tx.job_done(job.job_id, self.owner, job.attempts), small=True
                )
                if not done:
                    log.warning("job %s (%s) finished after its lease was lost; it may run again",
                                job.job_id, job.kind)
        except Exception:  # the lease runs out and the job is claimed again
            log.exception("could not record the outcome of job %s (%s)", job.job_id, job.kind)
        finally:
            if self._claims.get(job.job_id) is claim:
                del self._claims[job.job_id]
            self._wake.set()  # a slot is free

    async def _failed(self, job: Job, exc: Exception) -> None:
        error = describe(exc)
        now = self._clock()
        where = f"job {job.job_id} ({job.kind}, tenant {job.tenant!r}, attempt {job.attempts})"
        if is_permanent(exc) or job.attempts >= self._settings.max_attempts:
            log.error("%s failed for good: %s", where, error, exc_info=exc)
            await self._store.run(
                job.tenant,
                lambda tx: tx.job_dead(job.job_id, self.owner, job.attempts, error, now),
                small=True,
            )
            return
        delay = backoff_s(job.attempts, self._settings, self._random)
        log.warning("%s failed, retrying in %.1f s: %s", where, delay, error)
        await self._store.run(
            job.tenant,
            lambda tx: tx.job_retry(job.job_id, self.owner, job.attempts, now + delay, error, now),
            small=True,
        )

    async def _renew_leases(self) -> None:
        # Three renewals per lease: one can fail (a slow database) and the lease still holds.
        interval = self._settings.lease_s / 3
        while self._claims:
            await asyncio.sleep(interval)
            ids = list(self._claims)
            if not ids:
                return
            now = self._clock()
            try:
                renewed = await self._store.run(
                    NO_TENANT,
                    # awaited before the loop moves on, so the loop variables cannot change under it
                    lambda tx: tx.job_renew(self.owner, ids, now + self._settings.lease_s, now),  # noqa: B023
                    small=True,
                )
            except Exception:  # tried again at the next interval
                log.exception("renewing job leases failed")
                continue
            for job_id in set(ids) - set(renewed):
                claim = self._claims.get(job_id)
                if claim is not None and not claim.settled:
                    log.warning("lost the lease on job %s (%s); another runner may run it too",
                                job_id, claim.job.kind)
