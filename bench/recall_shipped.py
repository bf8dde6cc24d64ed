"""The shipped ranking on the labelled recall set: the server's own engine (`HybridEngine`, from
the long-term engine work) over a real sqlite store, used by bench/recall_bench.py.

Each conversation is one scope. Its messages are recorded session by session with the engine's
clock at the session's start, and each round (a user message and the assistant's reply) is
scored as the background job would (the offline heuristic scorer; its facts repeat the message text, so
they add nothing here). Each query is asked with the clock at the query's `asked_at`.
The benchmark does not let one query's recall touch memories for the next (the engine's touch
is switched off here), so the result does not depend on query order. A memory or query with a
`scope` key is stored or asked in that scope instead of its conversation's (the bilingual
entries put two conversations in one scope).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

Ranking = dict[str, list[str]]
TENANT = "recall-bench"


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


async def _rank(memories: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]], embedder: Any,
                store_kind: str, top_k: int, postgres_dsn: str | None, rankings: Sequence[str]) -> dict[str, Ranking]:
    from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
    from agentscope_memory.long_term.hybrid.scoring import round_importances

    from agentscope_memory.long_term import Scope
    from agentscope_memory.long_term.importance import HeuristicScorer
    from agentscope_memory.long_term.router import HeuristicRouter
    from agentscope_memory.message import Msg, MsgRole
    from agentscope_memory.store import open_store

    clock = _Clock()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(store_kind, Path(tmp), postgres_dsn=postgres_dsn)
        engine = HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                              settings=EngineSettings(scoring=False), in_database=store_kind == "postgres", clock=clock)
        setattr(engine, "_touch_later", lambda *args, **kwargs: None)  # noqa: B010  (see the module doc)
        try:
            await engine.open()
            ours: dict[str, str] = {}  # engine memory id -> labelled memory id
            by_conv: dict[str, list[dict[str, Any]]] = {}
            for m in memories:
                by_conv.setdefault(m["conversation"], []).append(m)
            for conv, mems in by_conv.items():
                scope = Scope(user_id=mems[0].get("scope", conv))
                sessions: dict[int, list[dict[str, Any]]] = {}
                for m in mems:
                    sessions.setdefault(m["session"], []).append(m)
                for session in sessions.values():
                    # One record call per session: one embedding batch, and the lexical context
                    # (the messages before) stays within the session, as a live agent records it.
                    clock.now = _ts(session[0]["at"])
                    msgs = [Msg.create(MsgRole.USER if m["role"] == "user" else MsgRole.ASSISTANT, m["text"])
                            for m in session]
                    stored = {item.text: item.id for item in await engine.record(TENANT, scope, msgs)}
                    for m in session:  # repeated texts are stored once per scope
                        if m["text"] in stored and stored[m["text"]] not in ours:
                            ours[stored[m["text"]]] = m["id"]
                    for i in range(0, len(session), 2):  # score each round as the background job does
                        round_ = session[i : i + 2]
                        ids = [stored[m["text"]] for m in round_ if ours.get(stored.get(m["text"], "")) == m["id"]]
                        if ids:
                            verdict = await engine.scorer.assess([f"{m['role']}: {m['text']}" for m in round_])
                            await engine.apply_assessment(TENANT, round_importances(await engine.rows(TENANT, ids),
                                                                                    verdict.importance_score),
                                                          verdict.domain, verdict.method)
            out: dict[str, Ranking] = {}
            for name in rankings:
                ranking: Ranking = {}
                out[name] = ranking
                options = engine.rank_defaults.with_overrides(top_k=top_k, ranking=name)
                for q in queries:
                    clock.now = _ts(q["asked_at"])
                    found, _ = await engine.search_ranked(TENANT, Scope(user_id=q.get("scope", q["conversation"])), q["text"], options)
                    ranking[q["id"]] = [ours.get(item.id, item.id) for item in found]
            return out
        finally:
            await engine.close()
            await store.close()


def rank(memories: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]], embedder: Any = None,
         store_kind: str = "sqlite", top_k: int = 10, postgres_dsn: str | None = None) -> Ranking:
    """Query id -> labelled memory ids as the engine ranks them, best first (at most top_k)."""
    return rank_all(memories, queries, ("shipped",), embedder, store_kind, top_k, postgres_dsn)["shipped"]


def rank_all(memories: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]], rankings: Sequence[str],
             embedder: Any = None, store_kind: str = "sqlite", top_k: int = 10,
             postgres_dsn: str | None = None) -> dict[str, Ranking]:
    """As `rank`, for each of the engine's `rankings` (e.g. shipped, seed) over one recording."""
    if embedder is None:
        from agentscope_memory.long_term.embedders import load_embedder

        from agentscope_memory.service import ServiceSettings

        embedder = load_embedder(ServiceSettings().long_term_embedder)  # type: ignore[arg-type]
    return asyncio.run(_rank(memories, queries, embedder, store_kind, top_k, postgres_dsn, rankings))
