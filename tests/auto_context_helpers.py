"""Builders for the AutoContext scenarios of reference/autocontext.md §21 (D1-D29)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import Compressor, ContextState, Identity, Summary
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock

_ids = itertools.count()


def _id() -> str:
    return f"m{next(_ids)}"


def U(text: str) -> Msg:
    return Msg(_id(), "user", MsgRole.USER, [TextBlock(text)], {}, "T")


def A(text: str) -> Msg:
    return Msg(_id(), "assistant", MsgRole.ASSISTANT, [TextBlock(text)], {}, "T")


def TU(name: str, call_id: str, input: dict | None = None) -> Msg:
    return Msg(_id(), "assistant", MsgRole.ASSISTANT, [ToolUseBlock(call_id, name, input or {}, None, {})], {}, "T")


def TR(name: str, call_id: str, output: str) -> Msg:
    return Msg(_id(), name, MsgRole.TOOL, [ToolResultBlock(call_id, name, [TextBlock(output)], {})], {}, "T")


def uuid_n(n: int) -> str:
    # 36 characters like a real UUID, so token figures match the reference's.
    return f"00000000-0000-4000-8000-{n:012d}"


def TAG(n: int) -> str:
    return f"<!-- CONTEXT_OFFLOAD: uuid={uuid_n(n)} -->"


@dataclass
class ScriptedSummarizer:
    """The scripted model of §21: fixed text, usage (10, 20, 30.0); records every input."""

    text: str = "SUMMARY"
    usage: dict | None = field(default_factory=lambda: {"inputTokens": 10, "outputTokens": 20, "time": 30.0})
    fail: Exception | None = None
    calls: list[list[Msg]] = field(default_factory=list)

    async def summarize(self, messages: list[Msg]) -> Summary:
        self.calls.append(list(messages))
        if self.fail is not None:
            raise self.fail
        return Summary(self.text, dict(self.usage) if self.usage else None)


def compressor(summarizer: ScriptedSummarizer | None = None, **config) -> tuple[Compressor, ScriptedSummarizer]:
    summarizer = summarizer or ScriptedSummarizer()
    uuids = itertools.count(1)
    ids = itertools.count(1)
    identity = Identity(new_uuid=lambda: uuid_n(next(uuids)), new_id=lambda: f"new{next(ids)}",
                        now_ms=lambda: 1_700_000_000_000, timestamp=lambda: "T")
    return Compressor(AutoContextConfig(**config).validate(), summarizer, identity), summarizer


def texts(msgs: list[Msg]) -> list[str]:
    return [m.text_content if m.text_content else _describe(m) for m in msgs]


def _describe(m: Msg) -> str:
    for b in m.content:
        if isinstance(b, ToolUseBlock):
            return f"TU({b.name},{b.id})"
        if isinstance(b, ToolResultBlock):
            return f"TR({b.name},{b.id})"
    return ""


def state(msgs: list[Msg]) -> ContextState:
    return ContextState(list(msgs))
