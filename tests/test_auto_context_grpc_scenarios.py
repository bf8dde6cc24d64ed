"""Scenarios D1-D23 of reference/autocontext.md §21 through gRPC against a real server with the
scripted OpenAI-compatible LLM, compared with the library engine run on the same input.

The engine's own tests (test_auto_context_lib_scenarios.py) check each scenario's exact expected lists;
this module proves the server gives the same result: same working list (ids of new messages,
offload uuids and timestamps normalised by order of appearance), same events, same number of
model calls with the same text sent to the model.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.short_term.auto_context.summarizers import render
from agentscope_memory.message import Msg, MsgRole, msg_to_dict
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from auto_context_helpers import A, TR, TU, U, ScriptedSummarizer, compressor, state
from scripted_llm import ScriptedLLM, ScriptedReply

INT_MAX = 2**31 - 1
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _tools(name: str, prefix: str, n: int, output: Callable[[int], str]) -> list[Msg]:
    out: list[Msg] = []
    for i in range(n):
        out += [TU(name, f"{prefix}{i}"), TR(name, f"{prefix}{i}", output(i))]
    return out


def d3() -> list[Msg]:
    return [U("User query"), *_tools("test_tool", "call_", 5, lambda i: f"Result {i}"), A("Assistant response"),
            *[U(f"Message {i}") for i in range(10)]]


def d5() -> list[Msg]:
    return [U("User query 1"), *_tools("short_tool", "a_", 3, lambda i: "ok"), U("User query 2"),
            *_tools("long_tool", "b_", 3, lambda i: "long_result_" * 1000), A("Assistant response"),
            U("Padding 1"), U("Padding 2")]


def d6() -> list[Msg]:
    return [U("User query"), *_tools("skipped_tool", "id_", 3, lambda i: "ok"), U("x" * 200),
            A("Assistant response"), U("Padding message")]


def d8(large_call: bool = False) -> list[Msg]:
    if large_call:
        call, result = TU("search", "call_large", {"query": "x" * 200}), TR("search", "call_large", "tool output")
    else:
        call, result = TU("search", "call_tool_id_001"), TR("search", "call_tool_id_001", "y" * 200)
    return [U("User query"), call, result, A("Assistant final response"), U("Follow-up user question"),
            A("Follow-up assistant answer")]


def d13() -> list[Msg]:
    msgs: list[Msg] = []
    for i in range(3):
        msgs += [U(f"User message {i}"), TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}"),
                 A(f"Assistant response {i}")]
    return msgs + [U("Final user message")]


def d17() -> list[Msg]:
    from agentscope_memory.message import TextBlock, ToolUseBlock

    big = Msg("m-d17", "assistant", MsgRole.ASSISTANT,
              [TextBlock("x" * 200), ToolUseBlock("call_001", "search", {}, None, {})], {}, "T")
    return [*[U(f"Message {i}") for i in range(8)], U("User query"), big]


def d18() -> list[Msg]:
    from agentscope_memory.message import TextBlock, ToolUseBlock

    call = Msg("m-d18", "assistant", MsgRole.ASSISTANT,
               [TextBlock("Let me search"), ToolUseBlock("call_tr_001", "search", {}, None, {})], {}, "T")
    return [*[U(f"Message {i}") for i in range(8)], U("User query"), call, TR("search", "call_tr_001", "y" * 200)]


def d23() -> list[Msg]:
    return [U("User query"), TU("create_plan", "plan_call_1"), TR("create_plan", "plan_call_1", "Plan created"),
            TU("test_tool", "call_1"), TR("test_tool", "call_1", "Result 1"), TU("test_tool", "call_2"),
            TR("test_tool", "call_2", "Result 2"), A("Assistant response"), *[U(f"Message {i}") for i in range(10)]]


D1_13_CFG = dict(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3)
S4_CFG = dict(msg_threshold=5, max_token=10000, token_ratio=0.9, last_keep=2, min_consecutive_tool_messages=10,
              large_payload_threshold=10000, min_compression_token_threshold=0)
S5_CFG = dict(msg_threshold=10, large_payload_threshold=100, last_keep=5, min_consecutive_tool_messages=100,
              min_compression_token_threshold=INT_MAX)
D8_CFG = dict(msg_threshold=5, large_payload_threshold=50, last_keep=2, min_consecutive_tool_messages=100,
              min_compression_token_threshold=INT_MAX)

SCENARIOS: dict[str, tuple[dict[str, Any], Callable[[], list[Msg]], str]] = {
    "d1": (dict(msg_threshold=10), lambda: [U(f"Message {i}") for i in range(5)], "SUMMARY"),
    "d2": (dict(msg_threshold=10, max_token=1000, last_keep=5, min_consecutive_tool_messages=3),
           lambda: [U(f"Message {i}") for i in range(12)], "SUMMARY"),
    "d3": ({**D1_13_CFG, "min_compression_token_threshold": 0}, d3, "SUMMARY"),
    "d4": (D1_13_CFG, d3, "SUMMARY"),
    "d5": (dict(msg_threshold=5, min_consecutive_tool_messages=2, last_keep=2), d5, "SUMMARY"),
    "d6": (dict(msg_threshold=5, min_consecutive_tool_messages=2, large_payload_threshold=100, last_keep=2,
                min_compression_token_threshold=10000), d6, "SUMMARY"),
    "d7": (dict(msg_threshold=5, last_keep=4, large_payload_threshold=100),
           lambda: [U("a"), A("b"), U("y" * 300), A("ok"), U("next")], "SUMMARY"),
    "d8": (D8_CFG, d8, "SUMMARY"),
    "d9": (D8_CFG, lambda: d8(large_call=True), "SUMMARY"),
    "d10": (dict(msg_threshold=10, min_consecutive_tool_messages=3, last_keep=5, min_compression_token_threshold=0),
            lambda: [U("User query"), *_tools("test_tool", "call_", 5, lambda i: f"Result {i}"), A("Assistant response")],
            "SUMMARY"),
    "d11": (dict(msg_threshold=5, last_keep=1, min_compression_token_threshold=0, min_consecutive_tool_messages=3),
            lambda: [U("q"), TU("t", "a"), TR("t", "a", "ra"), TU("t", "b"), TR("t", "b", "rb"), A("done"), U("next")],
            "SUMMARY"),
    "d12": (dict(msg_threshold=5, last_keep=1, min_consecutive_tool_messages=3, min_compression_token_threshold=0),
            lambda: [U("q"), TR("t", "x", "orphan"), TU("t", "a"), TR("t", "a", "ra"), TU("t", "b"), TR("t", "b", "rb"),
                     TU("t", "c"), A("done"), U("next")], "SUMMARY"),
    "d13": (S4_CFG, d13, "SUMMARY"),
    "d14": (dict(msg_threshold=5, last_keep=1, min_consecutive_tool_messages=10, large_payload_threshold=10000,
                 min_compression_token_threshold=0),
            lambda: [U("u1"), U("u2"), TU("t", "a"), TR("t", "a", "r"), A("a1"), U("u3"), A("a3"), U("u4")], "SUMMARY"),
    "d15": ({**S4_CFG, "min_compression_token_threshold": 5000}, d13, "SUMMARY"),
    "d16": (dict(msg_threshold=10, max_token=10000, token_ratio=0.9, last_keep=5, min_consecutive_tool_messages=10,
                 large_payload_threshold=100),
            lambda: [*[U(f"Initial message {i}") for i in range(8)], U("User query with large response"), A("x" * 200)],
            "Compressed large message summary"),
    "d17": (S5_CFG, d17, "SUMMARY"),
    "d18": (S5_CFG, d18, "SUMMARY"),
    "d19": (dict(msg_threshold=10, max_token=10000, token_ratio=0.9, last_keep=5, min_consecutive_tool_messages=10,
                 large_payload_threshold=10000, min_compression_token_threshold=0),
            lambda: [*[U(f"Initial message {i}") for i in range(8)], U("User query with tools"),
                     *_tools("test_tool", "call_", 2, lambda i: f"Result {i}")], "SUMMARY"),
    "d20": (dict(msg_threshold=4, large_payload_threshold=10000),
            lambda: [U("q"), TU("t", "a"), TR("t", "a", "ra"), TU("t", "b")], "SUMMARY"),
    "d21": (dict(msg_threshold=2), lambda: [U("q"), TU("t", "a")], "SUMMARY"),
    "d22": (dict(msg_threshold=10, max_token=1000, last_keep=5, min_consecutive_tool_messages=3),
            lambda: [m for i in range(12) for m in (U(f"User message {i}"), A(f"Assistant response {i}"))], "SUMMARY"),
    "d23": (dict(msg_threshold=10, max_token=10000, token_ratio=0.9, last_keep=5, min_consecutive_tool_messages=3,
                 min_compression_token_threshold=0), d23, "SUMMARY"),
}


class _Normaliser:
    """Replaces generated ids/uuids by placeholders in order of first appearance, so two runs
    with different random uuids compare equal exactly when their structure is the same."""

    def __init__(self, known_ids: set[str]) -> None:
        self.known = known_ids
        self.names: dict[str, str] = {}

    def name(self, value: str) -> str:
        return self.names.setdefault(value, f"<gen{len(self.names)}>")

    def id(self, value: str | None) -> str | None:
        return value if value is None or value in self.known else self.name(value)

    def text(self, value: str) -> str:
        return UUID.sub(lambda m: self.name(m.group(0)), value)

    def msg(self, msg: Msg) -> dict[str, Any]:
        data = msg_to_dict(msg)
        data["id"] = self.id(msg.id)
        data["timestamp"] = None
        usage = data["metadata"].get("_chat_usage")
        if isinstance(usage, dict):
            data["metadata"]["_chat_usage"] = {k: usage[k] for k in ("inputTokens", "outputTokens")}
        return json.loads(self.text(json.dumps(data, sort_keys=True)))


def _chat_view(messages: list[Msg]) -> list[tuple[str, str]]:
    # What LlmSummarizer sends for an envelope: the role it maps to and the rendered text.
    role = {MsgRole.ASSISTANT: "assistant", MsgRole.SYSTEM: "system"}
    return [(role.get(m.role, "user"), render(m)) for m in messages]


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM(default=ScriptedReply.text("SUMMARY")) as server:
        yield server


@pytest.fixture
async def grpc_server(server_factory, llm):
    server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0)
    client = AsyncMemoryClient(server.address)
    channel = grpc.aio.insecure_channel(server.address)
    yield client, pb_grpc.MemoryServiceStub(channel)
    await client.close()
    await channel.close()


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario_through_grpc_matches_the_engine(name, grpc_server, llm) -> None:
    config, build, model_text = SCENARIOS[name]
    client, stub = grpc_server
    msgs = build()

    engine, model = compressor(ScriptedSummarizer(text=model_text), **config)
    st = state(msgs)
    expected_compressed = await engine.compress_if_needed(st)

    llm.default = ScriptedReply.text(model_text)
    llm.requests.clear()
    await client.create_memory(name, "AUTO_CONTEXT", auto_context_config=AutoContextConfig(**config))
    await client.add_messages(name, msgs)
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id=name))
    working = await client.get_messages(name)

    assert out.compressed is expected_compressed
    assert out.message_count == len(st.working) == len(working)
    known = {m.id for m in msgs}
    mine, theirs = _Normaliser(known), _Normaliser(known)
    assert [theirs.msg(m) for m in working] == [mine.msg(m) for m in st.working]
    # Event metadata: token figures exactly; a model call's `time` is measured, so only its type.
    def meta(data: dict[str, Any]) -> dict[str, Any]:
        return {k: (type(v).__name__ if k == "time" and v else v) for k, v in data.items()}

    got_events = [(e.event_type, e.compressed_message_count, theirs.id(e.previous_message_id or None),
                   theirs.id(e.next_message_id or None), theirs.id(e.compressed_message_id or None),
                   meta(json.loads(e.metadata_json or "{}")))
                  for e in out.events]
    want_events = [(e.event_type, e.compressed_message_count, mine.id(e.previous_message_id),
                    mine.id(e.next_message_id), mine.id(e.compressed_message_id), meta(e.metadata))
                   for e in st.events]
    assert got_events == want_events
    # The model was asked the same things, in the same order.
    sent = [[(m["role"], theirs.text(m["content"])) for m in r.body["messages"]] for r in llm.requests]
    assert sent == [[(role, mine.text(text)) for role, text in _chat_view(call)] for call in model.calls]
    # Original history is never touched by a compression.
    original = await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id=name))
    assert original.total_size == len(msgs)
