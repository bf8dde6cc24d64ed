"""The pool benchmark itself at a small scale: it runs against a real server and the echo
baseline and reports every figure it promises (the full-size run is `python -m bench pool`)."""

from __future__ import annotations

import asyncio

import pytest

from bench import pool_bench


def test_pool_bench_reports_latency_ratios_and_fan_out() -> None:
    results: list[dict] = []
    asyncio.run(pool_bench.run(results, scale=0.02))
    names = [r["benchmark"] for r in results]
    assert names == ["pool WritePoolEntry sqlite"] * 2 + ["pool GetPoolEntry sqlite"] * 2 + [
        "pool watch fan-out to 1 subscriber", "pool watch fan-out to 2 subscribers"]
    for r in results[:4]:
        assert r["p50_ms"] > 0 and r["echo_p50_ms"] > 0
        # p50s are reported rounded, the ratio is taken before rounding
        assert r["ratio_to_echo"] == pytest.approx(r["p50_ms"] / r["echo_p50_ms"], abs=0.01)
    for r in results[4:]:
        assert r["writes"] == 5
        assert 0 <= r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"]
        assert r["ratio_to_echo"] >= 0
