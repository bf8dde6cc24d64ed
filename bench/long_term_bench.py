"""Long-term memory engine: Retrieve latency against the embedder's own latency, Record
throughput against the embedder's batch throughput, open and first-record time against the
stored count; on sqlite (embedded index) and PostgreSQL + pgvector.

Every figure is a ratio to a baseline measured in the same run: `ratio_to_embed` is a Retrieve
p95 over the embedder's p50 on the same query texts; `ratio_to_embed_batch` is Record
throughput over the embedder's batch throughput.

The engine runs in-process (the server's gRPC cost is measured by the other benchmarks). The
stored memories are written straight into the store with embeddings of a pool of distinct texts
(plus a little noise, so no two vectors are equal): embedding 100,000 texts would take most of
the run and measures nothing new. The target scope holds `size` memories; other scopes and
tenants hold `others` more.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedders import TextEmbedder, load_embedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.engine import pin_blas_threads
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermRow
from bench.harness import percentile

SUBJECTS = ["tea", "coffee", "hiking", "chess", "Paris", "Kyoto", "jazz", "the cello", "Go", "Rust",
            "dark mode", "peanuts", "cats", "dogs", "cycling", "Lisbon", "painting", "sushi", "Mandarin", "oboe",
            "爬山", "绿茶", "围棋", "上海", "猫"]
VERBS = ["likes", "dislikes", "is learning", "often talks about", "is allergic to", "wants to visit", "owns", "avoids"]
QUERIES = [f"what does the user think about {s}" for s in SUBJECTS[:20]] + [f"用户喜欢{s}吗" for s in SUBJECTS[20:]]
POOL = 1024
# (store, memories in the target scope, memories in other scopes and tenants)
PLAN = [("sqlite", 10_000, 100_000), ("postgres", 10_000, 100_000), ("sqlite", 1_000, 10_000),
        ("sqlite", 100_000, 100_000), ("postgres", 100_000, 100_000)]


def plan() -> list[tuple[str, int, int]]:
    """PLAN, or `LTM_BENCH_PLAN` (e.g. "sqlite:1000:10000,postgres:1000:10000") on a machine too
    slow for the issue's sizes; the default stays the issue's sizes."""
    spec = os.environ.get("LTM_BENCH_PLAN", "").strip()
    if not spec:
        return PLAN
    out = []
    for part in spec.split(","):
        kind, size, others = part.strip().split(":")
        out.append((kind, int(size), int(others)))
    return out


def fact(i: int) -> str:
    rng = random.Random(i)
    return f"User {rng.choice(VERBS)} {rng.choice(SUBJECTS)} (note {i})"


class Filler:
    """Writes synthetic memories straight into the store."""

    def __init__(self, embedder: TextEmbedder) -> None:
        self.model_id = embedder.model_id
        self.vectors = embedder.embed([fact(i) for i in range(POOL)])
        self.rng = np.random.default_rng(7)

    async def fill(self, store: Any, tenant: str, scope: Scope, start: int, count: int) -> None:
        key = scope_key(scope)
        now = time.time()
        for offset in range(0, count, 2000):
            rows = []
            for i in range(start + offset, start + min(count, offset + 2000)):
                text = fact(i)
                vector = self.vectors[i % POOL] + self.rng.normal(0, 0.01, self.vectors.shape[1]).astype(np.float32)
                vector /= np.linalg.norm(vector)
                rows.append(LongTermRow(
                    memory_id=str(uuid.uuid4()), scope_key=key, agent_name=scope.agent_name, user_id=scope.user_id,
                    run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)), created=now, updated=now,
                    last_accessed=now, content_hash=content_hash(text), embedding=vector.astype(np.float32).tobytes(),
                    embedding_model=self.model_id))

            def write(tx: Any, rows: list[LongTermRow] = rows) -> None:
                tx.ltm_register_scope(key, scope.agent_name, scope.user_id, scope.run_name, now)
                tx.ltm_insert(rows)

            await store.run(tenant, write)


def _engine(store: Any, embedder: TextEmbedder, kind: str) -> HybridEngine:
    return HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                        settings=EngineSettings(scoring=False), in_database=kind == "postgres")


async def _latencies(call: Any, texts: list[str], rounds: int) -> list[float]:
    out = []
    for i in range(rounds):
        started = time.perf_counter()
        await call(texts[i % len(texts)])
        out.append(time.perf_counter() - started)
    return out


async def _embedder_baseline(embedder: TextEmbedder, results: list[dict]) -> float:
    texts = [fact(i) for i in range(512)]
    embedder.embed(texts[:32])
    started = time.perf_counter()
    embedder.embed(texts)
    batch_rate = len(texts) / (time.perf_counter() - started)
    results.append({"benchmark": f"LTM embedder {embedder.model_id} (batches of 32)", "ops_per_s": round(batch_rate, 1)})
    return batch_rate


async def _one_size(kind: str, size: int, others: int, embedder: TextEmbedder, filler: Filler, batch_rate: float,
                    results: list[dict], dsn: str | None) -> None:
    with tempfile.TemporaryDirectory() as data:
        store = open_store(kind, Path(data), postgres_dsn=dsn)
        try:
            engine = _engine(store, embedder, kind)
            await engine.open()
            target = Scope(agent_name="bench", user_id="target")
            started = time.perf_counter()
            await filler.fill(store, "default", target, 0, size)
            per_scope = max(1, others // 10)
            for s in range(10):
                await filler.fill(store, "default" if s % 2 else "other-tenant", Scope(user_id=f"other-{s}"), size + s * per_scope, per_scope)
            fill_s = time.perf_counter() - started
            await engine.close()

            # Open and the first record of the big scope after opening, with `size + others` stored.
            engine = _engine(store, embedder, kind)
            started = time.perf_counter()
            await engine.open()
            open_s = time.perf_counter() - started
            started = time.perf_counter()
            await engine.record("default", target, [Msg.create(MsgRole.USER, f"first record after open {size}")])
            first_s = time.perf_counter() - started
            results.append({"benchmark": f"LTM open {kind} @ {size}", "seconds": round(open_s, 4),
                            "stored_total": size + others, "fill_s": round(fill_s, 1)})
            results.append({"benchmark": f"LTM first record {kind} @ {size}", "seconds": round(first_s, 4)})

            # Retrieve vs the embedder on the same query texts, interleaved so load hits both alike.
            query_msgs = [Msg.create(MsgRole.USER, q) for q in QUERIES]
            await engine.retrieve("default", target, query_msgs[0])  # builds the scope's index
            embed_lat: list[float] = []
            retrieve_lat: list[float] = []
            for i in range(200):
                q = query_msgs[i % len(query_msgs)]
                t0 = time.perf_counter()
                embedder.embed_query([q.text_content])
                t1 = time.perf_counter()
                await engine.retrieve("default", target, q)
                t2 = time.perf_counter()
                embed_lat.append(t1 - t0)
                retrieve_lat.append(t2 - t1)
            embed_p50 = percentile(embed_lat, 0.5)
            p50, p95 = percentile(retrieve_lat, 0.5), percentile(retrieve_lat, 0.95)
            results.append({"benchmark": f"LTM Retrieve {kind} @ {size}", "concurrency": 1,
                            "p50_ms": round(p50 * 1000, 3), "p95_ms": round(p95 * 1000, 3),
                            "embed_p50_ms": round(embed_p50 * 1000, 3), "ratio_to_embed": round(p95 / embed_p50, 2),
                            "other_scopes_total": others})

            # Record throughput in batches of 32 new messages against the embedder's own batches
            # of 32 new texts, interleaved so the machine's changing load hits both alike.
            counter = 10_000_000
            embed_s = record_s = 0.0
            recorded = 0
            for _ in range(8):
                texts = [fact(counter + j) for j in range(64)]
                counter += 64
                t0 = time.perf_counter()
                embedder.embed(texts[:32])
                t1 = time.perf_counter()
                recorded += len(await engine.record("default", target, [Msg.create(MsgRole.USER, t) for t in texts[32:]]))
                t2 = time.perf_counter()
                embed_s += t1 - t0
                record_s += t2 - t1
            rate = recorded / record_s
            results.append({"benchmark": f"LTM Record batch of 32 {kind} @ {size}", "ops_per_s": round(rate, 1),
                            "embed_batch_ops_per_s": round(8 * 32 / embed_s, 1),
                            "ratio_to_embed_batch": round(rate / (8 * 32 / embed_s), 2)})
            await engine.close()
        finally:
            await store.close()


async def run(results: list[dict], only: str = "") -> None:
    """`only`, e.g. "sqlite@10000", runs one entry of PLAN."""
    pin_blas_threads(1)
    # The server's default embedder (ServiceSettings.long_term_embedder).
    embedder = load_embedder(ServiceSettings().long_term_embedder)  # type: ignore[arg-type]
    batch_rate = await _embedder_baseline(embedder, results)
    filler = Filler(embedder)
    postgres = None
    for kind, size, others in plan():
        if only and only != f"{kind}@{size}":
            continue
        dsn = None
        if kind == "postgres":
            try:
                sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
                from postgres_server import PostgresServer

                postgres = postgres or PostgresServer()
                dsn = postgres.create_database(f"bench_{uuid.uuid4().hex[:8]}")
            except (FileNotFoundError, OSError) as exc:
                results.append({"benchmark": f"LTM Retrieve {kind} @ {size}", "skipped": str(exc)})
                continue
        started = time.perf_counter()
        before = len(results)
        await _one_size(kind, size, others, embedder, filler, batch_rate, results, dsn)
        print(f"long-term {kind} @ {size}: {time.perf_counter() - started:.0f}s", file=sys.stderr)
        for r in results[before:]:
            print(f"  {r}", file=sys.stderr)
    if postgres is not None:
        postgres.stop()
    print("long-term benchmark done", file=sys.stderr)


if __name__ == "__main__":
    out: list[dict] = []
    asyncio.run(run(out, sys.argv[1] if len(sys.argv) > 1 else ""))
    for r in out:
        print(r)
