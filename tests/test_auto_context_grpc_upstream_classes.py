"""Behaviours of AgentScope-Java 1.0.12's AutoContextMemoryTest / ContextOffloadToolTest /
AutoContextConfigTest that apply to a server, named after the upstream tests."""

from __future__ import annotations

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.short_term.auto_context.config import AutoContextConfig, PromptConfig
from agentscope_memory.short_term.auto_context.engine import PlanNote, PlanSubtask, is_tool_result, is_tool_use
from agentscope_memory.short_term.auto_context.prompts import tool_compress_prompt
from agentscope_memory.message import ToolResultBlock, ToolUseBlock
from auto_context_helpers import A, TR, TU, U, ScriptedSummarizer, compressor, state

DEFAULT = dict(msg_threshold=10, max_token=1000, token_ratio=0.75, last_keep=5, min_consecutive_tool_messages=3)


@pytest.fixture
async def memory(server):
    async with AsyncMemoryClient(server.address) as client, grpc.aio.insecure_channel(server.address) as channel:
        await client.create_memory("ac", "AUTO_CONTEXT", auto_context_config=AutoContextConfig(msg_threshold=10, last_keep=5))
        yield client, pb_grpc.MemoryServiceStub(channel)


def test_default_values() -> None:
    c = AutoContextConfig()
    assert (c.large_payload_threshold, c.max_token, c.token_ratio, c.offload_single_preview, c.msg_threshold,
            c.last_keep, c.min_consecutive_tool_messages, c.current_round_compression_ratio,
            c.min_compression_token_threshold) == (5120, 131072, 0.75, 200, 100, 50, 6, 0.3, 5000)
    assert c.token_threshold == 98304 and c.custom_prompt == PromptConfig()


async def test_add_message_and_dual_storage_mechanism(memory) -> None:
    client, stub = memory
    msgs = [U(f"m{i}") for i in range(5)]
    await client.add_messages("ac", msgs)
    assert await client.get_messages("ac") == msgs
    original = await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="ac"))
    assert len(original.messages) == 5


async def test_delete_message_and_invalid_index(memory) -> None:
    client, stub = memory
    msgs = [U("a"), U("b"), U("c")]
    await client.add_messages("ac", msgs)
    assert await client.delete_message("ac", 1) is True
    assert await client.delete_message("ac", 10) is False and await client.delete_message("ac", -1) is False
    assert await client.get_messages("ac") == [msgs[0], msgs[2]]
    # Working only: the original history keeps all three.
    assert len((await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="ac"))).messages) == 3


async def test_clear_keeps_offloads_and_events(server) -> None:
    async with AsyncMemoryClient(server.address) as client, grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await client.create_memory("ac", "AUTO_CONTEXT", auto_context_config=AutoContextConfig(
            msg_threshold=5, last_keep=4, large_payload_threshold=100))
        await client.add_messages("ac", [U("a"), A("b"), U("y" * 300), A("ok"), U("next")])
        assert (await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))).compressed
        await client.clear("ac")
        assert await client.get_messages("ac") == []
        assert len((await stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id="ac"))).events) == 1
        keys = [e.key for e in (await client.save_state("ac"))[0]]
        assert "autoContextMemory_offloadContext" in keys  # Java quirk Q2, kept for parity


async def test_empty_message_list(memory) -> None:
    client, _ = memory
    assert await client.get_messages("ac") == []


async def test_get_messages_below_threshold_never_compresses(memory) -> None:
    client, stub = memory
    await client.add_messages("ac", [U(f"m{i}") for i in range(5)])
    assert not (await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))).compressed


async def test_summary_previous_round_conversation() -> None:
    c, model = compressor(ScriptedSummarizer(text="Conversation summary"), msg_threshold=10, last_keep=2,
                          min_consecutive_tool_messages=10, large_payload_threshold=10000, min_compression_token_threshold=0)
    msgs = []
    for i in range(5):
        msgs += [U(f"q{i}"), TU("t", f"c{i}"), TR("t", f"c{i}", f"r{i}"), A(f"a{i}")]
    st = state(msgs + [U("last")])
    assert await c.compress_if_needed(st) is True
    assert len(model.calls) >= 4 and len(st.working) == 13 and st.offload
    assert any("Conversation summary" in m.text_content for m in st.working)


async def test_last_keep_protection() -> None:
    c, model = compressor(**{**DEFAULT, "last_keep": 3})
    st = state([U(f"m{i}") for i in range(15)])
    assert await c.compress_if_needed(st) is False and len(st.working) == 15 and not model.calls


async def test_large_payload_offloading_skips_assistant_tool_use_message() -> None:
    c, _ = compressor(msg_threshold=5, large_payload_threshold=50, last_keep=2, min_consecutive_tool_messages=100,
                      min_compression_token_threshold=2**31 - 1)
    call = TU("search", "big", {"query": "x" * 200})
    st = state([U("q"), call, TR("search", "big", "y" * 200), A("final"), U("follow"), A("answer")])
    await c.compress_if_needed(st)
    assert st.working[1] is call
    for i, m in enumerate(st.working):
        if is_tool_result(m):
            assert any(is_tool_use(p) for p in st.working[:i])


async def test_tool_compression_cursor_advances_when_skipped() -> None:
    c, model = compressor(msg_threshold=5, min_consecutive_tool_messages=2, last_keep=2)
    msgs = [U("q1")] + [m for i in range(3) for m in (TU("short_tool", f"a{i}"), TR("short_tool", f"a{i}", "ok"))]
    msgs += [U("q2")] + [m for i in range(3) for m in (TU("long_tool", f"b{i}"), TR("long_tool", f"b{i}", "long_result_" * 1000))]
    st = state(msgs + [A("done"), U("p1"), U("p2")])
    assert await c.compress_if_needed(st) is True and len(model.calls) == 1
    names = [b.name for m in st.working for b in m.content if isinstance(b, (ToolUseBlock, ToolResultBlock))]
    assert names.count("short_tool") == 6 and "long_tool" not in names


def test_custom_prompt_is_used_unless_blank() -> None:
    assert tool_compress_prompt(PromptConfig(previous_round_tool_compress_prompt="MINE")) == "MINE"
    assert "expert content compression specialist" in tool_compress_prompt(PromptConfig(previous_round_tool_compress_prompt=" \t\n"))


def test_plan_state_context() -> None:
    assert PlanNote("Test Description", "Test Outcome").hint() == (
        "<plan_aware_hint>\nGoal: Test Description\nExpected Outcome: Test Outcome\n\n</plan_aware_hint>")
    hint = PlanNote("D", "O", [PlanSubtask("Task 1", "in_progress"), PlanSubtask("Task 2", "done"), PlanSubtask("Task 3", "todo")]).hint()
    assert "Current Progress: Task 1\n" in hint and "Progress: 1/3 subtasks completed" in hint
    assert PlanNote("", "", [PlanSubtask("x", "done")]).hint() == "<plan_aware_hint>\nProgress: 1/1 subtasks completed\n\n</plan_aware_hint>"


async def test_custom_prompt_reaches_the_model() -> None:
    c, model = compressor(custom_prompt=PromptConfig(previous_round_tool_compress_prompt="CUSTOM S1"),
                          msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    msgs = [U("q")] + [m for i in range(5) for m in (TU("t", f"c{i}"), TR("t", f"c{i}", f"r{i}"))] + [A("done")]
    await c.compress_if_needed(state(msgs))
    assert model.calls[0][0].text_content == "CUSTOM S1"


async def test_multiple_offloaded_contexts_reload_independently(server) -> None:
    async with AsyncMemoryClient(server.address) as client, grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await client.create_memory("ac", "AUTO_CONTEXT", auto_context_config=AutoContextConfig(
            msg_threshold=5, last_keep=2, large_payload_threshold=100))
        big = [U("a" * 300), A("x"), U("b" * 300), A("y"), U("c" * 300), A("z"), U("p"), U("q")]
        await client.add_messages("ac", big)
        await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
        stubs = [m for m in await client.get_messages("ac") if "_compress_meta" in m.metadata]
        assert len(stubs) == 3
        for s in stubs:
            got = await stub.ReloadContext(pb.ReloadContextRequest(
                memory_id="ac", working_context_offload_uuid=s.metadata["_compress_meta"]["offloaduuid"]))
            assert got.found and len(got.messages) == 1
            assert got.messages[0].content[0].text.text[:1] * 300 == got.messages[0].content[0].text.text
