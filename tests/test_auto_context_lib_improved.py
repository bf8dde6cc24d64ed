"""The improved profile: each fix of an upstream bug, shown against parity on the same input."""

from __future__ import annotations

import pytest

from agentscope_memory.short_term.auto_context.engine import COMPRESS_META
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock
from auto_context_helpers import A, TR, TU, U, ScriptedSummarizer, compressor, state, uuid_n


def test_cl100k_needs_the_improved_profile() -> None:
    from agentscope_memory.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="token_counter"):
        compressor(token_counter="cl100k")
    compressor(token_counter="cl100k", profile="improved")


def test_cl100k_counts_real_tokens() -> None:
    from agentscope_memory.short_term.auto_context.tokens import Cl100kCounter

    counter = Cl100kCounter()
    assert counter._encoding.encode_ordinary("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert counter.count([U("hello world")]) > counter.count([U("hi")]) > 0


@pytest.mark.parametrize("profile", ["parity", "improved"])
async def test_q7_offload_only_after_a_successful_call(profile: str) -> None:
    msgs = [U("q")] + [m for i in range(4) for m in (TU("t", f"c{i}"), TR("t", f"c{i}", f"r{i}"))] + [A("done"), U("next")]
    c, _ = compressor(ScriptedSummarizer(fail=RuntimeError("model down")), profile=profile, msg_threshold=5,
                      last_keep=1, min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    st = state(msgs)
    with pytest.raises(RuntimeError):
        await c.compress_if_needed(st)
    assert st.working == msgs and not st.events
    assert bool(st.offload) is (profile == "parity")  # parity leaves an orphan, as Java does


def parallel_call_conversation() -> list[Msg]:
    # One assistant message calls two tools at once; both results follow. lastKeep 4 puts the
    # boundary between the two results.
    parallel = Msg("par", "assistant", MsgRole.ASSISTANT,
                   [ToolUseBlock("p1", "t", {}, None, {}), ToolUseBlock("p2", "t", {}, None, {})], {}, "T")
    return ([U("q"), TU("t", "a"), TR("t", "a", "ra"), TU("t", "b"), TR("t", "b", "rb"), parallel,
             TR("t", "p1", "r1"), TR("t", "p2", "r2"), A("done"), U("x"), U("y"), U("z")])


def result_ids(msgs: list[Msg]) -> list[str]:
    return [b.id for m in msgs for b in m.content if isinstance(b, ToolResultBlock)]


def call_ids(msgs: list[Msg]) -> set[str]:
    return {b.id for m in msgs for b in m.content if isinstance(b, ToolUseBlock)}


@pytest.mark.parametrize("profile", ["parity", "improved"])
async def test_tool_calls_and_results_are_never_split(profile: str) -> None:
    c, _ = compressor(profile=profile, msg_threshold=5, last_keep=5, min_consecutive_tool_messages=3,
                      min_compression_token_threshold=0)
    st = state(parallel_call_conversation())
    assert await c.compress_if_needed(st) is True
    orphans = [i for i in result_ids(st.working) if i not in call_ids(st.working)]
    if profile == "parity":
        assert orphans == ["p2"]  # Java cuts at lastKeep: p2's result stays without its call (§7.7)
    else:
        assert orphans == []
        assert "par" in [m.id for m in st.working]  # the parallel call and both results stay together


@pytest.mark.parametrize("profile", ["parity", "improved"])
async def test_q3_stubs_are_not_offloaded_again(profile: str) -> None:
    # A stub longer than the threshold (preview 200 + tag) from an earlier pass.
    stub_text = "y" * 200 + "...\n<!-- CONTEXT_OFFLOAD: uuid=" + uuid_n(99) + " -->"
    stub = Msg("stub", "user", MsgRole.USER, [TextBlock(stub_text)], {COMPRESS_META: {"offloaduuid": uuid_n(99)}}, "T")
    c, _ = compressor(profile=profile, msg_threshold=5, last_keep=4, large_payload_threshold=100)
    st = state([U("a"), A("b"), stub, A("ok"), U("next")])
    changed = await c.compress_if_needed(st)
    if profile == "parity":
        # Java offloads the stub itself: a stub of a stub, whose reload gives only the old stub.
        assert changed and st.offload == {uuid_n(1): [stub]} and st.working[2] is not stub
    else:
        assert st.working[2] is stub and not st.offload


@pytest.mark.parametrize("profile", ["parity", "improved"])
async def test_a_reasoning_models_thinking_stays_out_of_improved_summaries(profile: str) -> None:
    answer = "<think>先看工具结果 {c0..c3}。</think>\n用户查询了四次，结果是r0到r3。"
    msgs = [U("q")] + [m for i in range(4) for m in (TU("t", f"c{i}"), TR("t", f"c{i}", f"r{i}"))] + [A("done"), U("next")]
    c, _ = compressor(ScriptedSummarizer(text=answer), profile=profile, msg_threshold=5, last_keep=1,
                      min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    st = state(msgs)
    assert await c.compress_if_needed(st) is True
    summary = next(m.text_content for m in st.working if COMPRESS_META in m.metadata)
    if profile == "parity":
        assert summary.startswith(answer)  # Java stores the model's answer byte for byte
    else:
        assert summary.startswith("用户查询了四次，结果是r0到r3。") and "<think>" not in summary


async def test_an_improved_summary_of_nothing_but_thinking_is_a_failed_call() -> None:
    msgs = [U("q")] + [m for i in range(4) for m in (TU("t", f"c{i}"), TR("t", f"c{i}", f"r{i}"))] + [A("done"), U("next")]
    c, _ = compressor(ScriptedSummarizer(text="<think>没想完"), profile="improved", msg_threshold=5, last_keep=1,
                      min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    st = state(msgs)
    with pytest.raises(Exception, match="nothing but its thinking"):
        await c.compress_if_needed(st)
    assert st.working == msgs and not st.offload
