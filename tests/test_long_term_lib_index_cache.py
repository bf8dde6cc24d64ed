"""The in-memory scope indexes: coherent across two replicas on one PostgreSQL (a replica's
cached index follows the other's inserts, edits and deletes at once, reading only the rows
changed), within a budget of rows (least recently searched scopes dropped; a scope over the
budget searched in PostgreSQL, or indexed per search on sqlite), compacted after deletes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine, RankOptions
from agentscope_memory.long_term.hybrid.memory_index import ScopeIndex
from agentscope_memory.long_term.hybrid.records import scope_key
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermFilter, LongTermRow

FACTS = [
    "I play the oboe in a community orchestra",
    "My sister lives in Lisbon and works as a nurse",
    "I am allergic to peanuts",
    "我每天早上喝一杯绿茶",
    "The project deadline moved to next Friday",
    "I switched from tea to coffee last month",
    "My cat is called Miso",
    "我们下周去上海出差",
]
QUERIES = {
    "which instrument do I play": "I play the oboe in a community orchestra",
    "where does my sister live": "My sister lives in Lisbon and works as a nurse",
    "what food allergy do I have": "I am allergic to peanuts",
    "我早上喝什么": "我每天早上喝一杯绿茶",
    "what is my cat's name": "My cat is called Miso",
}


def user(text: str) -> Msg:
    return Msg.create(MsgRole.USER, text)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def _engine(store: Any, embedder: MiniLMEmbedder, kind: str, **settings: Any) -> HybridEngine:
    return HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                        settings=EngineSettings(scoring=False, **settings), in_database=kind == "postgres")


async def _top(engine: HybridEngine, scope: Scope, query: str, **where: Any) -> list[str]:
    options = RankOptions().with_overrides(top_k=3, where=LongTermFilter(**where)) if where else None
    items, _ = await engine.search_ranked("t", scope, query, options)
    return [i.text for i in items]


async def test_a_cached_index_follows_the_other_replica_at_once(postgres_dsn, embedder) -> None:
    stores = [open_store("postgres", Path("."), postgres_dsn=postgres_dsn) for _ in range(2)]
    a, b = (_engine(store, embedder, "postgres") for store in stores)
    scope = Scope(user_id="同一个用户")
    try:
        await a.record("t", scope, [user(f) for f in FACTS])
        assert (await _top(b, scope, "which instrument do I play"))[0] == FACTS[0]
        index = b._cache.get(("t", scope_key(scope)))
        assert index is not None and len(index) == len(FACTS)
        start = index.generation

        # A inserts: B's next search finds it, from the same index object, updated in place.
        [new] = await a.record("t", scope, [user("My favourite board game is Go")])
        assert (await _top(b, scope, "which board game do I like"))[0] == new.text
        assert b._cache.get(("t", scope_key(scope))) is index and len(index) == len(FACTS) + 1
        assert index.generation > start

        # A edits the text: B finds the new text, never the old one.
        await a.update("t", new.id, text="My favourite board game is chess")
        texts = await _top(b, scope, "which board game do I like")
        assert texts[0] == "My favourite board game is chess" and "My favourite board game is Go" not in texts

        # A changes metadata: B's metadata filter sees it.
        assert await _top(b, scope, "board game", metadata={"topic": "games"}) == []
        await a.update("t", new.id, metadata={"topic": "games"})
        assert await _top(b, scope, "board game", metadata={"topic": "games"}) == ["My favourite board game is chess"]

        # A deletes: gone from B's results at once.
        await a.delete("t", new.id)
        assert "My favourite board game is chess" not in await _top(b, scope, "which board game do I like")
        assert len(index) == len(FACTS)

        # B's own write read back through the generations does not grow its index.
        slots = index.slots
        await b.record("t", scope, [user("I run five kilometres every Sunday")])
        assert (await _top(b, scope, "how far do I run"))[0] == "I run five kilometres every Sunday"
        assert index.slots == slots + 1
        assert (await _top(b, scope, "how far do I run"))[0] == "I run five kilometres every Sunday"
        assert index.slots == slots + 1
    finally:
        for engine in (a, b):
            await engine.close()
        for store in stores:
            await store.close()


async def test_a_scope_over_the_budget_is_searched_in_postgres(postgres_dsn, embedder) -> None:
    store = open_store("postgres", Path("."), postgres_dsn=postgres_dsn)
    small = _engine(store, embedder, "postgres", index_max_vectors=len(FACTS) - 1)
    large = _engine(store, embedder, "postgres")
    scope = Scope(user_id="u")
    try:
        await large.record("t", scope, [user(f) for f in FACTS])
        for query, expected in QUERIES.items():
            assert (await _top(small, scope, query))[0] == expected, query
            assert (await _top(large, scope, query))[0] == expected, query
        assert len(small._cache) == 0 and len(large._cache) == 1
        # Filters apply in the database too.
        assert await _top(small, scope, "oboe", memory_types=("fact",)) == []
    finally:
        for engine in (small, large):
            await engine.close()
        await store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_least_recently_searched_scopes_are_dropped(kind, tmp_path, request, embedder) -> None:
    dsn = request.getfixturevalue("postgres_dsn") if kind == "postgres" else None
    store = open_store(kind, tmp_path, postgres_dsn=dsn)
    engine = _engine(store, embedder, kind, index_max_vectors=12)
    first, second = Scope(user_id="first"), Scope(user_id="second")
    try:
        await engine.record("t", first, [user(f) for f in FACTS])
        await engine.record("t", second, [user(f"{f} (second)") for f in FACTS])
        assert (await _top(engine, first, "which instrument do I play"))[0] == FACTS[0]
        assert ("t", scope_key(first)) in engine._cache
        assert (await _top(engine, second, "which instrument do I play"))[0] == FACTS[0] + " (second)"
        assert ("t", scope_key(second)) in engine._cache and ("t", scope_key(first)) not in engine._cache
        assert engine._cache.evictions == 1
        # The dropped scope is loaded again by its next search, and answers the same.
        assert (await _top(engine, first, "which instrument do I play"))[0] == FACTS[0]
        assert ("t", scope_key(first)) in engine._cache and ("t", scope_key(second)) not in engine._cache
    finally:
        await engine.close()
        await store.close()


async def test_sqlite_indexes_a_scope_over_the_budget_per_search(tmp_path, embedder) -> None:
    store = open_store("sqlite", tmp_path)
    engine = _engine(store, embedder, "sqlite", index_max_vectors=3)
    scope = Scope(user_id="u")
    try:
        await engine.record("t", scope, [user(f) for f in FACTS])
        for query, expected in QUERIES.items():
            assert (await _top(engine, scope, query))[0] == expected, query
        assert len(engine._cache) == 0
    finally:
        await engine.close()
        await store.close()


def _row(i: int, vector: np.ndarray, terms: str) -> LongTermRow:
    now = time.time()
    return LongTermRow(memory_id=f"m{i}", scope_key="k", agent_name="", user_id="u", run_name="", text=terms,
                       lex_terms=terms, created=now, updated=now, last_accessed=now, content_hash=f"h{i}",
                       embedding=vector.astype(np.float32).tobytes(), embedding_model="test")


def test_deleted_rows_are_compacted_away_and_results_stay_right() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(900, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ScopeIndex(16)
    index.add([_row(i, vectors[i], f"word{i % 7} unique{i}") for i in range(900)])
    for i in range(0, 900, 3):
        index.remove(f"m{i}")
    for i in range(1, 900, 3):
        index.remove(f"m{i}")
    # Deleted rows outnumbered the live ones: the arrays were compacted.
    assert len(index) == 300 and index.slots < 600
    survivors = [i for i in range(900) if i % 3 == 2]
    for i in survivors[:20]:
        dense = index.dense(vectors[i], 1, LongTermFilter())
        assert dense[0][0] == f"m{i}"
        lexical = index.lexical([f"unique{i}"], 5, LongTermFilter())
        assert [m for m, _ in lexical] == [f"m{i}"]
    assert {m for m, _ in index.lexical(["word3"], 1000, LongTermFilter())} == {
        f"m{i}" for i in survivors if i % 7 == 3}


async def test_postgres_takes_an_embedder_of_other_dimensions(postgres_dsn, embedder) -> None:
    """A database written with MiniLM (384 dimensions) opened with a 64-dimension embedder: the
    vector column takes the new size, and each scope's rows are embedded again when searched."""
    from scripted_llm import ScriptedLLM

    from agentscope_memory.long_term.hybrid.embedders import OpenAiEmbedder

    scope = Scope(user_id="u")
    store = open_store("postgres", Path("."), postgres_dsn=postgres_dsn)
    try:
        before = _engine(store, embedder, "postgres")
        await before.record("t", scope, [user(f) for f in FACTS])
        await before.close()
        with ScriptedLLM() as llm:
            other = OpenAiEmbedder(llm.base_url, "small", None, dimensions=llm.dims)
            after = HybridEngine(store, lambda: other, scorer=HeuristicScorer(), router=HeuristicRouter(),
                                 settings=EngineSettings(scoring=False), in_database=True)
            assert (await _top(after, scope, "oboe orchestra"))[0] == FACTS[0]
            rows = await after.rows("t", [i.id for i in await after.list("t", scope)])
            assert {r.embedding_model for r in rows} == {"openai:small"}
            assert {len(r.embedding or b"") for r in rows} == {4 * llm.dims}
            # New records take the new size too, and a scope over the budget is searched by pgvector.
            await after.record("t", scope, [user("The orchestra rehearses on Thursday evenings")])
            small = HybridEngine(store, lambda: other, scorer=HeuristicScorer(), router=HeuristicRouter(),
                                 settings=EngineSettings(scoring=False, index_max_vectors=1), in_database=True)
            assert "The orchestra rehearses on Thursday evenings" in await _top(small, scope, "orchestra rehearses")
            await after.close()
            await small.close()
    finally:
        await store.close()
