"""Behaviours of AgentScope-Java 1.0.12's AutoContextMemory test suite (reference/autocontext.md
§15) that apply to a server, named after the upstream tests and run through gRPC against a real
server with the scripted OpenAI-compatible LLM."""

from __future__ import annotations

import json

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.short_term.auto_context.tokens import estimate_tokens
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from auto_context_helpers import A, TR, TU, U
from scripted_llm import ScriptedLLM, ScriptedReply

# AutoContextMemoryTest's default fixture.
FIXTURE = dict(msg_threshold=10, max_token=1000, token_ratio=0.75, last_keep=5, min_consecutive_tool_messages=3)


@pytest.fixture
def llm():
    with ScriptedLLM(default=ScriptedReply.text("SUMMARY")) as server:
        yield server


class Memory:
    def __init__(self, client: AsyncMemoryClient, stub: pb_grpc.MemoryServiceStub, memory_id: str) -> None:
        self.client, self.stub, self.id = client, stub, memory_id

    async def compress(self) -> pb.CompressIfNeededResponse:
        return await self.stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id=self.id))

    async def working(self) -> list[Msg]:
        return await self.client.get_messages(self.id)

    async def original(self) -> list[Msg]:
        out = await self.stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id=self.id))
        return [msg_from_proto(m) for m in out.messages]

    async def reload(self, uuid: str) -> pb.ReloadContextResponse:
        return await self.stub.ReloadContext(pb.ReloadContextRequest(memory_id=self.id, working_context_offload_uuid=uuid))

    async def events(self) -> list[pb.CompressionEvent]:
        return list((await self.stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id=self.id))).events)


@pytest.fixture
async def memory(server_factory, llm):
    server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0)
    client = AsyncMemoryClient(server.address)
    channel = grpc.aio.insecure_channel(server.address)
    stub = pb_grpc.MemoryServiceStub(channel)
    count = 0

    async def make(msgs: list[Msg] = (), **config) -> Memory:
        nonlocal count
        count += 1
        memory_id = f"ac-{count}"
        await client.create_memory(memory_id, "AUTO_CONTEXT", auto_context_config=AutoContextConfig(**config))
        if msgs:
            await client.add_messages(memory_id, list(msgs))
        return Memory(client, stub, memory_id)

    yield make
    await client.close()
    await channel.close()


def tool_pairs(n: int, name: str = "test_tool", output: str = "Result {i}") -> list[Msg]:
    out: list[Msg] = []
    for i in range(n):
        out += [TU(name, f"call_{i}"), TR(name, f"call_{i}", output.format(i=i))]
    return out


def offload_uuid(msg: Msg) -> str:
    return msg.metadata["_compress_meta"]["offloaduuid"]


def orphan_results(msgs: list[Msg]) -> list[str]:
    """Ids of tool results with no earlier tool call of the same id."""
    seen: set[str | None] = set()
    orphans = []
    for m in msgs:
        for b in m.content:
            if isinstance(b, ToolUseBlock):
                seen.add(b.id)
            elif isinstance(b, ToolResultBlock) and b.id not in seen:
                orphans.append(b.id)
    return orphans


async def test_add_message(memory) -> None:
    mem = await memory([U("hello")], **FIXTURE)
    assert [m.text_content for m in await mem.working()] == ["hello"]
    assert [m.text_content for m in await mem.original()] == ["hello"]


async def test_compression_triggered_by_message_count(memory, llm) -> None:
    msgs = [m for i in range(12) for m in (U(f"User message {i}"), A(f"Assistant response {i}"))]
    mem = await memory(msgs, **FIXTURE)
    out = await mem.compress()
    assert out.compressed and len(llm.requests) == 1
    last = (await mem.working())[-1]
    assert last.metadata["_compress_meta"]["compressed_current_round"] is True
    assert [e.event_type for e in out.events] == ["CURRENT_ROUND_MESSAGE_COMPRESS"]


async def test_summary_previous_round_conversation(memory, llm) -> None:
    llm.default = ScriptedReply.text("Conversation summary")
    msgs: list[Msg] = []
    for i in range(5):
        msgs += [U(f"User message {i}"), TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}"),
                 A(f"Assistant response {i}")]
    msgs.append(U("Final user message"))
    mem = await memory(msgs, msg_threshold=10, last_keep=2, min_consecutive_tool_messages=10,
                       large_payload_threshold=10000, min_compression_token_threshold=0)
    out = await mem.compress()
    assert out.compressed and len(llm.requests) == 4  # the 5th round holds the latest answer
    working = await mem.working()
    assert len(working) == 13 and len(await mem.original()) == 21
    summaries = [m for m in working if "Conversation summary" in m.text_content]
    assert len(summaries) == 4
    assert {e.event_type for e in out.events} == {"PREVIOUS_ROUND_CONVERSATION_SUMMARY"}
    # The offload of a round includes its user message (issue #1178 shape).
    reloaded = await mem.reload(offload_uuid(summaries[0]))
    assert reloaded.found and [msg_from_proto(m) for m in reloaded.messages] == msgs[0:4]


async def test_large_payload_offloading(memory, llm) -> None:
    msgs = [U("q1"), A("a1"), U("q2"), A("a2"), U("z" * 200), A("final"), *[U(f"after {i}") for i in range(5)]]
    mem = await memory(msgs, **{**FIXTURE, "large_payload_threshold": 100, "last_keep": 3})
    out = await mem.compress()
    assert out.compressed and not llm.requests
    working = await mem.working()
    stub = working[4]
    assert stub.text_content == "z" * 200 + "\n<!-- CONTEXT_OFFLOAD: uuid=" + offload_uuid(stub) + " -->"
    assert [e.event_type for e in out.events] == ["LARGE_MESSAGE_OFFLOAD_WITH_PROTECTION"]
    assert len(await mem.original()) == 11
    reloaded = await mem.reload(offload_uuid(stub))
    assert [msg_from_proto(m) for m in reloaded.messages] == [msgs[4]]


async def test_large_payload_counts_utf16_units_like_java(memory) -> None:
    # 60 emoji are 60 Python characters but 120 Java chars: over a threshold of 100.
    emoji = "\U0001F600" * 60
    msgs = [U("q1"), A("a1"), U(emoji), A("final"), *[U(f"after {i}") for i in range(5)]]
    mem = await memory(msgs, msg_threshold=5, last_keep=3, large_payload_threshold=100, offload_single_preview=7)
    out = await mem.compress()
    assert out.compressed
    stub = (await mem.working())[2]
    # A 7-unit preview cuts after three emoji and half of the fourth, as Java's substring does;
    # a lone surrogate cannot be stored, so the half becomes U+FFFD (one unit, as in Java).
    assert stub.text_content.startswith("\U0001F600" * 3 + "\ufffd...\n<!-- CONTEXT_OFFLOAD: uuid=")
    assert json.loads(out.events[0].metadata_json)["inputToken"] == estimate_tokens([msgs[2]]) == 5 + 2 + 2 + 48


async def test_summary_current_round_large_messages(memory, llm) -> None:
    llm.default = ScriptedReply.text("Compressed large message summary")
    msgs = [*[U(f"Initial message {i}") for i in range(8)], U("User query with large response"), A("x" * 200)]
    mem = await memory(msgs, msg_threshold=10, max_token=10000, token_ratio=0.9, last_keep=5,
                       min_consecutive_tool_messages=10, large_payload_threshold=100)
    out = await mem.compress()
    assert out.compressed and len(llm.requests) == 1
    working = await mem.working()
    assert len(working) == 10 and len(await mem.original()) == 10
    assert working[9].text_content.startswith("Compressed large message summary<!-- CONTEXT_OFFLOAD: uuid=")
    assert [e.event_type for e in out.events] == ["CURRENT_ROUND_LARGE_MESSAGE_SUMMARY"]


async def test_merge_and_compress_current_round_messages(memory, llm) -> None:
    msgs = [*[U(f"Initial message {i}") for i in range(8)], U("User query with tools"), *tool_pairs(2)]
    mem = await memory(msgs, msg_threshold=10, max_token=10000, token_ratio=0.9, last_keep=5,
                       min_consecutive_tool_messages=10, large_payload_threshold=10000, min_compression_token_threshold=0)
    out = await mem.compress()
    assert out.compressed and len(llm.requests) == 1
    working = await mem.working()
    assert len(working) == 10 and len(await mem.original()) == 13
    assert working[9].text_content.startswith("SUMMARY<!-- CONTEXT_OFFLOAD: uuid=")
    requirement = llm.requests[0].body["messages"][-1]["content"]
    assert "COMPRESSION REQUIREMENT" in requirement and "76" in requirement and "23" in requirement


async def test_summary_tools_messages_skip_when_below_token_threshold(memory, llm) -> None:
    msgs = [U("User query"), *tool_pairs(5), A("Assistant response"), *[U(f"Message {i}") for i in range(10)]]
    mem = await memory(msgs, **{**FIXTURE, "min_compression_token_threshold": 10000})
    out = await mem.compress()
    assert "TOOL_INVOCATION_COMPRESS" not in [e.event_type for e in out.events]
    working = await mem.working()
    assert sum(1 for m in working if m.role is MsgRole.TOOL or any(isinstance(b, ToolUseBlock) for b in m.content)) >= 10
    assert len(await mem.original()) == 22


async def test_compression_strategies_continue_when_tool_compression_skipped(memory, llm) -> None:
    msgs = [U("User query"), *tool_pairs(3, "skipped_tool", "ok"), U("x" * 200), A("Assistant response"),
            U("Padding message")]
    mem = await memory(msgs, msg_threshold=5, min_consecutive_tool_messages=2, large_payload_threshold=100, last_keep=2,
                       min_compression_token_threshold=10000)
    out = await mem.compress()
    assert out.compressed and not llm.requests
    working = await mem.working()
    assert sum(1 for m in working if m.name == "skipped_tool" or any(isinstance(b, ToolUseBlock) for b in m.content)) == 6
    assert "CONTEXT_OFFLOAD" in working[7].text_content


async def test_tool_compression_cursor_advances_when_skipped(memory, llm) -> None:
    msgs = [U("User query 1"), *tool_pairs(3, "short_tool", "ok"), U("User query 2"),
            *tool_pairs(3, "long_tool", "long_result_" * 1000), A("Assistant response"), U("Padding 1"), U("Padding 2")]
    mem = await memory(msgs, msg_threshold=5, min_consecutive_tool_messages=2, last_keep=2)
    out = await mem.compress()
    assert out.compressed and len(llm.requests) == 1
    working = await mem.working()
    assert sum(1 for m in working if m.name == "short_tool") == 3
    assert not [m for m in working if m.name == "long_tool" or any(
        isinstance(b, ToolUseBlock) and b.name == "long_tool" for b in m.content)]
    assert any(m.text_content.startswith("SUMMARY\n") for m in working)


async def test_large_tool_result_offload_preserves_id_and_name(memory) -> None:
    msgs = [U("User query"), TU("search", "call_tool_id_001"), TR("search", "call_tool_id_001", "y" * 200),
            A("Assistant final response"), U("Follow-up user question"), A("Follow-up assistant answer")]
    mem = await memory(msgs, msg_threshold=5, large_payload_threshold=50, last_keep=2, min_consecutive_tool_messages=100,
                       min_compression_token_threshold=2**31 - 1)
    assert (await mem.compress()).compressed
    working = await mem.working()
    (block,) = working[2].content
    assert isinstance(block, ToolResultBlock) and (block.id, block.name) == ("call_tool_id_001", "search")
    assert "CONTEXT_OFFLOAD" in block.output[0].text
    assert not orphan_results(working)


@pytest.mark.parametrize("profile", ["parity", "improved"],
                         ids=["parity", "improved"])
async def test_tool_call_pairing_integrity_after_mixed_offloading(memory, profile) -> None:
    msgs = [U("Start"), TU("search", "s1"), TR("search", "s1", "r" * 300), A("Found it"),
            U("q" * 400), TU("write", "w1"), TR("write", "w1", "written " * 50), A("Saved"),
            U("next"), TU("search", "s2"), TR("search", "s2", "small"), A("Done"), U("Thanks")]
    mem = await memory(msgs, msg_threshold=5, last_keep=3, large_payload_threshold=100, min_consecutive_tool_messages=100,
                       min_compression_token_threshold=2**31 - 1, profile=profile)
    for _ in range(4):
        await mem.compress()
        assert not orphan_results(await mem.working())


async def test_pre_reasoning_event_triggers_compression(memory, llm) -> None:
    msgs: list[Msg] = []
    for i in range(3):
        msgs += [U(f"User message {i}"), TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}"),
                 A(f"Assistant response {i}")]
    msgs.append(U("Final user message"))
    mem = await memory(msgs, msg_threshold=5, max_token=10000, token_ratio=0.9, last_keep=2,
                       min_consecutive_tool_messages=10, large_payload_threshold=10000, min_compression_token_threshold=0)
    out = await mem.stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id=mem.id))
    assert out.compressed and len(llm.requests) >= 1
    working = await mem.working()
    assert len(working) == 9
    given = [msg_from_proto(m) for m in out.messages]
    assert len(given) == len(working) + 1 and given[0].role is MsgRole.SYSTEM and given[1:] == working


async def test_pre_reasoning_event_no_compression(memory, llm) -> None:
    msgs = [U(f"Message {i}") for i in range(3)]
    mem = await memory(msgs, msg_threshold=100)
    out = await mem.stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id=mem.id))
    given = [msg_from_proto(m) for m in out.messages]
    assert not out.compressed and not llm.requests and given[1:] == msgs
    assert given[0].role is MsgRole.SYSTEM and given[0].name == "system" and "context_reload" in given[0].text_content


async def test_pre_reasoning_event_preserves_system_prompt(memory) -> None:
    mem = await memory([U("hi")], msg_threshold=100)
    out = await mem.stub.PrepareReasoningInput(
        pb.PrepareReasoningInputRequest(memory_id=mem.id, system_prompt="Base system prompt"))
    system = msg_from_proto(out.messages[0])
    assert system.text_content.startswith("Base system prompt\n\n") and "context_reload" in system.text_content
    assert len(system.content) == 1 and isinstance(system.content[0], TextBlock)


async def test_pre_reasoning_event_multiple_calls(memory, llm) -> None:
    mem = await memory([U(f"Message {i}") for i in range(6)], msg_threshold=5)
    first = await mem.stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id=mem.id))
    await mem.client.add_messages(mem.id, [U(f"More {i}") for i in range(6)])
    second = await mem.stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id=mem.id))
    assert (len(first.messages), len(second.messages)) == (7, 13)
    assert not first.compressed and not second.compressed and not llm.requests


async def test_successful_reload(memory) -> None:
    msgs = [U("User query"), *tool_pairs(5), A("Assistant response"), *[U(f"Message {i}") for i in range(10)]]
    mem = await memory(msgs, **{**FIXTURE, "min_compression_token_threshold": 0})
    await mem.compress()
    reloaded = await mem.reload(offload_uuid((await mem.working())[1]))
    got = [msg_from_proto(m) for m in reloaded.messages]
    assert reloaded.found and got == msgs[1:11]
    assert [m.role for m in got[:2]] == [MsgRole.ASSISTANT, MsgRole.TOOL]


@pytest.mark.parametrize("uuid", ["", "   ", "\t\n"], ids=["empty", "whitespace", "tab-newline"])
async def test_null_empty_and_whitespace_uuid(memory, uuid) -> None:
    mem = await memory()
    out = await mem.reload(uuid)
    (only,) = [msg_from_proto(m) for m in out.messages]
    assert not out.found and only.text_content == "Error: UUID cannot be null or empty."
    assert only.role is MsgRole.USER and only.name is None


async def test_non_existent_uuid(memory) -> None:
    mem = await memory()
    out = await mem.reload("00000000-0000-4000-8000-000000000000")
    (only,) = [msg_from_proto(m) for m in out.messages]
    assert not out.found
    assert only.text_content == ("No messages found for UUID: 00000000-0000-4000-8000-000000000000, "
                                 "The context may have been cleared or the UUID is invalid.")


async def test_reload_survives_clear(memory) -> None:
    # Java's clear() keeps the offload map and the events (quirk Q2).
    msgs = [U("User query"), *tool_pairs(5), A("Assistant response"), *[U(f"Message {i}") for i in range(10)]]
    mem = await memory(msgs, **{**FIXTURE, "min_compression_token_threshold": 0})
    await mem.compress()
    uuid = offload_uuid((await mem.working())[1])
    await mem.client.clear(mem.id)
    assert await mem.working() == [] and await mem.original() == []
    assert (await mem.reload(uuid)).found and len(await mem.events()) == 1


async def test_pre_reasoning_event_keeps_the_system_messages_name_and_metadata(memory) -> None:
    # D26 with a whole SYSTEM message: Java keeps its name and metadata, keeps only its text.
    from agentscope_memory.message import ImageBlock, URLSource
    from agentscope_memory.convert.to_proto import msg_to_proto

    mem = await memory([U(f"Message {i}") for i in range(3)], msg_threshold=100)
    system = Msg("sys-1", "planner", MsgRole.SYSTEM,
                 [TextBlock("Base system prompt"), ImageBlock(URLSource("https://x/y.png"), None, None)],
                 {"k": 1, "nested": {"a": [1, 2.5]}}, "T")
    out = await mem.stub.PrepareReasoningInput(
        pb.PrepareReasoningInputRequest(memory_id=mem.id, system_message=msg_to_proto(system)))
    given = [msg_from_proto(m) for m in out.messages]
    first = given[0]
    assert (first.role, first.name, first.metadata) == (MsgRole.SYSTEM, "planner", {"k": 1, "nested": {"a": [1, 2.5]}})
    assert len(first.content) == 1 and first.text_content.startswith("Base system prompt\n\n")
    assert "context_reload" in first.text_content and given[1:] == await mem.working()


@pytest.mark.parametrize("case", ["both", "not-system"])
async def test_pre_reasoning_input_rejects_a_bad_system_message(memory, case) -> None:
    from agentscope_memory.convert.to_proto import msg_to_proto

    mem = await memory([U("hi")], msg_threshold=100)
    role = MsgRole.SYSTEM if case == "both" else MsgRole.USER
    request = pb.PrepareReasoningInputRequest(
        memory_id=mem.id, system_message=msg_to_proto(Msg("s", "system", role, [TextBlock("x")], {}, "T")))
    if case == "both":
        request.system_prompt = "also"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await mem.stub.PrepareReasoningInput(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "system_message" in err.value.details()
