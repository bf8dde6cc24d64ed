"""`make bench`: run every benchmark, print a table, write bench/results.json."""

from __future__ import annotations

import asyncio
import importlib
import json
import platform
import sys
import time
from pathlib import Path

# Each module exposes `async def run(results: list[dict]) -> None`.
MODULES = ["bench.memory_bench", "bench.auto_context_bench", "bench.long_term_bench", "bench.recall_bench", "bench.java_turn_bench",
           "bench.mcp_bench",
           "bench.lifecycle_bench", "bench.tiered_bench", "bench.pool_bench"]


async def main(selected: list[str]) -> list[dict]:
    results: list[dict] = []
    for name in MODULES:
        if selected and not any(s in name for s in selected):
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        started = time.perf_counter()
        produced: list[dict] = []
        await module.run(produced)
        results += [{**r, "module": name} for r in produced]
        print(f"{name}: {time.perf_counter() - started:.1f}s", file=sys.stderr)
    return results


def table(results: list[dict]) -> str:
    # The last column is the ratio to the benchmark's own baseline: a bare echo server for the
    # RPC benchmarks, AgentScope's InMemoryMemory for the Java agent turn.
    lines = [f"{'benchmark':<44} {'conc':>4} {'p50 ms':>9} {'p99 ms':>9} {'ops/s':>9} {'x base':>7}"]
    for r in results:
        if "skipped" in r:
            lines.append(f"{r['benchmark']:<44}  skipped: {r['skipped']}")
            continue
        if "recall_at_5" in r:
            lines.append(f"{r['benchmark']:<44}  recall@5 {r['recall_at_5']:.3f}  recall@10 {r['recall_at_10']:.3f}")
            continue
        if "seconds" in r:
            lines.append(f"{r['benchmark']:<44} {'':>4} {'':>9} {'':>9} {'':>9}  {r['seconds']} s")
            continue
        lines.append(
            f"{r['benchmark']:<44} {r.get('concurrency', ''):>4} {r.get('p50_ms', float('nan')):>9.3f} "
            f"{r.get('p99_ms', r.get('p95_ms', float('nan'))):>9.3f} {r.get('ops_per_s', float('nan')):>9.1f} "
            f"{r.get('ratio_to_echo', r.get('ratio_to_in_memory', r.get('ratio_to_grpc', r.get('ratio_to_embed', r.get('ratio_to_embed_batch', r.get('ratio_to_get_messages', '')))))):>7}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    results = asyncio.run(main(sys.argv[1:]))
    out = Path(__file__).resolve().parent / "results.json"
    # Running a subset (`python -m bench long_term`) replaces only that module's entries.
    ran = {r["module"] for r in results}
    kept = json.loads(out.read_text())["results"] if out.exists() else []
    merged = [r for r in kept if r.get("module") not in ran] + results
    out.write_text(json.dumps({"machine": platform.platform(), "python": platform.python_version(),
                               "results": merged}, indent=2))
    print(table(results))
    print(f"wrote {out}")
