"""Reflection: when enough important facts gathered in a scope, write one higher-level memory.

After new facts are stored in an exact scope the engine queues a check (a durable job, so a
server killed mid-check leaves it to the next runner). The check reflects when the importance of
the scope's unreflected facts adds up to `importance_threshold` (default 4.0), there are at least
`min_facts` (2) of them, and the newest reflection is at least `cooldown_s` (1 hour) old. The
reflection (memory_type `reflection`, importance 0.9) is written in the same transaction that
takes the facts out of the dense and lexical index (soft delete, history event `REFLECT`): they
stay stored, linked both ways (`source.memory_ids` on the reflection, `retired_into` on each
fact), so recall is not redundant and nothing is lost. Pinned facts are left out (they stay in
recall as they are; `engine.replace` refuses to retire one pinned meanwhile). A rerun after a crash finds either
nothing done or everything done. Since the facts leave recall for it, the reflection must say
them: the LLM's passes the consolidation's fidelity check or the offline one (the facts' texts
whole) stands instead, and a fact updated while it was written keeps it from being written.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.jobs import Job
from agentscope_memory.lifecycle import fidelity
from agentscope_memory.lifecycle.summaries import LLM_ERRORS, EXTRACTIVE, LLM, REFLECTION_PROMPT, ask, log
from agentscope_memory.long_term.engine import LongTermItem, Scope
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store.base import LongTermRow

if TYPE_CHECKING:
    from agentscope_memory.llm import ChatClient
    from agentscope_memory.long_term.hybrid.engine import HybridEngine

REFLECT_JOB = "lifecycle.reflect"
REFLECTION_TYPE = "reflection"
MAX_REFLECTION_CHARS = 8000


@dataclass(frozen=True)
class ReflectionSettings:
    importance_threshold: float = 4.0
    min_facts: int = 2
    cooldown_s: float = 3600.0
    # The reflection's own importance.
    importance: float = 0.9
    # At most this many facts go into one reflection (the newest); the rest wait for the next.
    max_facts: int = 50
    # Check in the background after facts are written.
    background: bool = True
    # The fidelity composite (`fidelity.py`) an LLM's reflection needs to replace its facts.
    fidelity_threshold: float = fidelity.DEFAULT_THRESHOLD

    def validate(self) -> ReflectionSettings:
        if not (math.isfinite(self.importance_threshold) and self.importance_threshold >= 0):
            raise InvalidArgumentError("importance_threshold", f"must be a finite number >= 0, not {self.importance_threshold}")
        if not 1 <= self.min_facts <= self.max_facts:
            raise InvalidArgumentError("min_facts", f"must be between 1 and {self.max_facts}, not {self.min_facts}")
        if not (math.isfinite(self.cooldown_s) and self.cooldown_s >= 0):
            raise InvalidArgumentError("cooldown_seconds", f"must be a finite number >= 0, not {self.cooldown_s}")
        if not (math.isfinite(self.fidelity_threshold) and 0.0 <= self.fidelity_threshold <= 1.0):
            raise InvalidArgumentError("fidelity_threshold", f"must be between 0 and 1, not {self.fidelity_threshold}")
        return self


_CLOSERS = tuple(".!?。！？;；")


def extractive_reflection(facts: list[LongTermRow], max_chars: int) -> tuple[str, list[LongTermRow]]:
    """The offline reflection: the facts' texts whole, most important first, as many
    as fit in `max_chars`. Returns it and the facts it stands for, the only ones that leave
    recall: a fact whose words it holds already (a repetition) is among them, a fact that does
    not fit is not and waits for the next reflection. No fact is cut or dropped as "nearly said":
    distinct facts share most character bigrams, so any novelty measure hides some of them."""
    text = ""
    covered: list[LongTermRow] = []
    for fact in sorted(facts, key=lambda f: (-f.importance, f.created, f.memory_id)):
        line = " ".join(fact.text.split())
        # Said already, as whole words ("Room 12" is not said by "Room 123").
        if re.search(rf"(?<!\w){re.escape(line.casefold())}(?!\w)", text.casefold()):
            covered.append(fact)
            continue
        # A fact without closing punctuation must not run into the next one.
        joined = f"{text}{' ' if text.endswith(_CLOSERS) else '; '}{line}" if text else line
        if len(joined) > max_chars:
            continue
        text = joined
        covered.append(fact)
    return text, covered


@dataclass
class ReflectionResult:
    reflected: bool
    # Why not, when not reflected ("cooldown", "too few facts", "importance below threshold").
    reason: str = ""
    reflection: LongTermItem | None = None
    fact_ids: list[str] = field(default_factory=list)
    importance_sum: float = 0.0
    pending_facts: int = 0
    method: str = ""
    duration_s: float = 0.0


class Reflector:
    def __init__(self, engine: HybridEngine, llm: ChatClient | None = None,
                 settings: ReflectionSettings | None = None, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self._llm = llm
        self.settings = (settings or ReflectionSettings()).validate()
        self._clock = clock
        # Totals since start, for metrics.
        self.runs = 0
        self.reflected = 0
        # Called after every check as (job name, memories reflected, seconds): metrics.
        self.observers: list[Callable[[str, int, float], None]] = []

    def attach(self, jobs: Any) -> None:
        """Check in the background (a durable job) whenever a scope gets new facts."""
        jobs.register(REFLECT_JOB, self._run_job)
        if self.settings.background:
            self._engine.fact_jobs.append(REFLECT_JOB)

    async def _run_job(self, job: Job) -> None:
        agent, user, run = (str(x) for x in job.payload["scope"])
        await self.reflect(job.tenant, Scope(agent, user, run), job_id=job.job_id)

    async def reflect(self, tenant: str, scope: Scope, *, importance_threshold: float | None = None,
                      min_facts: int | None = None, cooldown_s: float | None = None, job_id: str = "") -> ReflectionResult:
        """Reflect over the exact `scope` now if its facts call for it (overrides replace the
        settings for this call)."""
        scope.validate()
        started = time.perf_counter()
        overrides: dict[str, Any] = {}
        if importance_threshold is not None:
            overrides["importance_threshold"] = importance_threshold
        if min_facts is not None:
            overrides["min_facts"] = min_facts
        if cooldown_s is not None:
            overrides["cooldown_s"] = cooldown_s
        settings = replace(self.settings, **overrides).validate()
        engine = self._engine
        await engine.open()
        key = scope_key(scope)
        store = engine._store

        def read(tx: Any) -> tuple[list[LongTermRow], list[LongTermRow]]:
            # A pinned fact stays in recall as it is: a reflection never takes it out.
            return (tx.ltm_typed_rows(key, "fact", settings.max_facts, True, unpinned=True),
                    tx.ltm_typed_rows(key, REFLECTION_TYPE, 1, True))

        facts, last = await store.run(tenant, read, write=False)
        now = self._clock()
        result = ReflectionResult(False, pending_facts=len(facts),
                                  importance_sum=float(sum(f.importance for f in facts)))
        self.runs += 1
        if last and now - last[0].created < settings.cooldown_s:
            result.reason = "cooldown"
        elif len(facts) < settings.min_facts:
            result.reason = "too few facts"
        elif result.importance_sum < settings.importance_threshold:
            result.reason = "importance below threshold"
        if result.reason:
            return self._done(result, started)
        facts.sort(key=lambda f: (f.created, f.memory_id))
        method, text, vector, check = EXTRACTIVE, "", None, None
        if self._llm is not None:
            text, vector, check = await self._ask_llm(facts, settings)
            method = LLM
        if not text:
            method = EXTRACTIVE
            text, facts = extractive_reflection(facts, MAX_REFLECTION_CHARS)
            if not facts:
                result.reason = "every fact is too long for one reflection"
                return self._done(result, started)
            vector = np.asarray((await engine.embed([text]))[0], dtype=np.float32)
        assert vector is not None
        fact_ids = [f.memory_id for f in facts]
        domains = [f.domain for f in facts if f.domain]
        row = LongTermRow(
            memory_id=str(uuid.uuid4()), scope_key=key, agent_name=scope.agent_name, user_id=scope.user_id,
            run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
            metadata={"summary_method": method, "offline": method == EXTRACTIVE, "reflected_facts": len(facts),
                      "importance_sum": round(result.importance_sum, 6), **(check.metadata() if check else {})},
            memory_type=REFLECTION_TYPE, domain=max(set(domains), key=domains.count) if domains else "",
            importance=settings.importance, importance_method="reflection", created=now, updated=now,
            last_accessed=now, content_hash=content_hash(text), source={"memory_ids": fact_ids},
            embedding_model=engine.embedding_model, embedding=vector.tobytes(),
        )
        detail = {"job": "reflection", "job_id": job_id, "method": method}
        # A fact updated while the reflection was written is not what it says: the next check.
        stored = await engine.replace(tenant, scope, [row], fact_ids, event="REFLECT", detail=detail,
                                      read_as={f.memory_id: f.content_hash for f in facts})
        if stored is None:
            result.reason = "the facts changed meanwhile; the next check decides again"
            return self._done(result, started)
        from agentscope_memory.long_term.hybrid.engine import item_of

        self.reflected += 1
        result.reflected, result.reflection, result.fact_ids, result.method = True, item_of(stored[0]), fact_ids, method
        self._done(result, started)
        log.info("reflected", extra={"fields": {"facts": len(fact_ids), "method": method,
                                                "seconds": round(result.duration_s, 3)}})
        return result

    async def _ask_llm(self, facts: list[LongTermRow], settings: ReflectionSettings
                       ) -> tuple[str, np.ndarray | None, fidelity.Fidelity | None]:
        """The LLM's reflection over `facts`, its embedding and fidelity; ("", None, None) when
        the offline one must stand instead. The facts leave recall for what it says, so it must
        pass the consolidation's fidelity check: an answer that is garbage, a refusal, or in
        another language than the facts (their keywords lost) would hide them behind nothing."""
        assert self._llm is not None
        texts = [f.text for f in facts]
        try:
            text = await ask(self._llm, REFLECTION_PROMPT, texts)
        except LLM_ERRORS:  # the offline summary still reflects
            log.warning("reflection by the LLM failed; using the extractive summary", exc_info=True)
            return "", None, None
        if not text or len(text) > MAX_REFLECTION_CHARS:  # nothing but framing, or not a summary
            log.warning("the LLM's reflection has %d characters; using the extractive summary", len(text))
            return "", None, None
        engine = self._engine
        vectors = np.asarray(await engine.embed([text, *texts]), dtype=np.float32)
        compared = await engine.comparable(vectors)
        check = fidelity.check(text, compared[0], texts, compared[1:], settings.fidelity_threshold)
        if not check.passed:
            log.warning("the LLM's reflection failed its fidelity check; using the extractive summary",
                        extra={"fields": {"composite": round(check.composite_score, 3), "lost": check.lost_keywords[:10]}})
            return "", None, None
        return text, vectors[0], check

    def _done(self, result: ReflectionResult, started: float) -> ReflectionResult:
        result.duration_s = time.perf_counter() - started
        for observe in self.observers:
            observe("reflection", 1 if result.reflected else 0, result.duration_s)
        return result
