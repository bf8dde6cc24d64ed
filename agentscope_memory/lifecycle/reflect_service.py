"""The reflection, consolidation and compressed-recall part of the lifecycle, built from the
service settings over the server's own long-term engine (what servicers and local clients call)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from agentscope_memory.lifecycle.compressed import CompressedSearch
from agentscope_memory.jobs import Job
from agentscope_memory.lifecycle.consolidation import CONSOLIDATE_JOB, ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.forgetting import FORGET_JOB, Forgetter, ForgettingSettings
from agentscope_memory.lifecycle.reflection import ReflectionSettings, Reflector
from agentscope_memory.lifecycle.scheduler import LifecycleScheduler

if TYPE_CHECKING:
    from agentscope_memory.llm import ChatClient
    from agentscope_memory.long_term.hybrid.engine import HybridEngine


CONSOLIDATE_TENANT_JOB = "lifecycle.consolidate_tenant"


async def queue_consolidations(engine: HybridEngine, jobs: Any, consolidator: Consolidator, job: Job) -> int:
    """A scheduled run over one tenant: queue a consolidation job (durable, retried on its own)
    for every exact scope holding more unpinned facts than the threshold (pinned ones are never
    merged nor trimmed: a job for them would do nothing). Returns how many."""
    store = engine._store
    threshold = consolidator.settings.threshold
    queued, after = 0, ""
    while True:
        scopes = await store.run(job.tenant, _scopes_after(after), write=False)
        if not scopes:
            return queued
        for key, agent, user, run in scopes:
            def maybe(tx: Any, key: str = key, scope: tuple[str, str, str] = (agent, user, run)) -> bool:
                if tx.ltm_typed_count(key, "fact", unpinned=True) <= threshold:
                    return False
                jobs.enqueue_in(tx, CONSOLIDATE_JOB, {"scope": list(scope)})
                return True

            queued += int(await store.run(job.tenant, maybe))
        after = scopes[-1][0]
        if queued:
            jobs.wake()


def _scopes_after(after: str) -> Callable[[Any], list[tuple[str, str, str, str]]]:
    return lambda tx: tx.ltm_tenant_scopes(after, 100)


@dataclass
class ReflectLifecycle:
    """The lifecycle jobs over the server's own long-term engine (the name is historical: it
    holds forgetting and the scheduler too)."""

    reflector: Reflector
    consolidator: Consolidator
    compressed: CompressedSearch
    forgetter: Forgetter
    scheduler: LifecycleScheduler


def build_reflect_lifecycle(engine: HybridEngine, llm: ChatClient | None, jobs: Any, settings: Any,
                            clock: Callable[[], float] = time.time) -> ReflectLifecycle:
    """`settings` is a `ServiceSettings` (its `lifecycle_*` fields)."""
    reflector = Reflector(engine, llm, ReflectionSettings(
        importance_threshold=settings.lifecycle_reflection_importance_threshold,
        min_facts=settings.lifecycle_reflection_min_facts,
        cooldown_s=settings.lifecycle_reflection_cooldown_s,
        background=settings.lifecycle_reflection_enabled,
    ), clock)
    consolidator = Consolidator(engine, llm, ConsolidationSettings(
        threshold=settings.lifecycle_consolidation_threshold,
        similarity=settings.lifecycle_consolidation_similarity,
        min_cluster_size=settings.lifecycle_consolidation_min_cluster_size,
        fidelity_threshold=settings.lifecycle_consolidation_fidelity_threshold,
    ), clock)
    forgetter = Forgetter(engine, ForgettingSettings(
        base_retention=settings.lifecycle_forgetting_base_retention,
        strengthening_factor=settings.lifecycle_forgetting_strengthening_factor,
        threshold=settings.lifecycle_forgetting_threshold,
        excluded_types=tuple(settings.lifecycle_forgetting_excluded_types),
        purge_after_s=settings.lifecycle_purge_after_s,
    ), clock)
    reflector.attach(jobs)
    consolidator.attach(jobs)
    forgetter.attach(jobs)
    scheduler = LifecycleScheduler(engine._store, jobs, clock)
    scheduler.register("forgetting", FORGET_JOB, settings.lifecycle_forgetting_interval_s)
    jobs.register(CONSOLIDATE_TENANT_JOB, lambda job: queue_consolidations(engine, jobs, consolidator, job))
    scheduler.register("consolidation", CONSOLIDATE_TENANT_JOB, settings.lifecycle_consolidation_interval_s)
    return ReflectLifecycle(reflector, consolidator, CompressedSearch(engine, llm), forgetter, scheduler)
