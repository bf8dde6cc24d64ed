"""AutoContextMemory: the cost of AddMessages + CompressIfNeeded when nothing triggers (it must
stay flat as the history grows), and a 1,000-message tool-using conversation compressed end to
end with a scripted OpenAI-compatible LLM, parity against improved profile in the same run
(summariser calls and tokens, tokens kept, recall of facts planted early)."""

from __future__ import annotations

import json
import re
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
PROFILES = {"parity": pb.AUTO_CONTEXT_PROFILE_PARITY, "improved": pb.AUTO_CONTEXT_PROFILE_IMPROVED}


# Facts planted early (English and Chinese, in user requests and tool results): the recall check
# asks whether each is still answerable from the working context plus `context_reload`.
FACTS = {
    0: ("user", "Remember: the deploy key id is K-4471."),
    1: ("user", "请记住：生产数据库的端口是 6543。"),
    2: ("tool", "Runner r9 reported build id 甲乙-88 as the last green build."),
    3: ("tool", "注意：缓存目录是 /var/cache/构建。"),
}
TAG = re.compile(r"CONTEXT_OFFLOAD: uuid=([0-9A-Za-z-]+)")


def conversation(n: int) -> list[Msg]:
    """User turns, each with a few tool calls whose results vary in size, and an answer."""
    msgs: list[Msg] = []
    turn = 0
    while len(msgs) < n:
        where, fact = FACTS.get(turn, ("", ""))
        note = f" {fact}" if where == "user" else ""
        msgs.append(Msg.create(MsgRole.USER, f"Turn {turn}: please check the build logs and fix what fails.{note}"))
        for call in range(3):
            cid = f"call_{turn}_{call}"
            msgs.append(Msg.create(MsgRole.ASSISTANT, content=[ToolUseBlock(cid, "read_file", {"path": f"logs/{turn}-{call}.txt"})], name="Assistant"))
            size = 6000 if call == 2 else 300
            out = ("log line " * size)[:size]
            if where == "tool" and call == 0:
                out = fact + "\n" + out
            msgs.append(Msg.create(MsgRole.TOOL, content=[ToolResultBlock(cid, "read_file", [TextBlock(out)])], name="Assistant"))
        msgs.append(Msg.create(MsgRole.ASSISTANT, f"Turn {turn}: fixed the failing step.", name="Assistant"))
        turn += 1
    return msgs[:n]


def _texts(msgs) -> list[str]:
    out = []
    for m in msgs:
        msg = msg_from_proto(m)
        out.append(msg.text_content or "")
        out += [t.text for b in msg.content if isinstance(b, ToolResultBlock) for t in b.output if isinstance(t, TextBlock)]
    return out


async def _recall(stub: pb_grpc.MemoryServiceStub, memory_id: str, working) -> int:
    """How many planted facts the model can still answer: the working context, plus every
    offload reachable through `context_reload` from a tag it sees (followed recursively)."""
    texts = _texts(working)
    queue = [u for t in texts for u in TAG.findall(t)]
    seen: set[str] = set()
    while queue:
        uuid = queue.pop()
        if uuid in seen:
            continue
        seen.add(uuid)
        token = ""
        while True:
            out = await stub.ReloadContext(pb.ReloadContextRequest(memory_id=memory_id, working_context_offload_uuid=uuid,
                                                                   page_token=token))
            found = _texts(out.messages)
            texts += found
            queue += [u for t in found for u in TAG.findall(t)]
            token = out.next_page_token
            if not token:
                break
    joined = "\n".join(texts)
    return sum(1 for _, fact in FACTS.values() if fact in joined)


def _summariser_tokens(llm: ScriptedLLM) -> int:
    """Tokens sent to the summariser, estimated as AgentScope-Java estimates (chars / 4)."""
    chars = 0
    for r in llm.chat_requests:
        for m in r.body.get("messages", []):
            content = m.get("content")
            chars += len(content) if isinstance(content, str) else len(json.dumps(content, ensure_ascii=False))
    return chars // 4


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
    msgs = conversation(1000)
    port = free_port()
    address = f"127.0.0.1:{port}"
    # One scripted model per profile, so each profile's calls are counted on their own.
    llms = {profile: ScriptedLLM(default=ScriptedReply.text(
        "Read three build logs; step 2 failed on a missing dependency, fixed by pinning it.")) for profile in PROFILES}
    try:
        for profile, pb_profile in PROFILES.items():
            llm = llms[profile]
            with tempfile.TemporaryDirectory() as data:
                args = [str(BIN / "agentscope-memory"), "serve", "--port", str(port), "--data-dir", data,
                        "--log-level", "WARNING"]
                env = {"AGENTSCOPE_MEMORY_LLM_BASE_URL": llm.base_url, "AGENTSCOPE_MEMORY_LLM_MODEL": "scripted"}
                with process(args, address, env_extra=env):
                    async with grpc.aio.insecure_channel(address) as channel:
                        stub = pb_grpc.MemoryServiceStub(channel)
                        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="e2e", kind=pb.MEMORY_KIND_AUTO_CONTEXT,
                                                                       auto_context_config=pb.AutoContextConfig(profile=pb_profile)))
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
                        recalled = await _recall(stub, "e2e", final.messages)
            results.append({"benchmark": f"AUTO_CONTEXT 1,000-msg tool conversation ({profile})", "seconds": round(elapsed, 2),
                            "llm_calls": len(llm.chat_requests), "summariser_tokens_sent": _summariser_tokens(llm),
                            "compressions": compressions, "tokens_before": estimate_tokens(msgs), "tokens_kept": after,
                            "messages_after": len(final.messages), "recall": f"{recalled}/{len(FACTS)}",
                            "recalled": recalled, "planted": len(FACTS)})
    finally:
        for llm in llms.values():
            llm.close()


async def run(results: list[dict]) -> None:
    await _flat_cost(results)
    await _end_to_end(results)
