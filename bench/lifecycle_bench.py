"""Consolidation of a 10,000-fact scope: how long it takes, facts before and after, and recall@5
of the labelled set (bench/data/ltm_recall) before and after (the issue's bar: consolidation
costs at most 0.02 recall@5).

The scope holds every labelled memory as a fact, two rewordings of each (so the labelled facts
sit in clusters a consolidation merges), and synthetic near-duplicate facts up to 10,000. Recall
after consolidation counts a merged fact as the originals it replaced (its `source.memory_ids`:
the merge carries their content). The engine runs in-process on sqlite with the real MiniLM
embedder, the offline extractive merge and the default settings (similarity 0.75, clusters of 3
to 50, fidelity 0.5). The baseline of the time is the embedder's own batch throughput measured
in the same run (`ratio_to_embed_batch`: consolidation time over the time to embed the scope).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from agentscope_memory.lifecycle.consolidation import Consolidator
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine, RankOptions
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermRow

DATA = Path(__file__).resolve().parent / "data" / "ltm_recall" / "recall_set.json"
SIZE = 10_000
TENANT = "bench"
TOPICS = ["the quarterly report", "the garden fence", "the piano lesson", "the car insurance", "the dentist visit",
          "the team offsite", "the tax return", "the bike repair", "the book club", "the flight to Oslo",
          "季度报告", "牙医预约", "钢琴课", "车险续保", "读书会"]


def rewordings(text: str, zh: bool) -> list[str]:
    if zh:
        return [f"我之前说过：{text}", f"{text}（再说一遍）"]
    return [f"As I mentioned before: {text}", f"{text} (I said this earlier)"]


def synthetic(i: int) -> list[str]:
    topic = TOPICS[i % len(TOPICS)]
    if i % len(TOPICS) >= 10:
        return [f"关于{topic}的备忘{i}：周{i % 7 + 1}处理。", f"备忘{i}：{topic}在周{i % 7 + 1}处理。",
                f"{topic}，备忘{i}，周{i % 7 + 1}。"]
    return [f"Reminder {i}: handle {topic} on day {i % 28 + 1}.", f"Handle {topic} on day {i % 28 + 1} (reminder {i}).",
            f"Reminder number {i} is about {topic}, day {i % 28 + 1}."]


def build_rows(scope: Scope, memories: list[dict[str, Any]]) -> tuple[list[LongTermRow], dict[str, str]]:
    """The scope's rows and, per labelled id, the id of the row holding its text."""
    now = time.time()
    rows: list[LongTermRow] = []
    by_hash: dict[str, str] = {}
    alias: dict[str, str] = {}

    def add(text: str, memory_id: str | None = None) -> str:
        digest = content_hash(text)
        if digest in by_hash:
            return by_hash[digest]
        mid = memory_id or str(uuid.uuid4())
        by_hash[digest] = mid
        rows.append(LongTermRow(
            memory_id=mid, scope_key=scope_key(scope), agent_name=scope.agent_name, user_id=scope.user_id,
            run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)), memory_type="fact",
            importance=0.5, importance_method="default", created=now - len(rows), updated=now,
            last_accessed=now, content_hash=digest))
        return mid

    for m in memories:
        alias[m["id"]] = add(m["text"], m["id"])
        for text in rewordings(m["text"], m["conversation"].startswith("zh")):
            add(text)
    i = 0
    while len(rows) < SIZE:
        for text in synthetic(i):
            if len(rows) < SIZE:
                add(text)
        i += 1
    return rows, alias


async def recall_at_5(engine: HybridEngine, scope: Scope, queries: list[dict[str, Any]], alias: dict[str, str]) -> float:
    options = RankOptions(top_k=5)
    hits = 0
    for q in queries:
        relevant = {alias[r] for r in q["relevant"]}
        items, _ = await engine.search_ranked(TENANT, scope, q["text"], options)
        covered: set[str] = set()
        for item in items:
            covered.add(item.id)
            covered.update(item.source.get("memory_ids", []))
        hits += bool(relevant & covered)
    return hits / len(queries)


async def run(results: list[dict[str, Any]]) -> None:
    data = json.loads(DATA.read_text())
    queries = [q for q in data["queries"] if q["relevant"]]
    embedder = MiniLMEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store("sqlite", Path(tmp))
        engine = HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                              settings=EngineSettings(scoring=False))
        await engine.open()
        scope = Scope("bench-agent", "bench-user")
        rows, alias = build_rows(scope, data["memories"])
        started = time.perf_counter()
        for start in range(0, len(rows), 1000):
            await engine.insert(TENANT, scope, rows[start:start + 1000])
        embed_s = time.perf_counter() - started
        before = await recall_at_5(engine, scope, queries, alias)
        report = await Consolidator(engine).consolidate_scope(TENANT, scope)
        await asyncio.sleep(0.2)  # let the recall touches of the first pass land
        after = await recall_at_5(engine, scope, queries, alias)
        await engine.close()
        await store.close()
    entry = {
        "benchmark": "LTM consolidation 10k facts",
        "seconds": round(report.duration_s, 1),
        "facts_before": report.facts_before,
        "facts_after": report.facts_after,
        "clusters": report.clusters,
        "merged": report.merged,
        "originals_retired": report.originals_retired,
        "failed_fidelity": report.failed_fidelity,
        "skipped_small": report.skipped_small,
        "skipped_large": report.skipped_large,
        "recall_at_5_before": round(before, 4),
        "recall_at_5_after": round(after, 4),
        "recall_cost": round(before - after, 4),
        "within_0_02": before - after <= 0.02,
        "ratio_to_embed_batch": round(report.duration_s / embed_s, 2) if embed_s else None,
    }
    results.append(entry)
    print(json.dumps(entry, indent=1))


if __name__ == "__main__":
    asyncio.run(run([]))
