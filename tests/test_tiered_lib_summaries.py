"""LLM session summaries of a TIERED memory as a reasoning model writes them: its <think> blocks
never reach L3, and a summary beyond 2,000 characters is cut at a sentence end with a visible
marker (it was cut mid-sentence, silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.llm import strip_thinking
from agentscope_memory.short_term.tiered.summaries import CUT_MARKER, MAX_SUMMARY_CHARS, cut_summary
from scripted_llm import ScriptedLLM, ScriptedReply
from tiered_helpers import ITEM_TOKENS, config, msg, text

T = "tenant"


async def _summaries(tmp_path: Path, *replies: ScriptedReply) -> list[tuple[str, str]]:
    """L3's (text, method) after one summary per reply (L1 of one item: each add evicts one)."""
    with ScriptedLLM(default=ScriptedReply.text("unused")) as llm:
        llm.push(*replies)
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "思考", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS))
            for i in range(len(replies) + 1):
                await service.tiered.add_items(T, "思考", [msg(i)])
            _, tiers = await service.tiered.tiers(T, "思考")
            assert llm.pending == 0
            return [(s.text, s.method) for s in tiers.l3]


async def test_think_blocks_are_not_kept_in_summaries(tmp_path: Path) -> None:
    summaries = await _summaries(
        tmp_path,
        ScriptedReply.text("<think>用户提到了部署窗口，我应该保留日期。\n再想想……</think>\n\n部署窗口改到周二上午。"),
        ScriptedReply.text("<THINKING>reasoning</THINKING>Deploy moved to Tuesday. <think>more</think>Owner: 李雷."),
        # The template opened the tag: the answer holds only its end.
        ScriptedReply.text("先想一想日期是否正确。\n</think>\n密码每月更换。"),
        # Cut off while thinking: nothing usable, the offline summary keeps the item.
        ScriptedReply.text("<think>用户说的是……让我仔细分析一下每一条"),
    )
    assert summaries == [("部署窗口改到周二上午。", "llm"), ("Deploy moved to Tuesday. Owner: 李雷.", "llm"),
                         ("密码每月更换。", "llm"), ("[offline summary] user: " + text(3), "extractive-fallback")]


async def test_a_long_summary_is_cut_at_a_sentence_end_with_a_marker(tmp_path: Path) -> None:
    sentence = "第{}项决定：部署窗口改到周二上午十点，由运维组负责回滚预案。"
    reply = "".join(sentence.format(i) for i in range(100))
    assert len(reply) > MAX_SUMMARY_CHARS
    [(summary, method)] = await _summaries(tmp_path, ScriptedReply.text(reply))
    assert method == "llm" and len(summary) <= MAX_SUMMARY_CHARS and summary.endswith(CUT_MARKER)
    kept = summary.removesuffix(CUT_MARKER)
    assert reply.startswith(kept) and kept.endswith("。") and len(kept) > MAX_SUMMARY_CHARS // 2


def test_a_cut_falls_at_a_sentence_end_a_space_or_a_whole_character() -> None:
    english = "The deploy window moved to 10.30 on Tuesday. " * 60
    cut = cut_summary(english)
    assert len(cut) <= MAX_SUMMARY_CHARS and cut == english[:len(cut) - len(CUT_MARKER)].rstrip() + CUT_MARKER
    assert cut.removesuffix(CUT_MARKER).endswith("Tuesday.")
    words = "deploy " * 400
    assert cut_summary(words).removesuffix(CUT_MARKER).endswith("deploy")
    # No sentence end or space: the cut falls between whole characters, never inside an emoji
    # (two UTF-16 units), nor between a character and its combining mark or its ZWJ sequence.
    for unit, whole in (("部署😀", 1), ("e\u0301", 2), ("👩\u200d💻", 3)):
        run = unit * (MAX_SUMMARY_CHARS // len(unit) + 5)
        cut = cut_summary(run)
        kept = cut.removesuffix(CUT_MARKER)
        assert len(cut) <= MAX_SUMMARY_CHARS and run.startswith(kept) and len(kept) % whole == 0, unit
        cut.encode("utf-8")  # no lone surrogate
    assert cut_summary("短摘要。") == "短摘要。"


@pytest.mark.parametrize("raw, kept", [("<think>a</think>答案", "答案"), ("答案<think>a\nb</think>。", "答案。"),
                                       ("  <think>未完", ""), ("推理</think>答案", "答案"), ("没有思考", "没有思考")])
def test_strip_thinking(raw: str, kept: str) -> None:
    assert strip_thinking(raw) == kept


@pytest.mark.parametrize("raw, kept", [
    ("<think>a</think>b<THINKING>c</thinking>d", "bd"), ("<think>a<think>b</think>c</think>d", "d"),
    ("<think>a</thinking>b</think>c", "c"), ("前<thinking>a</think>b", "b"), ("<think></think>答", "答"),
])
def test_strip_thinking_pairs_each_opening_tag_with_the_next_closing_tag_of_its_name(raw: str, kept: str) -> None:
    assert strip_thinking(raw) == kept


@pytest.mark.parametrize("raw, kept", [
    # After a removed block, a lone closing tag is the answer writing about it.
    ("<think>用户在问标签。</think>摘要：R1 在推理结束时输出 </think>，然后给出答案。",
     "摘要：R1 在推理结束时输出 </think>，然后给出答案。"),
    ("<think>Summarise.</think>The user asked why DeepSeek-R1 replies end their reasoning with </think>.",
     "The user asked why DeepSeek-R1 replies end their reasoning with </think>."),
    # The template opened the tag: the first closing tag ends the thinking, a later one is text.
    ("先想想。\n</think>\nSummary: R1 closes its reasoning with </think> before answering.",
     "Summary: R1 closes its reasoning with </think> before answering."),
    # Quoted, in prose or in a code sample, a tag is text: with no thinking at all, or after it.
    ("用户问为什么回复里会出现“</think>”标签，以及「<think>」是否总在开头。",
     "用户问为什么回复里会出现“</think>”标签，以及「<think>」是否总在开头。"),
    ("用户的解析代码：\n```python\nanswer = reply.split('</think>')[-1]\n```",
     "用户的解析代码：\n```python\nanswer = reply.split('</think>')[-1]\n```"),
    ("<think>想一想 `</think>` 的含义。</think>R1 把推理写在 `<think>` 和 `</think>` 之间。",
     "R1 把推理写在 `<think>` 和 `</think>` 之间。"),
    # A backtick opening a code fence right after the tag is no quote: the answer starts there.
    ('<think>字段是 `importance_score`</think>```json\n{"importance_score": 0.8}\n```',
     '```json\n{"importance_score": 0.8}\n```'),
], ids=["after-a-block-zh", "after-a-block-en", "template-opened", "quoted-in-prose", "code-sample",
        "quoted-after-thinking", "a-fence-is-no-quote"])
def test_strip_thinking_keeps_an_answer_that_mentions_the_tags(raw: str, kept: str) -> None:
    # The old rule cut everything up to the last closing tag: "摘要：R1 在推理结束时输出 " and
    # the rest of the answer before the mention were lost.
    assert strip_thinking(raw) == kept


@pytest.mark.parametrize("raw, kept", [
    ('<think>用户说"好"</think>"部署"在周二。', '"部署"在周二。'),
    ("<think>see `x`</think>`x` is a variable.", "`x` is a variable."),
    ("<think>I'll name it 'x'</think>'x' is a variable.", "'x' is a variable."),
    ('先想："好"</think>"部署"在周二。', '"部署"在周二。'),
    # Still quoted: the mark before the tag opens a quote (an apostrophe inside a word is none).
    ("The model's '</think>' tag ends its reasoning.", "The model's '</think>' tag ends its reasoning."),
    ('<think>a</think>`<think>` 与 "</think>" 成对。', '`<think>` 与 "</think>" 成对。'),
], ids=["double-zh", "backtick-en", "apostrophe-en", "template-opened", "apostrophe-in-a-word", "pairs-on-a-line"])
def test_a_closing_tag_between_a_quote_closing_and_one_opening_still_ends_thinking(raw: str, kept: str) -> None:
    # Thinking that ended with a quoted word, right before an answer starting with one: the
    # marks either side of the tag looked like a quote around it, the block was never closed,
    # and the whole answer was dropped as thinking ('').
    assert strip_thinking(raw) == kept


def test_an_answer_stuck_repeating_an_opening_tag_is_stripped_at_once() -> None:
    # A reasoning model caught in a loop answered "<think>" over and over: each unclosed tag was
    # scanned to the end, 200 KB took about half a minute, and the pass ran in the event loop,
    # holding every other call of the server meanwhile.
    import time

    stuck = "会话摘要：部署在周二。\n" + "<think>\n" * 25_000
    started = time.monotonic()
    assert strip_thinking(stuck) == stuck.strip()
    assert time.monotonic() - started < 1.0
