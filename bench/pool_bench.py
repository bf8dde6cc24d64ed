"""Shared memory pools over gRPC on the embedded sqlite store: WritePoolEntry and GetPoolEntry
against the echo baseline (a bare server answering the same messages with prebuilt responses);
and the watch fan-out: with 100 WatchPoolEvents subscribers (one channel each, as 100 agents),
the time from a write's acknowledgement until every subscriber has received its event, next to
the same with one subscriber, measured in the same run."""

from __future__ import annotations

import asyncio
import itertools
import sys
import tempfile
import time
from collections import defaultdict

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2_grpc as pb_grpc
from bench.harness import BIN, free_port, measure, percentile, process
from bench.memory_bench import _merge, against_echo
from bench.workload import pool_content

CALLS = {1: 1500, 32: 4800}
ROUNDS = 3
SUBSCRIBERS = 100
FANOUT_WRITES = 200
KEYS = 100
POOL = "bench-pool"


class PoolWorkloads:
    """Writes (last writer wins, over `KEYS` keys) and reads of one pool on one server."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.aio.insecure_channel(address)
        self.stub = pb_grpc.SharedPoolServiceStub(self.channel)
        self.counter = itertools.count()
        self.contents = [pool_content(i) for i in range(KEYS)]
        self.read_request = pb.GetPoolEntryRequest(pool_id=POOL, key="note-0")

    async def prepare(self) -> None:
        for i in range(KEYS):
            await self.stub.WritePoolEntry(pb.WritePoolEntryRequest(
                pool_id=POOL, key=f"note-{i}", content_json=self.contents[i], writer="planner"))

    async def write(self) -> None:
        i = next(self.counter) % KEYS
        response = await self.stub.WritePoolEntry(pb.WritePoolEntryRequest(
            pool_id=POOL, key=f"note-{i}", content_json=self.contents[i], writer="planner"))
        assert response.sequence > 0

    async def read(self) -> None:
        response = await self.stub.GetPoolEntry(self.read_request)
        assert response.entry.key == "note-0"


async def fan_out(address: str, pool_id: str, subscribers: int, writes: int) -> dict[str, float]:
    """Per write: acknowledgement to the last of `subscribers` watchers receiving its event."""
    channels = [grpc.aio.insecure_channel(address) for _ in range(subscribers)]
    writer_channel = grpc.aio.insecure_channel(address)
    writer = pb_grpc.SharedPoolServiceStub(writer_channel)
    arrivals: dict[int, list[float]] = defaultdict(list)
    complete: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
    calls = [pb_grpc.SharedPoolServiceStub(c).WatchPoolEvents(pb.WatchPoolEventsRequest(pool_id=pool_id))
             for c in channels]

    async def watch(call: grpc.aio.UnaryStreamCall) -> None:
        async for response in call:
            seq = response.event.sequence
            arrivals[seq].append(time.perf_counter())
            if len(arrivals[seq]) == subscribers:
                complete[seq].set()

    async def write_once(i: int) -> tuple[int, float]:
        done = await writer.WritePoolEntry(pb.WritePoolEntryRequest(
            pool_id=pool_id, key=f"note-{i % KEYS}", content_json=pool_content(i), writer="planner"))
        return done.sequence, time.perf_counter()

    watchers = [asyncio.create_task(watch(call)) for call in calls]
    try:
        # Warm-up: once every watcher has its first events, all the streams are open.
        for i in range(5):
            seq, _ = await write_once(i)
            await asyncio.wait_for(complete[seq].wait(), 60)
        latencies, before_ack = [], 0
        for i in range(writes):
            seq, acked = await write_once(i)
            await asyncio.wait_for(complete[seq].wait(), 60)
            last = max(arrivals[seq])
            # Delivery can beat the acknowledgement to this process (the server notifies the
            # watchers before it answers the writer): that counts as no wait at all.
            before_ack += last <= acked
            latencies.append(max(0.0, last - acked))
    finally:
        for call in calls:
            call.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        for channel in (*channels, writer_channel):
            await channel.close()
    return {"p50_ms": percentile(latencies, 0.50) * 1000, "p95_ms": percentile(latencies, 0.95) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000, "writes": len(latencies), "all_before_ack": before_ack}


async def run(results: list[dict], scale: float = 1.0) -> None:
    """`scale` shrinks every count (a smoke run of the benchmark itself); 1.0 is the full size."""
    calls = {c: max(c, int(n * scale)) for c, n in CALLS.items()}
    subscribers, writes = max(2, int(SUBSCRIBERS * scale)), max(5, int(FANOUT_WRITES * scale))
    echo_port, port = free_port(), free_port()
    echo_address, address = f"127.0.0.1:{echo_port}", f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        args = [str(BIN / "agentscope-memory"), "serve", "--port", str(port), "--data-dir", data,
                "--log-level", "WARNING"]
        with process([sys.executable, "-m", "bench.echo_server", str(echo_port)], echo_address, health=None), \
                process(args, address):
            echo, service = PoolWorkloads(echo_address), PoolWorkloads(address)
            await service.prepare()
            echo_write_p50 = 0.0
            for name, pick in (("WritePoolEntry", lambda w: w.write), ("GetPoolEntry", lambda w: w.read)):
                for concurrency, total in calls.items():
                    echo_rounds, service_rounds = [], []
                    for _ in range(ROUNDS):
                        echo_rounds.append(await measure(pick(echo), total, concurrency))
                        service_rounds.append(await measure(pick(service), total, concurrency))
                    base, numbers = _merge(echo_rounds), _merge(service_rounds)
                    if name == "WritePoolEntry" and concurrency == 1:
                        echo_write_p50 = base["p50_ms"]
                    results.append(against_echo(f"pool {name} sqlite", concurrency, numbers, base))
            await echo.channel.close()
            await service.channel.close()

            one = await fan_out(address, "bench-fanout-1", 1, writes)
            many = await fan_out(address, f"bench-fanout-{subscribers}", subscribers, writes)
            for count, numbers in ((1, one), (subscribers, many)):
                results.append({
                    "benchmark": f"pool watch fan-out to {count} subscriber{'s' if count > 1 else ''}",
                    "subscribers": count,
                    "p50_ms": round(numbers["p50_ms"], 4),
                    "p95_ms": round(numbers["p95_ms"], 4),
                    "p99_ms": round(numbers["p99_ms"], 4),
                    "writes": numbers["writes"],
                    "all_delivered_before_ack": numbers["all_before_ack"],
                    "echo_p50_ms": round(echo_write_p50, 4),
                    "ratio_to_echo": round(numbers["p50_ms"] / echo_write_p50, 3),
                    "ratio_to_one_subscriber": round(numbers["p50_ms"] / one["p50_ms"], 3) if one["p50_ms"] else None,
                })
