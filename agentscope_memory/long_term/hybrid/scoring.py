"""The background scoring of a recorded round: importance, domain and, when it matters, a fact.

`HybridEngine.record` queues one job per round in the transaction that stores the round, so the
job exists exactly when the round does, and a server killed mid-job leaves it to the next runner
(`agentscope_memory/jobs`). The job is idempotent: the assessment overwrites the same fields,
a fact is stored once per scope by its text's hash, and a round whose facts are stored is not
extracted again.

With an LLM, a round that reaches the fact threshold has its facts extracted by mem0
(`extraction.py`: mem0's prompt, shown the scope's most similar memories; several facts or none);
otherwise, or when mem0's reply is unusable, the scorer's one fact is stored.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from agentscope_memory.jobs import Job
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.long_term.hybrid.extraction import EXISTING_SHOWN, ExtractedFact
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store.base import LongTermRow

if TYPE_CHECKING:
    from agentscope_memory.long_term.hybrid.engine import HybridEngine


def round_importances(rows: Sequence[LongTermRow], score: float) -> dict[str, float]:
    """The round's importance belongs to what the user said: both scorers judge what the user
    disclosed (as mem0's fact extraction reads the user's messages), so the user's messages get
    the round's score and the assistant's replies 0, unless the round has no user message.
    Otherwise an acknowledgement ("Got it, I'll keep that in mind.") closing an important round
    would carry that round's importance into every search that reaches it semantically."""
    users = {r.memory_id for r in rows if r.source.get("role", "user") == "user"}
    if not users:
        return {r.memory_id: score for r in rows}
    return {r.memory_id: (score if r.memory_id in users else 0.0) for r in rows}


# A round's facts are stored at most this many (mem0's extraction sets no bound of its own).
MAX_FACTS_PER_ROUND = 50
_FACT_IDS = uuid.UUID("6f0c7a52-3d1e-4b8e-9a57-2f43c1d0e8b4")


def fact_id(job_id: str, index: int) -> str:
    """The id of the `index`-th fact a scoring job stores: the same on every run of the job,
    so a rerun can tell that an earlier run stored the round's facts."""
    return str(uuid.uuid5(_FACT_IDS, f"{job_id}/{index}"))


class RoundScorer:
    def __init__(self, engine: HybridEngine) -> None:
        self._engine = engine

    async def run(self, job: Job) -> None:
        engine = self._engine
        # A run that died after storing the round's facts (their insert is one transaction, after
        # the assessment) leaves the job to be run again: asked again, a model words the facts
        # differently, and their hashes would not catch the repetition.
        if job.attempts > 1 and await engine.rows(job.tenant, [fact_id(job.job_id, i)
                                                              for i in range(MAX_FACTS_PER_ROUND)]):
            return
        memory_ids = [str(m) for m in job.payload.get("memory_ids", [])]
        rows = [r for r in await engine.rows(job.tenant, memory_ids) if not r.deleted]
        if not rows:
            return
        rows.sort(key=lambda r: memory_ids.index(r.memory_id))
        texts = [f"{r.source.get('role', 'user')}: {r.text}" for r in rows]
        assessment = await engine.scorer.assess(texts)
        await engine.apply_assessment(job.tenant, round_importances(rows, assessment.importance_score),
                                      assessment.domain, assessment.method)
        if assessment.importance_score < engine.settings.fact_threshold:
            return
        first = rows[0]
        scope = Scope(first.agent_name, first.user_id, first.run_name)
        round_ids = [r.memory_id for r in rows]
        facts: list[tuple[str, dict[str, Any]]] = []
        fact = assessment.extracted_fact.strip()
        if fact:
            facts = [(fact, {"extracted_by": "scorer"})]
        if engine.extractor is not None:
            extracted = await self._extract(job.tenant, scope, rows, texts, round_ids)
            if extracted is None:
                return  # this round's facts are already stored (a rerun)
            if extracted is not False:
                facts = [(f.text, {"extracted_by": "mem0", "attributed_to": f.attributed_to,
                                   "linked_memory_ids": list(f.linked_memory_ids)}) for f in extracted]
        now = time.time()
        new_rows = [
            LongTermRow(
                memory_id=fact_id(job.job_id, i), scope_key=scope_key(scope), agent_name=scope.agent_name,
                user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                metadata={"importance_method": assessment.method, **extra}, memory_type="fact",
                domain=assessment.domain, importance=assessment.importance_score, importance_method=assessment.method,
                created=now, updated=now, last_accessed=now, content_hash=content_hash(text),
                source={"memory_ids": round_ids},
            )
            for i, (text, extra) in enumerate(facts[:MAX_FACTS_PER_ROUND])
        ]
        if new_rows:
            await engine.insert(job.tenant, scope, new_rows, history_detail={"extracted_from": round_ids})

    async def _extract(self, tenant: str, scope: Scope, rows: list[LongTermRow], texts: list[str],
                       round_ids: list[str]) -> list[ExtractedFact] | None | Literal[False]:
        """mem0's facts for the round ([] when it finds none); None when facts of this round are
        already stored; False when mem0's reply was unusable (the scorer's fact stands)."""
        engine = self._engine
        assert engine.extractor is not None
        options = engine.rank_defaults.with_overrides(top_k=EXISTING_SHOWN, ranking="dense")
        similar, _ = await engine.search_ranked(tenant, scope, "\n".join(r.text for r in rows), options, touch=False)
        existing = []
        for item in similar:
            if item.memory_type == "fact" and sorted(item.source.get("memory_ids", [])) == sorted(round_ids):
                return None
            if item.id not in round_ids:
                existing.append((item.id, item.text))
        extracted = await engine.extractor.extract(texts, existing, agent_scoped=bool(scope.agent_name and not scope.user_id))
        return False if extracted is None else extracted
