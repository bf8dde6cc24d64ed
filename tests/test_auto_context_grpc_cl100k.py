"""Token counts reported by CompressIfNeeded: Java's estimate in parity, real cl100k counts when an
improved-profile memory asks for them, kept as running totals (no re-count when not triggered)."""

from __future__ import annotations

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.short_term.auto_context.tokens import Cl100kCounter, estimate_tokens
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from auto_context_helpers import A, TR, TU, U
from scripted_llm import ScriptedLLM, ScriptedReply


@pytest.fixture
async def stubs(server_factory):
    with ScriptedLLM(default=ScriptedReply.text("SUMMARY")) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0)
        client = AsyncMemoryClient(server.address)
        channel = grpc.aio.insecure_channel(server.address)
        yield client, pb_grpc.MemoryServiceStub(channel)
        await client.close()
        await channel.close()


def conversation():
    msgs = [U("User query: what is in the build log? 日本語のテキストも含む 😀")]
    for i in range(5):
        msgs += [TU("read_file", f"call_{i}", {"path": f"logs/{i}.txt"}), TR("read_file", f"call_{i}", f"line {i} " * 40)]
    return msgs + [A("The build failed at step 3.")] + [U(f"Message {i}") for i in range(10)]


async def test_cl100k_totals_follow_adds_deletes_and_compressions(stubs) -> None:
    client, stub = stubs
    counter = Cl100kCounter()
    config = AutoContextConfig(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3,
                                  min_compression_token_threshold=0, profile="improved",
                                  token_counter="cl100k")
    await client.create_memory("real", "AUTO_CONTEXT", auto_context_config=config)
    msgs = conversation()
    await client.add_messages("real", msgs[:8])
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="real"))
    assert not out.compressed
    assert out.tokens_before == out.tokens_after == counter.count(msgs[:8]) != estimate_tokens(msgs[:8])
    assert await client.delete_message("real", 0)
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="real"))
    assert out.tokens_before == counter.count(msgs[1:8])

    await client.clear("real")
    await client.add_messages("real", msgs)
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="real"))
    assert out.compressed and out.tokens_before == counter.count(msgs)
    working = await client.get_messages("real")
    assert out.tokens_after == counter.count(working) < out.tokens_before
    # After the compression the running total is the compressed history's.
    await client.delete_message("real", len(working) - 1)
    again = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="real"))
    assert again.tokens_before == counter.count(working[:-1])


async def test_parity_reports_javas_estimate(stubs) -> None:
    client, stub = stubs
    await client.create_memory("java", "AUTO_CONTEXT", auto_context_config=AutoContextConfig(msg_threshold=100))
    msgs = conversation()
    await client.add_messages("java", msgs)
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="java"))
    assert not out.compressed and out.tokens_before == estimate_tokens(msgs)
