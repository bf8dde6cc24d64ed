"""Consolidation: merge clusters of near-duplicate facts, keeping a merge only if it is faithful.

When an exact scope holds more than `threshold` live unpinned facts (default 150): they are clustered by
cosine similarity (edges at `similarity` or more, default 0.75; clusters are the connected
components, found by union-find), each cluster of at least `min_cluster_size` (3) is merged
into one fact (LLM when configured, else a deterministic extractive merge), and the merge is
kept only if its fidelity (`fidelity.py`) passes. A kept merge is written in the same
transaction that soft-deletes its originals (history event `CONSOLIDATE`, linked both ways),
one transaction per cluster: a run killed at any point leaves a consistent scope, and a rerun
merges what is left. Failing merges and small clusters leave the originals as they are.

Without embeddings (rows not embedded, or `use_embeddings` off) there is no similarity to
cluster by: the scope keeps its `threshold` most important unpinned facts and the rest of those are
soft-deleted (history event `CONSOLIDATE_TRIM`).

Pinned facts are never merged away nor trimmed: they stay out of the clusters (a merge that
absorbed one would end its pin, or pin what others said) and out of a trim. So they do not count
toward the threshold either: a scope of many pinned facts would otherwise start a run, on every
trigger, that has nothing it may change.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.jobs import Job
from agentscope_memory.lifecycle import fidelity
from agentscope_memory.lifecycle.summaries import LLM_ERRORS, EXTRACTIVE, LLM, MERGE_PROMPT, ask, extractive_merge, log
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store.base import LongTermRow

if TYPE_CHECKING:
    from agentscope_memory.llm import ChatClient
    from agentscope_memory.long_term.hybrid.engine import HybridEngine

CONSOLIDATE_JOB = "lifecycle.consolidate"
# Rows of a similarity block compared at once (a block of 1024 x 10,000 float32 is 40 MB).
BLOCK = 1024
# Merges listed in a report, and the characters of their texts and ids: a 4 MiB response must
# hold them (the counts cover every merge).
MAX_REPORTED = 200
MAX_REPORTED_CHARS = 1_000_000
# A merge longer than this is not a consolidation: the LLM's answer is replaced by the
# extractive merge.
MAX_MERGE_CHARS = 4000


@dataclass(frozen=True)
class ConsolidationSettings:
    threshold: int = 150
    similarity: float = 0.75
    min_cluster_size: int = 3
    fidelity_threshold: float = fidelity.DEFAULT_THRESHOLD
    # Larger components are split at a higher similarity until they fit (one note cannot
    # faithfully stand for that many), or cut into runs when no similarity splits them.
    max_cluster_size: int = 50
    use_embeddings: bool = True

    def validate(self) -> ConsolidationSettings:
        if self.threshold < 0:
            raise InvalidArgumentError("threshold", f"must be >= 0, not {self.threshold}")
        if not (math.isfinite(self.similarity) and -1.0 <= self.similarity <= 1.0):
            raise InvalidArgumentError("similarity", f"must be between -1 and 1, not {self.similarity}")
        if not 2 <= self.min_cluster_size <= self.max_cluster_size:
            raise InvalidArgumentError("min_cluster_size", f"must be between 2 and {self.max_cluster_size}, not {self.min_cluster_size}")
        if not (math.isfinite(self.fidelity_threshold) and 0.0 <= self.fidelity_threshold <= 1.0):
            raise InvalidArgumentError("fidelity_threshold", f"must be between 0 and 1, not {self.fidelity_threshold}")
        return self


@dataclass
class Merge:
    original_ids: list[str]
    text: str
    method: str
    fidelity: fidelity.Fidelity
    # The merged memory's id once written ("" in a dry run or when it failed).
    memory_id: str = ""
    applied: bool = False


@dataclass
class ConsolidationReport:
    facts_before: int = 0
    facts_after: int = 0
    clusters: int = 0
    merged: int = 0
    originals_retired: int = 0
    failed_fidelity: int = 0
    skipped_small: int = 0
    skipped_large: int = 0
    trimmed: int = 0
    dry_run: bool = False
    ran: bool = False
    reason: str = ""
    duration_s: float = 0.0
    merges: list[Merge] = field(default_factory=list)


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def clusters(vectors: np.ndarray, similarity: float, max_size: int | None = None,
             min_size: int = 2) -> list[list[int]]:
    """Connected components of the graph with an edge where cosine >= `similarity`, each
    sorted, in order of their first member. With `max_size`, a component larger than that (one
    chain of similar facts linking many topics) is split again at a similarity 0.05 higher, until
    its parts fit. A component that no higher similarity splits into parts of `min_size` or
    more (its facts are all about equally alike: the same fact said many ways) is cut into
    near-equal runs of at most `max_size` instead, in order: each run merges on its own, and a
    later consolidation merges what the runs became."""
    groups = _components(vectors, similarity)
    if max_size is None:
        return groups
    out: list[list[int]] = []
    for group in groups:
        if len(group) <= max_size:
            out.append(group)
            continue
        parts = clusters(vectors[group], similarity + 0.05, max_size, min_size) if similarity < 1.0 else []
        if all(len(part) < min_size for part in parts) and _tight(vectors[group], similarity):
            out += _runs(group, max_size)
        elif parts:
            out += [[group[i] for i in part] for part in parts]
        else:  # not to be split, nor one fact: left alone, too large to merge
            out.append(group)
    return sorted(out, key=lambda g: g[0])


def _tight(vectors: np.ndarray, similarity: float) -> bool:
    """Every member is at least `similarity` alike to the members' mean: one fact said many
    ways, not a chain whose ends are about different things."""
    unit = _unit_rows(vectors)
    centre = unit.mean(axis=0)
    centre /= max(float(np.linalg.norm(centre)), 1e-12)
    return bool(np.min(unit @ centre) >= similarity)


def _runs(group: list[int], max_size: int) -> list[list[int]]:
    count = -(-len(group) // max_size)
    bounds = [len(group) * k // count for k in range(count + 1)]
    return [group[bounds[k]:bounds[k + 1]] for k in range(count)]


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def _components(vectors: np.ndarray, similarity: float) -> list[list[int]]:
    n = len(vectors)
    unit = _unit_rows(vectors)
    uf = _UnionFind(n)
    for start in range(0, n, BLOCK):
        block = unit[start:start + BLOCK] @ unit.T
        rows, cols = np.nonzero(block >= similarity)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            i = start + r
            if c > i:
                uf.union(i, c)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(uf.find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


class Consolidator:
    def __init__(self, engine: HybridEngine, llm: ChatClient | None = None,
                 settings: ConsolidationSettings | None = None, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self._llm = llm
        self.settings = (settings or ConsolidationSettings()).validate()
        self._clock = clock
        self.runs = 0
        self.merged = 0
        # Called after every run that writes as (job name, merges made, seconds): metrics.
        self.observers: list[Callable[[str, int, float], None]] = []

    def attach(self, jobs: Any) -> None:
        """Handle durable consolidation jobs (payload {"scope": [agent, user, run]}), which a
        scheduler queues per scope; a job killed mid-run is claimed again and completes."""
        jobs.register(CONSOLIDATE_JOB, self._run_job)

    async def _run_job(self, job: Job) -> None:
        agent, user, run = (str(x) for x in job.payload["scope"])
        await self.consolidate_scope(job.tenant, Scope(agent, user, run), job_id=job.job_id)

    async def _merge_text(self, texts: list[str], use_llm: bool) -> tuple[str, str, bool]:
        """(merged text, method, whether the LLM failed): the merge by the LLM, or the
        extractive one."""
        if self._llm is not None and use_llm:
            try:
                text = await ask(self._llm, MERGE_PROMPT, texts)
                if text and len(text) <= MAX_MERGE_CHARS:
                    return text, LLM, False
                log.warning("the LLM's merge has %d characters (after its framing); using the extractive merge",
                            len(text))
            except LLM_ERRORS:
                log.warning("merge by the LLM failed; merging offline for the rest of this run", exc_info=True)
                return await self._extractive(texts), EXTRACTIVE, True
        return await self._extractive(texts), EXTRACTIVE, False

    @staticmethod
    async def _extractive(texts: list[str]) -> str:
        # Off the event loop: the offline merge tries each original first (tenths of a second
        # for a cluster of 50), and the loop meanwhile answers RPCs.
        return await asyncio.to_thread(extractive_merge, texts, MAX_MERGE_CHARS)

    async def consolidate_scope(self, tenant: str, scope: Scope, *, dry_run: bool = False, job_id: str = "",
                                **overrides: Any) -> ConsolidationReport:
        """Consolidate the facts of the exact `scope` (what the lifecycle scheduler calls per
        scope). `overrides` replace settings fields for this call; `dry_run` writes nothing and
        reports the merges that would be made."""
        scope.validate()
        settings = replace(self.settings, **overrides).validate() if overrides else self.settings
        started = time.perf_counter()
        engine = self._engine
        await engine.open()
        key = scope_key(scope)
        report = ConsolidationReport(dry_run=dry_run)
        self.runs += 1
        count, movable = await engine._store.run(
            tenant, lambda tx: (tx.ltm_typed_count(key, "fact"), tx.ltm_typed_count(key, "fact", unpinned=True)),
            write=False, small=True)
        report.facts_before = report.facts_after = count
        if movable <= settings.threshold:
            # Without pins, the reason an earlier release gave (callers may match it).
            held = f"{movable} unpinned facts ({count - movable} pinned are left alone)" if count > movable \
                else f"{count} facts"
            report.reason = f"the scope holds {held}, not more than the threshold {settings.threshold}"
            report.duration_s = time.perf_counter() - started
            return report
        report.ran = True
        # Only unpinned facts: pinned ones are neither merged nor trimmed (nor re-embedded here).
        facts: list[LongTermRow] = await engine._store.run(
            tenant, lambda tx: tx.ltm_typed_rows(key, "fact", movable + 1000, unpinned=True), write=False)
        detail = {"job": "consolidation", "job_id": job_id}
        if settings.use_embeddings:
            # Similarities and the fidelity check compare vectors of one model: facts embedded by
            # another (an older default) are embedded again first; a dry run keeps them in memory.
            model = engine.embedding_model
            stale = [f for f in facts if f.embedding is None or f.embedding_model != model]
            if stale and dry_run:
                for fact, vector in zip(stale, await engine.embed([f.text for f in stale]), strict=True):
                    fact.embedding, fact.embedding_model = np.asarray(vector, dtype=np.float32).tobytes(), model
            elif stale:
                facts = await engine._embedded(tenant, facts)
        if not settings.use_embeddings or any(f.embedding is None for f in facts):
            await self._trim(tenant, scope, facts, settings, report, detail)
        else:
            await self._merge_clusters(tenant, scope, facts, settings, report, detail)
        report.facts_after = report.facts_before if dry_run else await engine._store.run(
            tenant, lambda tx: tx.ltm_typed_count(key, "fact"), write=False, small=True)
        report.duration_s = time.perf_counter() - started
        self.merged += report.merged
        if not dry_run:
            for observe in self.observers:
                observe("consolidation", report.merged, report.duration_s)
        log.info("consolidated", extra={"fields": {
            "before": report.facts_before, "after": report.facts_after, "merged": report.merged,
            "failed_fidelity": report.failed_fidelity, "dry_run": dry_run, "seconds": round(report.duration_s, 3)}})
        return report

    async def _trim(self, tenant: str, scope: Scope, facts: list[LongTermRow], settings: ConsolidationSettings,
                    report: ConsolidationReport, detail: dict[str, Any]) -> None:
        # `facts` are the unpinned ones (pinned facts are kept whatever their number).
        ranked = sorted(facts, key=lambda f: (-f.importance, -f.created, f.memory_id))
        drop = [f.memory_id for f in ranked[settings.threshold:] if not f.pinned]
        report.trimmed = len(drop)
        if report.dry_run or not drop:
            return
        for start in range(0, len(drop), 500):
            await self._engine.replace(tenant, scope, [], drop[start:start + 500], event="CONSOLIDATE_TRIM",
                                       detail={**detail, "kept": settings.threshold})

    async def _merge_clusters(self, tenant: str, scope: Scope, facts: list[LongTermRow], settings: ConsolidationSettings,
                              report: ConsolidationReport, detail: dict[str, Any]) -> None:
        engine = self._engine
        vectors = await engine.comparable(np.stack([np.frombuffer(f.embedding or b"", dtype=np.float32) for f in facts]))
        # Quadratic in a scope of near-identical facts (seconds to minutes): off the event loop,
        # which meanwhile answers RPCs and renews the job leases.
        groups = await asyncio.to_thread(clusters, vectors, settings.similarity, settings.max_cluster_size,
                                         settings.min_cluster_size)
        reported = 0
        # Once the LLM has failed (timed out, unreachable, after its retries), the rest of the
        # run merges offline: waiting out the failure once per cluster took hours on a large scope.
        llm_down = False
        for group in groups:
            if len(group) < 2:
                continue
            report.clusters += 1
            if len(group) < settings.min_cluster_size:
                report.skipped_small += 1
                continue
            if len(group) > settings.max_cluster_size:
                report.skipped_large += 1
                continue
            members = sorted((facts[i] for i in group), key=lambda f: (-f.importance, f.created, f.memory_id))
            texts = [f.text for f in members]
            text, method, failed = await self._merge_text(texts, not llm_down)
            llm_down = llm_down or failed
            if not text.strip():
                report.failed_fidelity += 1
                continue
            merged_vector = np.asarray((await engine.embed([text]))[0], dtype=np.float32)
            check = fidelity.check(text, (await engine.comparable(merged_vector[None, :]))[0], texts,
                                   np.stack([vectors[i] for i in group]), settings.fidelity_threshold)
            merge = Merge([f.memory_id for f in members], text, method, check)
            size = len(text) + sum(len(i) + 8 for i in merge.original_ids) + sum(len(k) for k in check.lost_keywords)
            if len(report.merges) < MAX_REPORTED and reported + size <= MAX_REPORTED_CHARS:
                report.merges.append(merge)
                reported += size
            if not check.passed:
                report.failed_fidelity += 1
                log.info("merge failed its fidelity check; originals kept",
                         extra={"fields": {"composite": round(check.composite_score, 3), "lost": check.lost_keywords[:10]}})
                continue
            if report.dry_run:
                report.merged += 1
                report.originals_retired += len(members)
                continue
            now = self._clock()
            domains = Counter(f.domain for f in members if f.domain)
            row = LongTermRow(
                memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                metadata={**check.metadata(), "merge_method": method, "offline": method == EXTRACTIVE,
                          "merged_facts": len(members)},
                memory_type="fact", domain=domains.most_common(1)[0][0] if domains else "",
                importance=max(f.importance for f in members), importance_method="consolidation",
                created=now, updated=now, last_accessed=max(f.last_accessed for f in members),
                access_count=sum(f.access_count for f in members), content_hash=content_hash(text),
                source={"memory_ids": merge.original_ids}, embedding_model=engine.embedding_model,
                embedding=merged_vector.tobytes(),
            )
            # An original updated while the merge was written is not what it says: left as it is.
            stored = await engine.replace(tenant, scope, [row], merge.original_ids, event="CONSOLIDATE", detail=detail,
                                          read_as={f.memory_id: f.content_hash for f in members})
            if stored is None:
                continue
            merge.memory_id, merge.applied = row.memory_id, True
            report.merged += 1
            report.originals_retired += len(members)
