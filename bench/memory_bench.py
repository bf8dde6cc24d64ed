"""AddMessages (one message) and GetMessages (100 messages) against the echo baseline; for
AddMessages also the floor (`floor_server.py`: the echo server plus the store's SQL transaction
for one add), so the report shows how much of the service's cost over gRPC is the durable write
itself and how much is its own logic."""

from __future__ import annotations

import itertools
import sys
import tempfile

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from bench.harness import BIN, free_port, measure, process
from bench.workload import message

CALLS = {1: 1500, 32: 4800}
ROUNDS = 3


class Workloads:
    """The measured calls against one server; `prepare` creates the memories first."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.aio.insecure_channel(address)
        self.stub = pb_grpc.MemoryServiceStub(self.channel)
        self.counter = itertools.count()
        self.add_message = message(0)
        self.get_request = pb.GetMessagesRequest(memory_id="bench-get", page_size=100)

    async def prepare(self) -> None:
        for memory_id in ("bench-add", "bench-get"):
            await self.stub.CreateMemory(pb.CreateMemoryRequest(memory_id=memory_id, kind=pb.MEMORY_KIND_IN_MEMORY))
        await self.stub.AddMessages(pb.AddMessagesRequest(memory_id="bench-get", messages=[message(i) for i in range(100)]))

    async def add(self) -> None:
        await self.stub.AddMessages(pb.AddMessagesRequest(
            memory_id="bench-add", messages=[self.add_message], request_id=f"r{next(self.counter)}"))

    async def get(self) -> None:
        response = await self.stub.GetMessages(self.get_request)
        assert len(response.messages) == 100


def _merge(rounds: list[dict[str, float]]) -> dict[str, float]:
    # The median round: other load on a shared machine comes and goes, so rounds of the
    # baseline and of the service are interleaved and the middle one of each is reported.
    return sorted(rounds, key=lambda r: r["p50_ms"])[len(rounds) // 2]


def against_echo(benchmark: str, concurrency: int, numbers: dict[str, float], base: dict[str, float]) -> dict:
    """A result row: `numbers` (a merged round) with the echo server's `base` and the ratios to it."""
    return {
        "benchmark": benchmark,
        "concurrency": concurrency,
        **{k: round(v, 4) for k, v in numbers.items()},
        "echo_p50_ms": round(base["p50_ms"], 4),
        "echo_ops_per_s": round(base["ops_per_s"], 1),
        "ratio_to_echo": round(numbers["p50_ms"] / base["p50_ms"], 3),
        "throughput_ratio_to_echo": round(numbers["ops_per_s"] / base["ops_per_s"], 3),
    }


async def run(results: list[dict]) -> None:
    echo_port, floor_port, port = free_port(), free_port(), free_port()
    echo_address, address = f"127.0.0.1:{echo_port}", f"127.0.0.1:{port}"
    floor_address = f"127.0.0.1:{floor_port}"
    with tempfile.TemporaryDirectory() as data:
        args = [str(BIN / "agentscope-memory"), "serve", "--port", str(port), "--data-dir", data,
                "--log-level", "WARNING"]
        with process([sys.executable, "-m", "bench.echo_server", str(echo_port)], echo_address, health=None), \
                process([sys.executable, "-m", "bench.floor_server", str(floor_port)], floor_address, health=None), \
                process(args, address):
            echo, floor, service = Workloads(echo_address), Workloads(floor_address), Workloads(address)
            await service.prepare()
            for name, pick in (("AddMessages", lambda w: w.add), ("GetMessages(100)", lambda w: w.get)):
                for concurrency, total in CALLS.items():
                    echo_rounds, floor_rounds, service_rounds = [], [], []
                    with_floor = name == "AddMessages"
                    for _ in range(ROUNDS):
                        echo_rounds.append(await measure(pick(echo), total, concurrency))
                        if with_floor:
                            floor_rounds.append(await measure(pick(floor), total, concurrency))
                        service_rounds.append(await measure(pick(service), total, concurrency))
                    base, numbers = _merge(echo_rounds), _merge(service_rounds)
                    if with_floor:
                        results.append(against_echo(f"{name} sqlite floor (SQL only)", concurrency,
                                                    _merge(floor_rounds), base))
                    results.append(against_echo(f"{name} sqlite", concurrency, numbers, base))
            for workloads in (echo, floor, service):
                await workloads.channel.close()
