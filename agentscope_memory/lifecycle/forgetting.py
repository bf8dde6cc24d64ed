"""Forgetting on Ebbinghaus' curve: memories nobody recalls fade, important and often-recalled
ones last.

    retention = base_retention ^ (Δt / (24 · strengthening_factor ^ access_count)) · (0.5 + 0.5 · importance)

with Δt the hours since the memory was last recalled (or written). Each recall (a search that
returns it touches it) multiplies its "day" by the strengthening factor, so a memory recalled
five times fades about 7.6 times slower; importance scales the whole curve between half and
full. A memory whose retention is below the threshold (default 0.1) is soft-deleted: hidden
from recall and listing, its history says why (event FORGET with its retention), restorable
until it is purged (after `purge_after_s`, or by an explicit purge). Memory types in
`excluded_types` (default: reflections, the distilled knowledge) are never forgotten, nor is a
pinned memory (a user's "remember this for ever"): its retention is 1 whatever its age.

A run reads one scope in pages and retires each page in one short transaction, re-deciding
every memory on its current row under the scope's lock (one recalled meanwhile stays), so it
never holds up readers or writers for long, and a run killed at any point leaves a consistent
scope that the next run completes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.jobs import Job
from agentscope_memory.long_term.engine import LongTermItem, Scope
from agentscope_memory.long_term.hybrid.records import scope_key
from agentscope_memory.long_term.memory_types import MEMORY_TYPES
from agentscope_memory.store.base import LongTermRow

if TYPE_CHECKING:
    from agentscope_memory.long_term.hybrid.engine import HybridEngine

FORGET_JOB = "lifecycle.forget"
PAGE = 500


@dataclass(frozen=True)
class ForgettingSettings:
    base_retention: float = 0.9
    strengthening_factor: float = 1.5
    threshold: float = 0.1
    excluded_types: tuple[str, ...] = ("reflection",)
    # Soft-deleted memories are purged this long after their deletion; 0 keeps them forever.
    purge_after_s: float = 30 * 86400.0

    def validate(self) -> ForgettingSettings:
        if not (math.isfinite(self.base_retention) and 0 < self.base_retention < 1):
            raise InvalidArgumentError("base_retention", f"must be in (0, 1), not {self.base_retention}")
        if not (math.isfinite(self.strengthening_factor) and self.strengthening_factor >= 1):
            raise InvalidArgumentError("strengthening_factor", f"must be a finite number >= 1, not {self.strengthening_factor}")
        if not (math.isfinite(self.threshold) and 0 <= self.threshold <= 1):
            raise InvalidArgumentError("threshold", f"must be in [0, 1], not {self.threshold}")
        for kind in self.excluded_types:
            if kind not in MEMORY_TYPES:
                raise InvalidArgumentError("excluded_types", f"{kind!r} is not one of {', '.join(MEMORY_TYPES)}")
        if not (math.isfinite(self.purge_after_s) and self.purge_after_s >= 0):
            raise InvalidArgumentError("purge_after_seconds", f"must be a finite number >= 0, not {self.purge_after_s}")
        return self


def retention(row: LongTermRow, now: float, settings: ForgettingSettings) -> float:
    """The memory's retention now, in [0, 1] (see the module's docstring); 1 when pinned."""
    if row.pinned:
        return 1.0
    since = row.last_accessed or row.created
    hours = max(0.0, now - since) / 3600.0
    # A very often recalled memory's "day" grows without bound: it does not fade any more.
    day = 24.0 * settings.strengthening_factor ** min(row.access_count, 200)
    importance = min(1.0, max(0.0, row.importance))
    return float(settings.base_retention ** (hours / day) * (0.5 + 0.5 * importance))


def _scope_keys_after(after: str) -> Callable[[Any], list[str]]:
    return lambda tx: tx.ltm_tenant_scope_keys(after, 100)


def _page_after(key: str, after: tuple[float, str] | None) -> Callable[[Any], list[LongTermRow]]:
    return lambda tx: tx.ltm_scope_page(key, after, PAGE)


@dataclass
class Forgotten:
    item: LongTermItem
    retention: float


@dataclass
class ForgetReport:
    scanned: int = 0
    # Forgotten (or, in a dry run, what would be), lowest retention first.
    forgotten: list[Forgotten] = field(default_factory=list)
    dry_run: bool = False
    duration_s: float = 0.0
    # How many were forgotten in all (`forgotten` may list fewer: a report is capped).
    total: int = 0


class Forgetter:
    def __init__(self, engine: HybridEngine, settings: ForgettingSettings | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self._engine = engine
        self.settings = (settings or ForgettingSettings()).validate()
        self._clock = clock
        # Called after every run as (job name, memories forgotten, seconds): metrics.
        self.observers: list[Callable[[str, int, float], None]] = []

    def now(self) -> float:
        return self._clock() if self._clock is not None else self._engine._clock()

    def attach(self, jobs: Any) -> None:
        jobs.register(FORGET_JOB, self._run_job)

    async def _run_job(self, job: Job) -> None:
        """A scheduled run over every scope of the job's tenant, then the due purge."""
        detail = {"job": "forgetting", "job_id": job.job_id}
        # The tables of a database of an older release get their new columns (pinned) at open.
        await self._engine.open()
        after = ""
        while True:
            keys = await self._engine._store.run(job.tenant, _scope_keys_after(after), write=False)
            if not keys:
                break
            for key in keys:
                await self._forget_key(job.tenant, key, dry_run=False, settings=self.settings, detail=detail)
            after = keys[-1]
        await self.purge_due(job.tenant, detail)

    def _settings(self, overrides: dict[str, Any]) -> ForgettingSettings:
        given = {k: v for k, v in overrides.items() if v is not None}
        if "excluded_types" in given:
            given["excluded_types"] = tuple(given["excluded_types"])
        return replace(self.settings, **given).validate()

    async def forget(self, tenant: str, scope: Scope, *, dry_run: bool = False, job_id: str = "",
                     **overrides: Any) -> ForgetReport:
        """Forget what has faded in the exact `scope` now (overrides: base_retention,
        strengthening_factor, threshold, excluded_types). A dry run changes nothing and reports
        what would be forgotten, with each memory's retention."""
        scope.validate()
        settings = self._settings(overrides)
        await self._engine.open()
        return await self._forget_key(tenant, scope_key(scope), dry_run=dry_run, settings=settings,
                                      detail={"job": "forgetting", "job_id": job_id, "trigger": "request"})

    async def _forget_key(self, tenant: str, key: str, *, dry_run: bool, settings: ForgettingSettings,
                          detail: dict[str, Any]) -> ForgetReport:
        from agentscope_memory.long_term.hybrid.engine import item_of

        started = time.perf_counter()
        report = ForgetReport(dry_run=dry_run)
        store = self._engine._store
        after: tuple[float, str] | None = None
        while True:
            page = await store.run(tenant, _page_after(key, after), write=False)
            if not page:
                break
            after = (page[-1].created, page[-1].memory_id)
            report.scanned += len(page)
            now = self.now()
            faded = {r.memory_id: r for r in page
                     if r.memory_type not in settings.excluded_types and not r.pinned
                     and retention(r, now, settings) < settings.threshold}
            if not faded:
                continue
            if dry_run:
                report.forgotten += [Forgotten(item_of(r), retention(r, now, settings)) for r in faded.values()]
                continue

            def decide(row: LongTermRow, _: float) -> dict[str, Any] | None:
                # The current row, under the scope's lock: one recalled since the page was read stays.
                if row.memory_type in settings.excluded_types or row.pinned:
                    return None
                kept = retention(row, self.now(), settings)
                if kept >= settings.threshold:
                    return None
                return {**detail, "retention": round(kept, 6), "threshold": settings.threshold,
                        "access_count": row.access_count, "importance": row.importance}

            retired = await self._engine.retire_where(tenant, key, list(faded), "FORGET", decide)
            report.forgotten += [Forgotten(item_of(r), retention(r, self.now(), settings)) for r in retired]
        report.forgotten.sort(key=lambda f: f.retention)
        report.total = len(report.forgotten)
        report.duration_s = time.perf_counter() - started
        if not dry_run:
            for observe in self.observers:
                observe("forgetting", len(report.forgotten), report.duration_s)
        return report

    async def restore(self, tenant: str, memory_id: str) -> LongTermItem:
        return await self._engine.restore(tenant, memory_id, {"job": "restore", "trigger": "request"})

    async def purge(self, tenant: str, memory_ids: list[str]) -> list[str]:
        """Deletes for good these soft-deleted memories (live ones are left alone)."""
        if not memory_ids:
            raise InvalidArgumentError("ids", "name at least one memory")
        if len(memory_ids) > 1000:
            raise InvalidArgumentError("ids", f"at most 1000 per call, not {len(memory_ids)}")
        return await self._engine.purge(tenant, memory_ids, {"job": "purge", "trigger": "request"})

    async def purge_due(self, tenant: str, detail: dict[str, Any] | None = None) -> list[str]:
        """Purges the tenant's memories soft-deleted longer ago than `purge_after_s` (0: never)."""
        if self.settings.purge_after_s <= 0:
            return []
        before = self.now() - self.settings.purge_after_s
        gone: list[str] = []
        while True:
            rows = await self._engine._store.run(tenant, lambda tx: tx.ltm_deleted_before(before, PAGE), write=False)
            if not rows:
                return gone
            purged = await self._engine.purge(tenant, [r.memory_id for r in rows],
                                              {**(detail or {}), "purge_after_seconds": self.settings.purge_after_s})
            gone += purged
            if len(rows) < PAGE:
                return gone
