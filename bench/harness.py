"""Timing helpers and process management shared by the benchmarks."""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Awaitable, Callable, Iterator

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def measure(call: Callable[[], Awaitable[object]], total: int, concurrency: int) -> dict[str, float]:
    """Run `total` calls from `concurrency` callers; latency percentiles and throughput."""
    latencies: list[float] = []
    per_caller = total // concurrency

    async def caller() -> None:
        for _ in range(per_caller):
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)

    for _ in range(min(50, per_caller)):  # warm-up
        await call()
    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p95_ms": percentile(latencies, 0.95) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
        "ops_per_s": len(latencies) / elapsed,
        "calls": len(latencies),
    }


def wait_serving(address: str, timeout: float = 60.0, service: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        while time.monotonic() < deadline:
            try:
                if service is None:
                    # The baseline has no health service; any answer, even UNIMPLEMENTED, means up.
                    try:
                        channel.unary_unary("/ping.Ping/Ping")(b"", timeout=1)
                    except grpc.RpcError as exc:
                        if exc.code() == grpc.StatusCode.UNAVAILABLE:
                            raise
                    return
                stub = health_pb2_grpc.HealthStub(channel)
                if stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1).status == 1:
                    return
            except grpc.RpcError:
                time.sleep(0.1)
    raise TimeoutError(f"{address} did not come up")


@contextmanager
def process(args: list[str], address: str, health: str | None = "", env_extra: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSCOPE_MEMORY_")} | (env_extra or {})
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_serving(address, service=health)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
