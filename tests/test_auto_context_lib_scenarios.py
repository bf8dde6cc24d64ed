"""AgentScope-Java 1.0.12 AutoContextMemory parity: scenarios D1-D29 of reference/autocontext.md §21."""

from __future__ import annotations

import pytest

from agentscope_memory.short_term.auto_context.engine import (
    COMPRESS_META, CompressionEvent, PlanNote, PlanSubtask, SummarizerError, interaction_messages,
)
from agentscope_memory.short_term.auto_context.tokens import char_count, estimate_tokens
from agentscope_memory.message import Msg, MsgRole, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from auto_context_helpers import A, TAG, TR, TU, U, ScriptedSummarizer, compressor, state, texts, uuid_n

USAGE_META = {"inputToken": 10, "outputToken": 20, "time": 30.0}


def d3_input() -> list[Msg]:
    msgs = [U("User query")]
    for i in range(5):
        msgs += [TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}")]
    return msgs + [A("Assistant response")] + [U(f"Message {i}") for i in range(10)]


def s1sum(msg: Msg, n: int, current_round: bool = False) -> None:
    sep = "" if current_round else "\n"
    assert msg.role is MsgRole.ASSISTANT and msg.name == "assistant"
    assert msg.text_content == "SUMMARY" + sep + TAG(n)
    meta = {"offloaduuid": uuid_n(n)}
    if current_round:
        meta["compressed_current_round"] = True
    assert msg.metadata[COMPRESS_META] == meta
    assert msg.metadata["_chat_usage"] == {"inputTokens": 10, "outputTokens": 20, "time": 30.0, "totalTokens": 30}


async def test_d1_below_thresholds() -> None:
    c, model = compressor(msg_threshold=10)
    st = state([U(f"Message {i}") for i in range(5)])
    assert await c.compress_if_needed(st) is False
    assert len(st.working) == 5 and not model.calls and not st.events


async def test_d2_all_user_over_threshold_nothing_applicable() -> None:
    c, model = compressor(msg_threshold=10, max_token=1000, last_keep=5, min_consecutive_tool_messages=3)
    msgs = [U(f"Message {i}") for i in range(12)]
    assert estimate_tokens(msgs) == 156
    st = state(msgs)
    assert await c.compress_if_needed(st) is False
    assert st.working == msgs and not model.calls


async def test_d3_strategy1_compresses_a_tool_run() -> None:
    c, model = compressor(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    msgs = d3_input()
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert len(st.working) == 13
    assert st.working[0] is msgs[0] and st.working[2] is msgs[11] and st.working[3:] == msgs[12:]
    s1sum(st.working[1], 1)
    assert len(model.calls) == 1
    call = model.calls[0]
    assert "expert content compression specialist" in call[0].text_content
    assert call[1:11] == msgs[1:11]
    assert call[11].text_content == "Above is the message list that needs to be compressed."
    assert st.offload == {uuid_n(1): msgs[1:11]}
    (event,) = st.events
    assert (event.event_type, event.compressed_message_count) == ("TOOL_INVOCATION_COMPRESS", 10)
    assert (event.previous_message_id, event.next_message_id) == (msgs[0].id, msgs[11].id)
    assert event.compressed_message_id == st.working[1].id and event.metadata == USAGE_META


async def test_d4_strategy1_skipped_on_low_tokens() -> None:
    c, model = compressor(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3)
    st = state(d3_input())
    assert await c.compress_if_needed(st) is False
    assert len(st.working) == 22 and not model.calls and not st.events and not st.offload


async def test_d5_cursor_advances_past_a_skipped_group() -> None:
    c, model = compressor(msg_threshold=5, min_consecutive_tool_messages=2, last_keep=2)
    msgs = [U("User query 1")]
    for i in range(3):
        msgs += [TU("short_tool", f"a_{i}"), TR("short_tool", f"a_{i}", "ok")]
    msgs.append(U("User query 2"))
    for i in range(3):
        msgs += [TU("long_tool", f"b_{i}"), TR("long_tool", f"b_{i}", "long_result_" * 1000)]
    msgs += [A("Assistant response"), U("Padding 1"), U("Padding 2")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert len(st.working) == 12 and st.working[:8] == msgs[:8] and st.working[9:] == msgs[14:]
    assert len(model.calls) == 1
    assert st.events[0].compressed_message_count == 6
    assert (st.events[0].previous_message_id, st.events[0].next_message_id) == (msgs[7].id, msgs[14].id)


async def test_d6_strategy2_offloads_a_large_user_message() -> None:
    c, model = compressor(msg_threshold=5, min_consecutive_tool_messages=2, large_payload_threshold=100,
                          last_keep=2, min_compression_token_threshold=10000)
    msgs = [U("User query")]
    for i in range(3):
        msgs += [TU("skipped_tool", f"id_{i}"), TR("skipped_tool", f"id_{i}", "ok")]
    msgs += [U("x" * 200), A("Assistant response"), U("Padding message")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert [i for i in range(10) if st.working[i] is not msgs[i]] == [7]
    stub = st.working[7]
    assert (stub.role, stub.name, stub.text_content) == (MsgRole.USER, "user", "x" * 200 + "\n" + TAG(1))
    assert stub.metadata == {COMPRESS_META: {"offloaduuid": uuid_n(1)}}
    assert not model.calls and st.offload == {uuid_n(1): [msgs[7]]}
    (event,) = st.events
    assert event.event_type == "LARGE_MESSAGE_OFFLOAD_WITH_PROTECTION" and event.compressed_message_id is None
    assert event.metadata == {"inputToken": 89, "outputToken": 117, "time": 0.0}


async def test_d7_strategy3_with_a_preview() -> None:
    c, model = compressor(msg_threshold=5, last_keep=4, large_payload_threshold=100)
    msgs = [U("a"), A("b"), U("y" * 300), A("ok"), U("next")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert st.working[2].text_content == "y" * 200 + "..." + "\n" + TAG(1)
    assert st.events[0].event_type == "LARGE_MESSAGE_OFFLOAD"
    assert st.events[0].metadata == {"inputToken": 129, "outputToken": 118, "time": 0.0}
    assert not model.calls


def d8_input(large_call: bool = False) -> list[Msg]:
    call = TU("search", "call_large", {"query": "x" * 200}) if large_call else TU("search", "call_tool_id_001")
    result = TR("search", "call_large", "tool output") if large_call else TR("search", "call_tool_id_001", "y" * 200)
    return [U("User query"), call, result, A("Assistant final response"), U("Follow-up user question"),
            A("Follow-up assistant answer")]


D8_CFG = dict(msg_threshold=5, large_payload_threshold=50, last_keep=2, min_consecutive_tool_messages=100,
              min_compression_token_threshold=2**31 - 1)


async def test_d8_large_tool_result_keeps_its_structure() -> None:
    c, model = compressor(**D8_CFG)
    msgs = d8_input()
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    stub = st.working[2]
    assert (stub.role, stub.name) == (MsgRole.TOOL, "search")
    (block,) = stub.content
    assert isinstance(block, ToolResultBlock) and (block.id, block.name) == ("call_tool_id_001", "search")
    assert block.output == [TextBlock("y" * 200 + "\n" + TAG(1))]
    assert st.events[0].metadata == {"inputToken": 108, "outputToken": 136, "time": 0.0}
    assert not model.calls and st.working[1] is msgs[1]


async def test_d9_large_tool_call_is_never_stubbed_and_strategy6_runs() -> None:
    c, model = compressor(**D8_CFG)
    msgs = d8_input(large_call=True)
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert st.working[:5] == msgs[:5]
    s1sum(st.working[5], 1, current_round=True)
    (call,) = model.calls
    assert call[1] is msgs[5] and call[2].text_content.startswith("Above is")
    assert "26 characters" in call[3].text_content and "about 8 characters (30%" in call[3].text_content
    assert st.events[0].event_type == "CURRENT_ROUND_MESSAGE_COMPRESS" and st.events[0].next_message_id is None


async def test_d10_last_keep_splits_a_run() -> None:
    c, model = compressor(msg_threshold=10, min_consecutive_tool_messages=3, last_keep=5, min_compression_token_threshold=0)
    msgs = d3_input()[:12]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert texts(st.working)[2:] == ["TU(test_tool,call_3)", "TR(test_tool,call_3)", "TU(test_tool,call_4)",
                                     "TR(test_tool,call_4)", "Assistant response"]
    assert st.offload[uuid_n(1)] == msgs[1:7]
    assert "expert content compression specialist" in model.calls[0][0].text_content


@pytest.mark.parametrize(("min_consecutive", "compressed"), [(4, False), (3, True)])
async def test_d11_run_length_boundary(min_consecutive: int, compressed: bool) -> None:
    c, model = compressor(msg_threshold=5, last_keep=1, min_compression_token_threshold=0,
                          min_consecutive_tool_messages=min_consecutive)
    msgs = [U("q"), TU("t", "a"), TR("t", "a", "ra"), TU("t", "b"), TR("t", "b", "rb"), A("done"), U("next")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is compressed
    if compressed:
        assert texts(st.working) == ["q", "SUMMARY\n" + TAG(1), "done", "next"]
    else:
        assert not model.calls


async def test_d12_run_trimming() -> None:
    c, _ = compressor(msg_threshold=5, last_keep=1, min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    msgs = [U("q"), TR("t", "x", "orphan"), TU("t", "a"), TR("t", "a", "ra"), TU("t", "b"), TR("t", "b", "rb"),
            TU("t", "c"), A("done"), U("next")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert texts(st.working) == ["q", "TR(t,x)", "SUMMARY\n" + TAG(1), "TU(t,c)", "done", "next"]
    assert st.events[0].compressed_message_count == 4


def d13_input() -> list[Msg]:
    msgs = []
    for i in range(3):
        msgs += [U(f"User message {i}"), TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}"),
                 A(f"Assistant response {i}")]
    return msgs + [U("Final user message")]


D13_CFG = dict(msg_threshold=5, max_token=10000, token_ratio=0.9, last_keep=2, min_consecutive_tool_messages=10,
               large_payload_threshold=10000)


async def test_d13_strategy4_summarises_previous_rounds() -> None:
    c, model = compressor(min_compression_token_threshold=0, **D13_CFG)
    msgs = d13_input()
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert len(st.working) == 9
    assert st.working[0] is msgs[0] and st.working[2] is msgs[4] and st.working[4:] == msgs[8:]
    s1sum(st.working[1], 2)
    s1sum(st.working[3], 1)
    assert len(model.calls) == 2
    assert model.calls[0][1:5] == msgs[4:8] and model.calls[1][1:5] == msgs[0:4]
    assert st.offload == {uuid_n(1): msgs[4:8], uuid_n(2): msgs[0:4]}
    assert [(e.event_type, e.compressed_message_count) for e in st.events] == [("PREVIOUS_ROUND_CONVERSATION_SUMMARY", 3)] * 2
    assert (st.events[0].previous_message_id, st.events[0].next_message_id) == (msgs[4].id, msgs[8].id)
    assert (st.events[1].previous_message_id, st.events[1].next_message_id) == (msgs[0].id, msgs[4].id)


async def test_d14_strategy4_stacked_users_and_adjacent_pair() -> None:
    c, model = compressor(msg_threshold=5, last_keep=1, min_consecutive_tool_messages=10,
                          large_payload_threshold=10000, min_compression_token_threshold=0)
    msgs = [U("u1"), U("u2"), TU("t", "a"), TR("t", "a", "r"), A("a1"), U("u3"), A("a3"), U("u4")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert texts(st.working) == ["u1", "u2", "SUMMARY\n" + TAG(1), "u3", "a3", "u4"]
    assert len(model.calls) == 1


async def test_d15_strategy4_below_token_threshold() -> None:
    c, model = compressor(**D13_CFG)
    st = state(d13_input())
    assert await c.compress_if_needed(st) is False and not model.calls


async def test_d16_strategy5_large_plain_answer() -> None:
    c, model = compressor(ScriptedSummarizer(text="Compressed large message summary"), msg_threshold=10,
                          max_token=10000, token_ratio=0.9, last_keep=5, min_consecutive_tool_messages=10,
                          large_payload_threshold=100)
    msgs = [U(f"Initial message {i}") for i in range(8)] + [U("User query with large response"), A("x" * 200)]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    last = st.working[9]
    assert (last.role, last.name) == (MsgRole.ASSISTANT, "assistant")
    assert last.text_content == "Compressed large message summary" + TAG(1)
    assert last.metadata[COMPRESS_META] == {"offloaduuid": uuid_n(1)} and "_chat_usage" in last.metadata
    (call,) = model.calls
    assert call[1] is msgs[9] and len(call) == 3
    assert st.events[0].event_type == "CURRENT_ROUND_LARGE_MESSAGE_SUMMARY" and st.events[0].next_message_id is None


D17_CFG = dict(msg_threshold=10, large_payload_threshold=100, last_keep=5, min_consecutive_tool_messages=100,
               min_compression_token_threshold=2**31 - 1)


async def test_d17_strategy5_keeps_tool_use() -> None:
    c, model = compressor(**D17_CFG)
    big = Msg("big", "assistant", MsgRole.ASSISTANT, [TextBlock("x" * 200), ToolUseBlock("call_001", "search", {}, None, {})], {}, "T")
    st = state([U(f"Message {i}") for i in range(8)] + [U("User query"), big])
    assert await c.compress_if_needed(st) is True
    assert st.working[9].content == [TextBlock("SUMMARY" + TAG(1)), ToolUseBlock("call_001", "search", {}, None, {})]
    sent = model.calls[0][1]
    assert sent.content == [TextBlock("x" * 200)]


async def test_d18_strategy5_keeps_tool_result() -> None:
    c, model = compressor(**D17_CFG)
    call = Msg("c", "assistant", MsgRole.ASSISTANT, [TextBlock("Let me search"), ToolUseBlock("call_tr_001", "search", {}, None, {})], {}, "T")
    msgs = [U(f"Message {i}") for i in range(8)] + [U("User query"), call, TR("search", "call_tr_001", "y" * 200)]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert st.working[9] is call
    assert (st.working[10].role, st.working[10].name) == (MsgRole.TOOL, "search")
    assert st.working[10].content == [ToolResultBlock("call_tr_001", "search", [TextBlock("SUMMARY" + TAG(1))], {})]
    sent = model.calls[0][1]
    assert sent.role is MsgRole.TOOL and sent.content == [TextBlock("y" * 200)]


async def test_d19_strategy6_compresses_the_current_round_and_again() -> None:
    c, model = compressor(msg_threshold=10, max_token=10000, token_ratio=0.9, last_keep=5, min_consecutive_tool_messages=10,
                          large_payload_threshold=10000, min_compression_token_threshold=0)
    msgs = [U(f"Initial message {i}") for i in range(8)] + [U("User query with tools")]
    tools = [TU("test_tool", "call_0"), TR("test_tool", "call_0", "Result 0"), TU("test_tool", "call_1"), TR("test_tool", "call_1", "Result 1")]
    st = state(msgs + tools)
    assert await c.compress_if_needed(st) is True
    assert st.working[:9] == msgs and len(st.working) == 10
    s1sum(st.working[9], 1, current_round=True)
    call = model.calls[0]
    assert call[1:5] == tools and "about 76 characters" in call[6].text_content
    assert "about 23 characters (30%" in call[6].text_content
    assert st.offload[uuid_n(1)] == tools
    assert st.events[0].compressed_message_count == 4 and st.events[0].next_message_id is None
    assert await c.compress_if_needed(st) is True
    assert "about 74 characters" in model.calls[1][-1].text_content
    s1sum(st.working[9], 2, current_round=True)
    assert set(st.offload) == {uuid_n(1), uuid_n(2)}


async def test_d20_strategy6_leaves_a_trailing_tool_call() -> None:
    c, model = compressor(msg_threshold=4, large_payload_threshold=10000)
    msgs = [U("q"), TU("t", "a"), TR("t", "a", "ra"), TU("t", "b")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert texts(st.working) == ["q", "SUMMARY" + TAG(1), "TU(t,b)"]
    assert "about 6 characters" in model.calls[0][-1].text_content and "about 2 characters" in model.calls[0][-1].text_content
    assert st.events[0].compressed_message_count == 2 and st.events[0].next_message_id == msgs[3].id


async def test_d21_strategy6_with_nothing_compressible() -> None:
    c, model = compressor(msg_threshold=2)
    st = state([U("q"), TU("t", "a")])
    assert await c.compress_if_needed(st) is False and not model.calls


async def test_d22_alternating_messages_compress_the_last_answer() -> None:
    c, model = compressor(msg_threshold=10, max_token=1000, token_ratio=0.75, last_keep=5, min_consecutive_tool_messages=3)
    msgs = []
    for i in range(12):
        msgs += [U(f"User message {i}"), A(f"Assistant response {i}")]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert len(model.calls) == 1
    s1sum(st.working[-1], 1, current_round=True)


async def test_d23_plan_calls_are_filtered_from_the_summariser_input() -> None:
    c, model = compressor(msg_threshold=10, max_token=10000, token_ratio=0.9, last_keep=5, min_consecutive_tool_messages=3,
                          min_compression_token_threshold=0)
    tools = [TU("create_plan", "plan_call_1"), TR("create_plan", "plan_call_1", "Plan created"),
             TU("test_tool", "call_1"), TR("test_tool", "call_1", "Result 1"),
             TU("test_tool", "call_2"), TR("test_tool", "call_2", "Result 2")]
    msgs = [U("User query")] + tools + [A("Assistant response")] + [U(f"Message {i}") for i in range(10)]
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    assert model.calls[0][1:5] == tools[2:]
    assert st.offload[uuid_n(1)] == tools and len(st.working) == len(msgs) - 5


async def test_d24_plan_hint_is_the_last_message() -> None:
    c, model = compressor(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    st = state(d3_input())
    st.plan = PlanNote("Test Description", "Test Outcome", [PlanSubtask("Task 1", "in_progress"), PlanSubtask("Task 2", "todo")])
    assert await c.compress_if_needed(st) is True
    assert model.calls[0][-1].text_content == (
        "<plan_aware_hint>\nGoal: Test Description\nCurrent Progress: Task 1\nProgress: 0/2 subtasks completed\n"
        "Expected Outcome: Test Outcome\n\n</plan_aware_hint>")


async def test_d25_summariser_failure_leaves_an_orphan_offload_in_parity() -> None:
    c, _ = compressor(ScriptedSummarizer(fail=RuntimeError("model down")), msg_threshold=10, last_keep=5,
                      min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    msgs = d3_input()
    st = state(msgs)
    with pytest.raises(RuntimeError):
        await c.compress_if_needed(st)
    assert st.working == msgs and not st.events
    assert list(st.offload) == [uuid_n(1)]


async def test_d25_empty_summary_is_a_failure_too() -> None:
    class Empty(ScriptedSummarizer):
        async def summarize(self, messages):
            return None

    c, _ = compressor(Empty(), msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    with pytest.raises(SummarizerError):
        await c.compress_if_needed(state(d3_input()))


def test_d29_token_estimator_reference_values() -> None:
    assert estimate_tokens([U("Hello World")]) == 14
    assert estimate_tokens([U("Message 0")]) == 13
    assert estimate_tokens([A("Assistant response")]) == 21
    tool_use = Msg("x", "assistant", MsgRole.ASSISTANT,
                   [ToolUseBlock("tool-call-123", "search_tool", {"query": "test query", "limit": 10}, None, {})], {}, "T")
    assert estimate_tokens([tool_use]) == 48
    tool_result = Msg("x", "tool", MsgRole.TOOL,
                      [ToolResultBlock("tool-call-123", "search_tool", [TextBlock("The search returned 5 results.")], {})], {}, "T")
    assert estimate_tokens([tool_result]) == 40
    assert estimate_tokens([U("")]) == 9
    assert estimate_tokens([Msg("x", None, MsgRole.USER, [], {}, "T")]) == 7
    assert estimate_tokens([Msg("x", "assistant", MsgRole.ASSISTANT, [ThinkingBlock("hmm")], {}, "T")]) == 18
    assert estimate_tokens([TU("test_tool", "call_0")]) == 30
    assert estimate_tokens([TR("test_tool", "call_0", "Result 0")]) == 30  # named after the tool
    assert estimate_tokens([]) == 0 and estimate_tokens([None]) == 0
    # UTF-16 units: an emoji counts 2.
    assert estimate_tokens([U("😀😀")]) == estimate_tokens([U("abcd")])


def test_char_counts() -> None:
    assert char_count(U("Hello World")) == 11
    assert char_count(Msg("x", "u", MsgRole.USER, [TextBlock("First block"), TextBlock("Second block")], {}, "T")) == 23
    assert char_count(Msg("x", "a", MsgRole.ASSISTANT, [ToolUseBlock("call-123", "calculator", {"a": 1, "b": "test"}, None, {})], {}, "T")) == 36
    assert char_count(TR("calculator", "call-1", "The result is 42")) == 32


def test_interaction_messages_are_users_and_final_answers() -> None:
    msgs = d13_input()
    assert interaction_messages(msgs) == [m for m in msgs if m.role is MsgRole.USER or (m.role is MsgRole.ASSISTANT and m.text_content.startswith("Assistant"))]


def test_event_json_has_javas_fields() -> None:
    event = CompressionEvent("LARGE_MESSAGE_OFFLOAD", 5, 1, "p", None, None, {"inputToken": 89, "outputToken": 117, "time": 0.0})
    data = event.to_dict()
    assert list(data) == ["eventType", "timestamp", "compressedMessageCount", "previousMessageId", "nextMessageId",
                          "compressedMessageId", "metadata", "tokenBefore", "tokenAfter", "tokenReduction",
                          "compressInputToken", "compressOutputToken"]
    assert data["compressInputToken"] == 89 and CompressionEvent.from_dict(data) == event
