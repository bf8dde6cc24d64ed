"""Long-term memory: Record and Retrieve latency at 1,000 and 10,000 stored memories, embedder
throughput, and server start-up time with mem0 and the embedder loaded.

Record/Retrieve are measured through gRPC against a real server; the stored memories are
put in through the same server in batches (the embedder is the cost there).
"""

from __future__ import annotations

import itertools
import random
import sys
import tempfile
import time
from collections.abc import Iterator

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msg_to_proto
from bench.harness import BIN, free_port, measure, process

SIZES = (1_000, 10_000)
SUBJECTS = ["tea", "coffee", "hiking", "chess", "Paris", "Kyoto", "jazz", "the cello", "Go", "Rust",
            "dark mode", "peanuts", "cats", "dogs", "cycling", "Lisbon", "painting", "sushi", "Mandarin", "oboe"]
VERBS = ["likes", "dislikes", "is learning", "often talks about", "is allergic to", "wants to visit", "owns", "avoids"]


def fact(i: int) -> str:
    rng = random.Random(i)
    return f"User {rng.choice(VERBS)} {rng.choice(SUBJECTS)} (note {i})"


def _embedder_throughput(results: list[dict]) -> None:
    started = time.perf_counter()
    embedder = MiniLMEmbedder()
    load_s = time.perf_counter() - started
    texts = [fact(i) for i in range(512)]
    embedder.embed(texts[:32])
    for batch, label in ((1, "one at a time"), (32, "batches of 32")):
        started = time.perf_counter()
        if batch == 1:
            for text in texts[:128]:
                embedder.embed([text])
            count = 128
        else:
            embedder.embed(texts)
            count = len(texts)
        elapsed = time.perf_counter() - started
        results.append({"benchmark": f"MiniLM embedder ({label})", "ops_per_s": round(count / elapsed, 1),
                        "p50_ms": round(elapsed / count * 1000, 3), "load_s": round(load_s, 3)})


async def run(results: list[dict]) -> None:
    _embedder_throughput(results)
    port = free_port()
    address = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        args = [str(BIN / "agentscope-memory"), "serve", "--port", str(port), "--data-dir", data, "--log-level", "WARNING"]
        started = time.perf_counter()
        with process(args, address):
            async with grpc.aio.insecure_channel(address) as channel:
                stub = pb_grpc.LongTermMemoryServiceStub(channel)
                # Start-up is ready when a long-term call is answered (mem0 + embedder loaded).
                await stub.ListTools(pb.ListToolsRequest())
                await stub.Retrieve(pb.RetrieveRequest(scope=pb.Scope(user_id="warm"), message=msg_to_proto(
                    Msg.create(MsgRole.USER, "warm up"))))
                startup_s = time.perf_counter() - started
                results.append({"benchmark": "server start-up incl. mem0 + embedder", "seconds": round(startup_s, 2)})
                scope = pb.Scope(user_id="bench")
                stored = 0
                counter = itertools.count(10_000_000)
                for size in SIZES:
                    while stored < size:
                        batch = [msg_to_proto(Msg.create(MsgRole.USER, fact(stored + j))) for j in range(min(100, size - stored))]
                        await stub.Record(pb.RecordRequest(scope=scope, messages=batch), timeout=600)
                        stored += len(batch)

                    async def record() -> None:
                        await stub.Record(pb.RecordRequest(scope=scope, messages=[
                            msg_to_proto(Msg.create(MsgRole.USER, fact(next(counter))))]))

                    queries = itertools.cycle(f"what does the user think about {s}" for s in SUBJECTS)

                    async def retrieve(queries: Iterator[str] = queries) -> None:
                        await stub.Retrieve(pb.RetrieveRequest(scope=scope, message=msg_to_proto(
                            Msg.create(MsgRole.USER, next(queries)))))

                    for name, call in (("Record (1 message)", record), ("Retrieve (top 5)", retrieve)):
                        numbers = await measure(call, 200, 1)
                        results.append({"benchmark": f"LTM {name} @ {size} stored", "concurrency": 1,
                                        **{k: round(v, 3) for k, v in numbers.items()}})
                    stored += 200  # the measured records
    print("long-term benchmark done", file=sys.stderr)
