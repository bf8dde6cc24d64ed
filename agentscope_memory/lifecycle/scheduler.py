"""Runs the lifecycle's periodic jobs on a schedule inside the server, once per interval per
tenant however many replicas share the store.

Every replica ticks; a tick numbers the current interval (`slot = now // interval`) and, for each
tenant with long-term memories, records the run (tenant, job, slot) in the store and queues the
job in the same transaction. Only the replica whose record lands queues it (the others find the
row), and the durable job queue then runs it on one replica at a time, resuming it elsewhere if
its runner dies. Jobs register by name with one line (`register`).

The records of runs are pruned as new ones land: each (tenant, job) keeps those of its last
`KEEP_SLOTS` intervals, so the table stays as large as the tenants times the jobs, whatever the
uptime. A replica whose clock runs behind by fewer intervals than that still finds the record
of the slot it computes, and does not queue that run a second time.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from agentscope_memory.store.base import NO_TENANT, Store

log = logging.getLogger("agentscope_memory.lifecycle")

# How many intervals' records of runs each (tenant, job) keeps (see the module docstring).
KEEP_SLOTS = 24


@dataclass(frozen=True)
class Periodic:
    name: str
    # The durable job kind run for each tenant (its handler is registered with the job runner).
    kind: str
    interval_s: float


class LifecycleScheduler:
    def __init__(self, store: Store, jobs: Any, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._jobs = jobs
        self._clock = clock
        self.periodic: list[Periodic] = []
        self._task: asyncio.Task[None] | None = None

    def register(self, name: str, kind: str, interval_s: float | None) -> None:
        """Run job `kind` for every tenant every `interval_s` seconds (None or 0: not scheduled)."""
        if not interval_s:
            return
        if not (math.isfinite(interval_s) and interval_s > 0):
            raise ValueError(f"{name}: the interval must be a positive number of seconds, not {interval_s}")
        self.periodic.append(Periodic(name, kind, float(interval_s)))

    async def tick(self) -> int:
        """Queue the runs due now that no replica queued yet; returns how many this one queued."""
        if not self.periodic:
            return 0
        tenants = await self._store.run(NO_TENANT, lambda tx: tx.ltm_tenants(), write=False)
        queued = 0
        for periodic in self.periodic:
            now = self._clock()
            slot = int(now // periodic.interval_s)
            for tenant in tenants:
                job_id = uuid.uuid4().hex

                def claim(tx: Any, p: Periodic = periodic, job_id: str = job_id, slot: int = slot,
                          now: float = now) -> bool:
                    if not tx.lifecycle_claim_run(p.name, slot, job_id, now):
                        return False
                    tx.job_add(job_id, p.kind, {"scheduled": p.name, "slot": slot}, now, now)
                    tx.lifecycle_prune_runs(p.name, slot - KEEP_SLOTS)
                    return True

                if await self._store.run(tenant, claim):
                    queued += 1
        if queued:
            self._jobs.wake()
            log.info("lifecycle runs queued", extra={"fields": {"runs": queued}})
        return queued

    async def start(self) -> None:
        if self._task is None and self.periodic:
            self._task = asyncio.create_task(self._loop(), name="lifecycle scheduler")

    async def _loop(self) -> None:
        # Tick a few times per shortest interval, so a run starts soon after its slot opens.
        pause = max(1.0, min(p.interval_s for p in self.periodic) / 4)
        while True:
            try:
                await self.tick()
            except Exception:  # a store hiccup: the next tick tries again
                log.exception("lifecycle scheduler tick failed")
            await asyncio.sleep(pause)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


__all__ = ["KEEP_SLOTS", "LifecycleScheduler", "Periodic"]
