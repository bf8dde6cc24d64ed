"""AutoContextMemory: the cost of AddMessages + CompressIfNeeded when nothing triggers (it must
stay flat as the history grows), and a 1,000-message tool-using conversation compressed end to
end with a scripted OpenAI-compatible LLM."""

from __future__ import annotations

import sys
import tempfile
import time

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.short_term.auto_context.tokens import estimate_tokens
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.convert.to_proto import msg_to_proto
from bench.harness import BIN, REPO, free_port, measure, process
from bench.workload import message

sys.path.insert(0, str(REPO / "tests"))
from scripted_llm import ScriptedLLM, ScriptedReply

SIZES = (10, 1_000, 10_000)
NEVER = pb.AutoContextConfig(msg_threshold=2**31 - 1, max_token=2**62)


def conversation(n: int) -> list[Msg]:
    """User turns, each with a few tool calls whose results vary in size, and an answer."""
    msgs: list[Msg] = []
    turn = 0
    while len(msgs) < n:
        msgs.append(Msg.create(MsgRole.USER, f"Turn {turn}: please check the build logs and fix what fails."))
        for call in range(3):
            cid = f"call_{turn}_{call}"
            msgs.append(Msg.create(MsgRole.ASSISTANT, content=[ToolUseBlock(cid, "read_file", {"path": f"logs/{turn}-{call}.txt"})], name="Assistant"))
            size = 6000 if call == 2 else 300
            msgs.append(Msg.create(MsgRole.TOOL, content=[ToolResultBlock(cid, "read_file", [TextBlock(("log line " * size)[:size])])], name="Assistant"))
        msgs.append(Msg.create(MsgRole.ASSISTANT, f"Turn {turn}: fixed the failing step.", name="Assistant"))
        turn += 1
    return msgs[:n]


async def _flat_cost(results: list[dict]) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        args = [str(BIN / "agentscope-memory"), "serve", "--port", str(port), "--data-dir", data, "--log-level", "WARNING"]
        with process(args, address):
            async with grpc.aio.insecure_channel(address) as channel:
                stub = pb_grpc.MemoryServiceStub(channel)
                for size in SIZES:
                    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=f"plain-{size}", kind=pb.MEMORY_KIND_IN_MEMORY))
                    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=f"ac-{size}", kind=pb.MEMORY_KIND_AUTO_CONTEXT, auto_context_config=NEVER))
                    for memory_id in (f"plain-{size}", f"ac-{size}"):
                        for start in range(0, size, 1000):
                            await stub.AddMessages(pb.AddMessagesRequest(memory_id=memory_id, messages=[message(i) for i in range(start, min(size, start + 1000))]))
                    one = message(0)

                    async def plain_add(memory_id: str = f"plain-{size}", one: pb.Msg = one) -> None:
                        await stub.AddMessages(pb.AddMessagesRequest(memory_id=memory_id, messages=[one]))

                    async def ac_add(memory_id: str = f"ac-{size}", one: pb.Msg = one) -> None:
                        await stub.AddMessages(pb.AddMessagesRequest(memory_id=memory_id, messages=[one]))
                        await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id=memory_id))

                    base = await measure(plain_add, 600, 1)
                    numbers = await measure(ac_add, 600, 1)
                    results.append({"benchmark": f"AUTO_CONTEXT add+check @ {size} msgs", "concurrency": 1,
                                    **{k: round(v, 4) for k, v in numbers.items()},
                                    "in_memory_add_p50_ms": round(base["p50_ms"], 4),
                                    "ratio_to_in_memory_add": round(numbers["p50_ms"] / base["p50_ms"], 3)})


async def _end_to_end(results: list[dict]) -> None:
    stub_llm = ScriptedLLM(default=ScriptedReply.text("Read three build logs; step 2 failed on a missing dependency, fixed by pinning it."))
    port = free_port()
    address = f"127.0.0.1:{port}"
    msgs = conversation(1000)
    try:
        with tempfile.TemporaryDirectory() as data:
            args = [str(BIN / "agentscope-memory"), "serve", "--port", str(port), "--data-dir", data,
                    "--log-level", "WARNING"]
            llm = {"AGENTSCOPE_MEMORY_LLM_BASE_URL": stub_llm.base_url, "AGENTSCOPE_MEMORY_LLM_MODEL": "scripted"}
            with process(args, address, env_extra=llm):
                async with grpc.aio.insecure_channel(address) as channel:
                    stub = pb_grpc.MemoryServiceStub(channel)
                    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="e2e", kind=pb.MEMORY_KIND_AUTO_CONTEXT))
                    started = time.perf_counter()
                    compressions = 0
                    for msg in msgs:
                        await stub.AddMessages(pb.AddMessagesRequest(memory_id="e2e", messages=[msg_to_proto(msg)]))
                        # The hook checks before every reasoning step, i.e. after each message here.
                        out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="e2e"))
                        compressions += out.compressed
                    elapsed = time.perf_counter() - started
                    final = await stub.GetMessages(pb.GetMessagesRequest(memory_id="e2e"))
                    after = estimate_tokens(msg_from_proto(m) for m in final.messages)
        results.append({"benchmark": "AUTO_CONTEXT 1,000-msg tool conversation", "seconds": round(elapsed, 2),
                        "model_calls": len(stub_llm.requests), "compressions": compressions,
                        "tokens_before": estimate_tokens(msgs), "tokens_after": after,
                        "messages_after": len(final.messages)})
    finally:
        stub_llm.close()


async def run(results: list[dict]) -> None:
    await _flat_cost(results)
    await _end_to_end(results)
