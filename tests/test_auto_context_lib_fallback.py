"""The extractive fallback summariser (no LLM configured): deterministic, offline, marked in the
summary message's metadata, and within the current-round length target."""

from __future__ import annotations

import asyncio
import itertools

from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import COMPRESS_META, Compressor, ContextState, Identity
from agentscope_memory.short_term.auto_context.summarizers import FALLBACK_MARKER, ExtractiveSummarizer
from agentscope_memory.short_term.auto_context.tokens import char_count, utf16_len
from agentscope_memory.message import Msg
from auto_context_helpers import A, TR, TU, U


def run(msgs: list[Msg], **config) -> ContextState:
    uuids = itertools.count(1)
    ids = itertools.count(1)
    identity = Identity(new_uuid=lambda: f"00000000-0000-4000-8000-{next(uuids):012d}", new_id=lambda: f"n{next(ids)}",
                        now_ms=lambda: 0, timestamp=lambda: "T")
    compressor = Compressor(AutoContextConfig(**config).validate(), ExtractiveSummarizer(), identity)
    st = ContextState(list(msgs))
    assert asyncio.run(compressor.compress_if_needed(st)) is True
    return st


def tool_history() -> list[Msg]:
    msgs = [U("Please inspect the logs.")]
    for i in range(5):
        msgs += [TU("read_file", f"call_{i}", {"path": f"logs/{i}.txt"}),
                 TR("read_file", f"call_{i}", f"Step {i} failed with code {i + 1}. The rest is noise. " * 3)]
    return msgs + [A("Step 3 is the culprit.")] + [U(f"Message {i}") for i in range(10)]


def test_tool_run_summary_is_marked_and_keeps_the_facts() -> None:
    st = run(tool_history(), msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3,
             min_compression_token_threshold=0)
    summary = st.working[1]
    assert summary.metadata["agentscope_memory_summarizer"] == FALLBACK_MARKER["agentscope_memory_summarizer"]
    assert summary.metadata[COMPRESS_META] == {"offloaduuid": "00000000-0000-4000-8000-000000000001"}
    assert "_chat_usage" not in summary.metadata  # no model, no usage
    text = summary.text_content
    assert text.startswith("[extractive summary] ")
    assert text.endswith("\n<!-- CONTEXT_OFFLOAD: uuid=00000000-0000-4000-8000-000000000001 -->")
    # The first sentence of each message: every call and its key result survive.
    for i in range(5):
        assert f"logs/{i}.txt" in text and f"Step {i} failed with code {i + 1}." in text
    assert "The rest is noise" not in text


def test_the_fallback_is_deterministic() -> None:
    config = dict(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3, min_compression_token_threshold=0)
    first, second = run(tool_history(), **config), run(tool_history(), **config)
    assert first.working[1].text_content == second.working[1].text_content


def test_current_round_summary_respects_the_length_target() -> None:
    msgs = [U(f"Initial message {i}") for i in range(8)] + [U("User query with tools")]
    for i in range(4):
        msgs += [TU("search", f"c{i}", {"q": f"query {i}"}), TR("search", f"c{i}", f"Found {i} results. " + "x" * 300)]
    st = run(msgs, msg_threshold=10, max_token=100000, last_keep=5, min_consecutive_tool_messages=10,
             large_payload_threshold=100000, min_compression_token_threshold=0)
    summary = st.working[9]
    assert summary.metadata[COMPRESS_META]["compressed_current_round"] is True
    body = summary.text_content.split("<!-- CONTEXT_OFFLOAD")[0]
    orig = sum(char_count(m) for m in msgs[9:])  # the S6 character count (§11.1)
    assert orig == 4 * (6 + 2 + len('{"q":"query 0"}')) + 4 * (6 + 2 + len("Found 0 results. ") + 300)
    assert utf16_len(body) <= max(40, round(orig * 0.3))
    assert body.endswith("...")
