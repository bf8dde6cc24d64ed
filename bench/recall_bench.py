"""Long-term recall quality on the labelled set (bench/data/ltm_recall, made by
bench/ltm_recall_data.py), per language, in one run:

- dense only, for each embedded embedder (MiniLM, multilingual-e5-small, USE multilingual);
- BM25 only, over `agentscope_memory.long_term.text.tokenize`;
- their reciprocal-rank fusion (RRF, k=60) and linear fusions of normalised scores;
- the shipped ranking (the engine's ranked search), through `shipped_rankings` below.

Each scope is one conversation (one user), so a query ranks that user's memories only. Recall@k
of a query is the share of its relevant memories among the first k; small-talk queries (no
relevant memory) are left out of recall and used to score the offline query router.
Also measured here: each embedder's open time, one-query latency and batch throughput.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentscope_memory.long_term.text import tokenize

DATA = Path(__file__).resolve().parent / "data" / "ltm_recall" / "recall_set.json"
DATA_B = Path(__file__).resolve().parent / "data" / "ltm_recall" / "recall_set_b.json"
DATA_X = Path(__file__).resolve().parent / "data" / "ltm_recall" / "recall_set_x.json"
EMBEDDERS = ("minilm", "e5-small", "use-multilingual", "minilm+e5")
LINEAR_WEIGHTS = (0.3, 0.5, 0.7)  # weight of the dense leg
RRF_K = 60
DEPTH = 50  # candidates each leg contributes to a fusion, as an engine would fetch
# The half of the set the shipped defaults (dense_weight) were tuned on: every other conversation
# in sorted order, 3 English and 3 Chinese. The other half is held out ("-heldout" entries).
TUNING_CONVERSATIONS = ("en-alex", "en-casey", "en-emery", "zh-chen_jing", "zh-liu_yang", "zh-zhang_wei")
# Set X (cross-lingual): changes were chosen looking at these six users only; x-07..x-12 are held out.
XLING_TUNING_CONVERSATIONS = ("x-01", "x-02", "x-03", "x-04", "x-05", "x-06")

Ranking = dict[str, list[str]]  # query id -> memory ids, best first


class Bm25:
    """Okapi BM25 (k1=1.2, b=0.75) over one scope's memories."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(tokenize(t)) for t in texts]
        lengths = [sum(d.values()) for d in self.docs]
        self.avg = statistics.fmean(lengths) if lengths else 0.0
        self.lengths = lengths
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> np.ndarray:
        terms = tokenize(query)
        out = np.zeros(len(self.docs), dtype=np.float64)
        for i, doc in enumerate(self.docs):
            norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / (self.avg or 1.0))
            s = 0.0
            for t in terms:
                tf = doc.get(t)
                if tf:
                    s += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
            out[i] = s
        return out


def _top(scores: np.ndarray, ids: Sequence[str], k: int) -> list[str]:
    order = np.argsort(-scores, kind="stable")[:k]
    return [ids[i] for i in order]


def _rrf(rankings: Sequence[list[str]], k: int = RRF_K) -> list[str]:
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking):
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (k + rank + 1)
    return sorted(fused, key=lambda m: -fused[m])


def _normalise(scores: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Min-max over the candidate set (0 outside it): the legs' scales differ (cosine vs BM25)."""
    out = np.zeros_like(scores, dtype=np.float64)
    sub = scores[candidates]
    lo, hi = float(sub.min()), float(sub.max())
    out[candidates] = (sub - lo) / (hi - lo) if hi > lo else 1.0
    return out


def _linear(dense: np.ndarray, lexical: np.ndarray, weight: float) -> np.ndarray:
    """weight * dense + (1 - weight) * BM25, each min-max normalised over the candidates (the
    top DEPTH of each leg; BM25 only where it matched at all); others rank last."""
    top_lexical = np.argsort(-lexical)[:DEPTH]
    candidates = np.union1d(np.argsort(-dense)[:DEPTH], top_lexical[lexical[top_lexical] > 0])
    fused = weight * _normalise(dense, candidates) + (1 - weight) * _normalise(lexical, candidates)
    outside = np.ones(len(dense), dtype=bool)
    outside[candidates] = False
    fused[outside] = -1.0
    return fused


def _linear_cosine(dense: np.ndarray, lexical: np.ndarray, weight: float) -> np.ndarray:
    """The other normalisation: cosine clipped to [0, 1] as is, BM25 over its best candidate,
    and a memory found by one leg only gets 0 from the other."""
    n = len(dense)
    top_dense = np.argsort(-dense)[:DEPTH]
    top_lexical = np.argsort(-lexical)[:DEPTH]
    top_lexical = top_lexical[lexical[top_lexical] > 0]
    in_dense, in_lexical = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    in_dense[top_dense], in_lexical[top_lexical] = True, True
    best = float(lexical[top_lexical].max()) if len(top_lexical) else 0.0
    dense_n = np.where(in_dense, np.clip(dense, 0.0, 1.0), 0.0)
    lexical_n = np.where(in_lexical, lexical / best if best > 0 else 0.0, 0.0)
    fused = weight * dense_n + (1 - weight) * lexical_n
    fused[~(in_dense | in_lexical)] = -1.0
    return fused


def _seed(semantic: np.ndarray, importance: np.ndarray, hours: np.ndarray, decay_rate: float = 0.99,
          alpha: float = 0.5, beta: float = 0.2, gamma: float = 0.3) -> np.ndarray:
    """The seed formula over the semantic top DEPTH, outside the engine: importance from the
    offline heuristic scorer of each round, decay from the time since the memory was stored
    (never touched)."""
    top = np.argsort(-semantic)[:DEPTH]
    final = np.full(len(semantic), -9.0)
    final[top] = alpha * semantic[top] + beta * decay_rate ** hours[top] + gamma * importance[top]
    return final


def recall(rankings: Ranking, queries: Sequence[dict[str, Any]], k: int) -> float:
    values = [len(set(rankings[q["id"]][:k]) & set(q["relevant"])) / len(q["relevant"]) for q in queries]
    return statistics.fmean(values) if values else float("nan")


def _entries(name: str, rankings: Ranking, queries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for lang in ("en", "zh"):
        chosen = [q for q in queries if q["lang"] == lang and q["relevant"]]
        by_type = {}
        for kind in sorted({q["type"] for q in chosen}):
            of_kind = [q for q in chosen if q["type"] == kind]
            by_type[kind] = round(recall(rankings, of_kind, 5), 3)
        out.append({
            "benchmark": f"LTM recall {name} {lang}",
            "ranking": name, "language": lang, "queries": len(chosen),
            "recall_at_1": round(recall(rankings, chosen, 1), 3),
            "recall_at_5": round(recall(rankings, chosen, 5), 3),
            "recall_at_10": round(recall(rankings, chosen, 10), 3),
            "recall_at_5_by_type": by_type,
        })
    return out


def _embed_timing(name: str, embedder: Any, texts: Sequence[str], load_s: float) -> dict[str, Any]:
    singles = []
    for text in texts[:60]:
        started = time.perf_counter()
        embedder.embed_query([text])
        singles.append(time.perf_counter() - started)
    singles.sort()
    batch = list(texts[:128])
    started = time.perf_counter()
    for i in range(0, len(batch), 32):
        embedder.embed(batch[i : i + 32])
    per_s = len(batch) / (time.perf_counter() - started)
    return {
        "benchmark": f"Embedder {name} (1 thread)", "open_s": round(load_s, 2),
        "p50_ms": round(singles[len(singles) // 2] * 1000, 2),
        "p95_ms": round(singles[int(len(singles) * 0.95)] * 1000, 2),
        "ops_per_s": round(per_s, 1), "note": "p50/p95: one query; ops_per_s: texts/s in batches of 32",
    }


def shipped_rankings(memories: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]],
                     rankings: Sequence[str] = ("shipped", "seed")) -> dict[str, Ranking] | None:
    """The engine's ranked search (bench/recall_shipped.py), by the shipped ranking and by the
    seed formula as written (`seed`), or None while the engine (`agentscope_memory.long_term.hybrid`)
    is not on this branch."""
    from bench import recall_shipped

    try:
        return recall_shipped.rank_all(memories, queries, rankings)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("agentscope_memory.long_term.hybrid"):
            return None
        raise


def shipped_on_pgvector(memories: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]],
                        log: Callable[[str], None]) -> Ranking | str:
    """The shipped ranking with candidates from PostgreSQL (pgvector HNSW + tsvector), on a
    PostgreSQL started here (tests/postgres_server.py); the reason as a string when it cannot start."""
    from bench import recall_shipped

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    try:
        from postgres_server import PostgresServer

        server = PostgresServer()
    except (FileNotFoundError, OSError, ImportError) as exc:
        return str(exc)
    try:
        started = time.perf_counter()
        ranking = recall_shipped.rank(memories, queries, store_kind="postgres",
                                      postgres_dsn=server.create_database("recall_bench"))
        log(f"shipped on pgvector: {time.perf_counter() - started:.1f}s")
        return ranking
    finally:
        server.stop()


def _by_conversation(memories: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_conv: dict[str, list[dict[str, Any]]] = {}
    for m in memories:
        by_conv.setdefault(m["conversation"], []).append(m)
    return by_conv


def _bm25_leg(by_conv: dict[str, list[dict[str, Any]]], queries: Sequence[dict[str, Any]]) -> tuple[dict[str, np.ndarray], Ranking]:
    """Each query's BM25 scores over its conversation's memories, and the ranking they give."""
    lexical: dict[str, np.ndarray] = {}
    bm25: Ranking = {}
    for conv, mems in by_conv.items():
        index = Bm25([m["text"] for m in mems])
        ids = [m["id"] for m in mems]
        for q in queries:
            if q["conversation"] == conv:
                lexical[q["id"]] = index.scores(q["text"])
                bm25[q["id"]] = _top(lexical[q["id"]], ids, DEPTH)
    return lexical, bm25


def _dense_leg(embedder: Any, by_conv: dict[str, list[dict[str, Any]]], queries: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Each query's cosine to every memory of its conversation."""
    dense: dict[str, np.ndarray] = {}
    for conv, mems in by_conv.items():
        doc_vectors = embedder.embed([m["text"] for m in mems])
        conv_queries = [q for q in queries if q["conversation"] == conv]
        query_vectors = embedder.embed_query([q["text"] for q in conv_queries])
        for q, vector in zip(conv_queries, query_vectors, strict=True):
            dense[q["id"]] = doc_vectors @ vector
    return dense


def evaluate_set_b(log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Set B (bench/ltm_recall_data_b.py: written after the defaults, never tuned on): the
    shipped ranking beside BM25, dense and RRF of the default embedder, entries named `setB:...`."""
    from agentscope_memory.long_term.embedders import load_embedder
    from agentscope_memory.service import ServiceSettings

    data = json.loads(DATA_B.read_text())
    memories, queries = data["memories"], data["queries"]
    by_conv = _by_conversation(memories)
    name = ServiceSettings().long_term_embedder
    started = time.perf_counter()
    _, bm25 = _bm25_leg(by_conv, queries)
    dense = _dense_leg(load_embedder(name), by_conv, queries)  # type: ignore[arg-type]
    ids_of = {q["id"]: [m["id"] for m in by_conv[q["conversation"]]] for q in queries}
    dense_rank = {qid: _top(s, ids_of[qid], DEPTH) for qid, s in dense.items()}
    results = _entries("setB:bm25", bm25, queries) + _entries(f"setB:dense:{name}", dense_rank, queries)
    results += _entries(f"setB:rrf:{name}+bm25", {q: _rrf([dense_rank[q], bm25[q]]) for q in dense}, queries)
    engine = shipped_rankings(memories, queries)
    if engine is not None:
        results += _entries("setB:shipped", engine["shipped"], queries)
        results += _entries("setB:seed", engine["seed"], queries)
    log(f"set B: {time.perf_counter() - started:.1f}s")
    return results


def _entries_x(name: str, rankings: Ranking, queries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Set X entries per direction: `zh->en` is a Chinese query for a memory stated in English;
    `en->en` and `zh->zh` are the same-language controls."""
    out = []
    for lang, fact_lang in (("zh", "en"), ("en", "zh"), ("en", "en"), ("zh", "zh")):
        chosen = [q for q in queries if q["lang"] == lang and q["fact_lang"] == fact_lang]
        by_type = {kind: round(recall(rankings, [q for q in chosen if q["type"] == kind], 5), 3)
                   for kind in sorted({q["type"] for q in chosen})}
        out.append({
            "benchmark": f"LTM recall {name} {lang}->{fact_lang}",
            "ranking": name, "language": f"{lang}->{fact_lang}", "queries": len(chosen),
            "recall_at_1": round(recall(rankings, chosen, 1), 3),
            "recall_at_5": round(recall(rankings, chosen, 5), 3),
            "recall_at_10": round(recall(rankings, chosen, 10), 3),
            "recall_at_5_by_type": by_type,
        })
    return out


def evaluate_crosslingual(embedders: Sequence[str] = EMBEDDERS, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Set X (bench/ltm_recall_data_x.py): bilingual scopes, every query in the other language
    than its fact. Dense per embedder, BM25 and the shipped ranking, entries `setX:...` per
    direction, and the shipped ranking on the held-out half (`setX:shipped-heldout`)."""
    from agentscope_memory.long_term.embedders import load_embedder

    data = json.loads(DATA_X.read_text())
    memories, queries = data["memories"], data["queries"]
    by_conv = _by_conversation(memories)
    held_out = [q for q in queries if q["conversation"] not in XLING_TUNING_CONVERSATIONS]
    started = time.perf_counter()
    _, bm25 = _bm25_leg(by_conv, queries)
    results = _entries_x("setX:bm25", bm25, queries)
    ids_of = {q["id"]: [m["id"] for m in by_conv[q["conversation"]]] for q in queries}
    for name in embedders:
        try:
            embedder = load_embedder(name)  # type: ignore[arg-type]
        except ModuleNotFoundError as exc:  # the `multilingual` extra is not installed
            results.append({"benchmark": f"LTM recall setX:dense:{name}", "skipped": str(exc)})
            continue
        dense = _dense_leg(embedder, by_conv, queries)
        dense_rank = {qid: _top(s, ids_of[qid], DEPTH) for qid, s in dense.items()}
        results += _entries_x(f"setX:dense:{name}", dense_rank, queries)
    engine = shipped_rankings(memories, queries, ("shipped",))
    if engine is not None:
        results += _entries_x("setX:shipped", engine["shipped"], queries)
        results += _entries_x("setX:shipped-heldout", engine["shipped"], held_out)
    log(f"set X: {time.perf_counter() - started:.1f}s")
    return results


def evaluate_bilingual(log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """A bilingual user: each English conversation of set A shares its scope with a Chinese one
    (paired in order), and every query ranks both. Dense retrieval with the default embedder,
    entries `bilingual:dense:...`, to read beside `dense:...` (each conversation alone): a
    layout that favours one script shows as a drop here; and the shipped ranking, entries
    `bilingual:shipped`, to read beside `shipped`."""
    from agentscope_memory.long_term.embedders import load_embedder
    from agentscope_memory.service import ServiceSettings

    data = json.loads(DATA.read_text())
    by_conv = _by_conversation(data["memories"])
    english = sorted(c for c in by_conv if c.startswith("en-"))
    chinese = sorted(c for c in by_conv if c.startswith("zh-"))
    pair = {**dict(zip(english, chinese, strict=True)), **dict(zip(chinese, english, strict=True))}
    name = ServiceSettings().long_term_embedder
    started = time.perf_counter()
    embedder = load_embedder(name)  # type: ignore[arg-type]
    # Each conversation's memories are embedded once and serve both scopes they belong to.
    stored = {conv: embedder.embed([m["text"] for m in mems]) for conv, mems in by_conv.items()}
    ranking: Ranking = {}
    for conv, mems in by_conv.items():
        queries = [q for q in data["queries"] if q["conversation"] == conv]
        scores = np.vstack([stored[conv], stored[pair[conv]]]) @ embedder.embed_query([q["text"] for q in queries]).T
        ids = [m["id"] for m in mems + by_conv[pair[conv]]]
        for q, column in zip(queries, scores.T, strict=True):
            ranking[q["id"]] = _top(column, ids, DEPTH)
    results = _entries(f"bilingual:dense:{name}", ranking, data["queries"])
    # The same pairs through the engine: each pair's scope is named after its English conversation.
    scope_of = {c: c if c.startswith("en-") else pair[c] for c in by_conv}
    engine = shipped_rankings([{**m, "scope": scope_of[m["conversation"]]} for m in data["memories"]],
                              [{**q, "scope": scope_of[q["conversation"]]} for q in data["queries"]], ("shipped",))
    if engine is not None:
        results += _entries("bilingual:shipped", engine["shipped"], data["queries"])
    log(f"bilingual: {time.perf_counter() - started:.1f}s")
    return results


def evaluate(embedders: Sequence[str] = EMBEDDERS, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    data = json.loads(DATA.read_text())
    memories: list[dict[str, Any]] = data["memories"]
    queries: list[dict[str, Any]] = data["queries"]
    by_conv = _by_conversation(memories)
    results: list[dict[str, Any]] = []

    # Lexical leg.
    started = time.perf_counter()
    lexical, bm25 = _bm25_leg(by_conv, queries)
    log(f"bm25: {time.perf_counter() - started:.1f}s")
    results += _entries("bm25", bm25, queries)

    # What the seed formula adds, per scope: heuristic importance of each memory's round, and hours
    # from the memory's time to the query's.
    from datetime import datetime

    from agentscope_memory.long_term.importance import HeuristicScorer

    scorer = HeuristicScorer()
    importance: dict[str, np.ndarray] = {}
    hours: dict[str, np.ndarray] = {}
    for conv, mems in by_conv.items():
        rounds = [mems[i : i + 2] for i in range(0, len(mems), 2)]
        weights = np.array([scorer.assess_now([f"{m['role']}: {m['text']}" for m in r]).importance_score
                            for r in rounds for _ in r])
        stamps = np.array([datetime.fromisoformat(m["at"]).timestamp() for m in mems])
        for q in queries:
            if q["conversation"] == conv:
                importance[q["id"]] = weights
                hours[q["id"]] = np.maximum(0.0, datetime.fromisoformat(q["asked_at"]).timestamp() - stamps) / 3600

    # Dense legs and fusions, per embedder.
    from agentscope_memory.long_term.embedders import load_embedder

    for name in embedders:
        started = time.perf_counter()
        try:
            embedder = load_embedder(name)  # type: ignore[arg-type]
        except ModuleNotFoundError as exc:  # the `multilingual` extra is not installed
            results.append({"benchmark": f"LTM recall dense:{name}", "skipped": str(exc)})
            continue
        load_s = time.perf_counter() - started
        results.append(_embed_timing(name, embedder, [q["text"] for q in queries], load_s))
        started = time.perf_counter()
        dense = _dense_leg(embedder, by_conv, queries)
        log(f"{name}: embedded in {time.perf_counter() - started:.1f}s")
        ids_of = {q["id"]: [m["id"] for m in by_conv[q["conversation"]]] for q in queries}
        dense_rank = {qid: _top(s, ids_of[qid], DEPTH) for qid, s in dense.items()}
        results += _entries(f"dense:{name}", dense_rank, queries)
        results += _entries(f"rrf:{name}+bm25", {q: _rrf([dense_rank[q], bm25[q]]) for q in dense}, queries)
        for weight in LINEAR_WEIGHTS:
            fused = {q: _top(_linear(dense[q], lexical[q], weight), ids_of[q], DEPTH) for q in dense}
            results += _entries(f"linear{weight}:{name}+bm25", fused, queries)
        for weight in (0.6,):
            fused = {q: _top(_linear_cosine(dense[q], lexical[q], weight), ids_of[q], DEPTH) for q in dense}
            results += _entries(f"linear-cosine{weight}:{name}+bm25", fused, queries)
        for weight in (0.6, 0.7):
            for decay_rate in (0.99, 0.999):
                seeded = {
                    q: _top(_seed(_linear(dense[q], lexical[q], weight), importance[q], hours[q], decay_rate),
                            ids_of[q], DEPTH)
                    for q in dense
                }
                results += _entries(f"seed-sim(linear{weight},decay{decay_rate}):{name}+bm25", seeded, queries)

    engine = shipped_rankings(memories, queries)
    if engine is None:
        results.append({"benchmark": "LTM recall shipped", "skipped": "the engine (long_term/hybrid) is not on this branch"})
    else:
        shipped = engine["shipped"]
        results += _entries("shipped", shipped, queries)
        results += _entries("seed", engine["seed"], queries)
        held_out = [q for q in queries if q["conversation"] not in TUNING_CONVERSATIONS]
        results += _entries("shipped-heldout", shipped, held_out)
        results += _entries("bm25-heldout", bm25, held_out)
        shipped_pg = shipped_on_pgvector(memories, queries, log)
        if isinstance(shipped_pg, str):
            results.append({"benchmark": "LTM recall shipped-pgvector", "skipped": shipped_pg})
        else:
            results += _entries("shipped-pgvector", shipped_pg, queries)

    # The offline router on the same queries: small talk must route to general_chat, questions must not.
    from agentscope_memory.long_term.router import HeuristicRouter

    router = HeuristicRouter()
    for lang in ("en", "zh"):
        chosen = [q for q in queries if q["lang"] == lang]
        right = sum((router.route_now(q["text"]) == "general_chat") == (not q["relevant"]) for q in chosen)
        results.append({"benchmark": f"LTM router heuristic {lang}", "queries": len(chosen),
                        "accuracy": round(right / len(chosen), 3),
                        "note": "general_chat exactly for the small-talk queries"})
    return results


async def run(results: list[dict[str, Any]]) -> None:
    # On a thread: the shipped ranking runs the engine in an event loop of its own.
    results += await asyncio.to_thread(evaluate, log=lambda s: print(s, file=sys.stderr))
    results += await asyncio.to_thread(evaluate_set_b, log=lambda s: print(s, file=sys.stderr))
    results += await asyncio.to_thread(evaluate_bilingual, log=lambda s: print(s, file=sys.stderr))
    results += await asyncio.to_thread(evaluate_crosslingual, log=lambda s: print(s, file=sys.stderr))


if __name__ == "__main__":
    names = tuple(sys.argv[1:]) or EMBEDDERS
    for entry in evaluate(names):
        if "recall_at_5" in entry:
            print(f"{entry['benchmark']:<44} r@1 {entry['recall_at_1']:.3f}  r@5 {entry['recall_at_5']:.3f}  "
                  f"r@10 {entry['recall_at_10']:.3f}  {entry['recall_at_5_by_type']}")
        else:
            print(entry)
