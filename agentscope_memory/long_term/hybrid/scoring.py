"""The background scoring of a recorded round: importance, domain and, when it matters, a fact.

`HybridEngine.record` queues one job per round in the transaction that stores the round, so the
job exists exactly when the round does, and a server killed mid-job leaves it to the next runner
(`agentscope_memory/jobs`). The job is idempotent: the assessment overwrites the same fields,
and the fact is stored once per scope by its text's hash.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from agentscope_memory.jobs import Job
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store.base import LongTermRow

if TYPE_CHECKING:
    from agentscope_memory.long_term.hybrid.engine import HybridEngine


class RoundScorer:
    def __init__(self, engine: HybridEngine) -> None:
        self._engine = engine

    async def run(self, job: Job) -> None:
        engine = self._engine
        memory_ids = [str(m) for m in job.payload.get("memory_ids", [])]
        rows = [r for r in await engine.rows(job.tenant, memory_ids) if not r.deleted]
        if not rows:
            return
        rows.sort(key=lambda r: memory_ids.index(r.memory_id))
        texts = [f"{r.source.get('role', 'user')}: {r.text}" for r in rows]
        assessment = await engine.scorer.assess(texts)
        await engine.apply_assessment(job.tenant, [r.memory_id for r in rows], assessment.importance_score,
                                      assessment.domain, assessment.method)
        fact = assessment.extracted_fact.strip()
        if not fact or assessment.importance_score < engine.settings.fact_threshold:
            return
        first = rows[0]
        now = time.time()
        scope = Scope(first.agent_name, first.user_id, first.run_name)
        row = LongTermRow(
            memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
            user_id=scope.user_id, run_name=scope.run_name, text=fact, lex_terms=" ".join(tokenize(fact)),
            metadata={"importance_method": assessment.method}, memory_type="fact", domain=assessment.domain,
            importance=assessment.importance_score, importance_method=assessment.method, created=now, updated=now,
            last_accessed=now, content_hash=content_hash(fact), source={"memory_ids": [r.memory_id for r in rows]},
        )
        await engine.insert(job.tenant, scope, [row], history_detail={"extracted_from": row.source["memory_ids"]})
