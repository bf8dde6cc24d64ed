"""Shared pieces of the TIERED memory tests: fixed-size messages (13 estimated tokens each:
4 per message + 36 characters / 4) and the offline summary's size, so thresholds are exact."""

from __future__ import annotations

import json
from typing import Any

from agentscope_memory.message import Msg, MsgRole, TextBlock
from agentscope_memory.short_term.tiered.items import L1, SUMMARY, TierItem
from agentscope_memory.short_term.tiered.summaries import ExtractiveTierSummarizer
from agentscope_memory.short_term.tiered.tokens import Counters

ITEM_TOKENS = 13


def text(i: int) -> str:
    return f"note {i:04d} " + "x" * 26  # 36 characters


def msg(i: int) -> Msg:
    return Msg.create(MsgRole.USER, text(i), id=f"m{i}")


def offline_summary_tokens(i: int = 0) -> int:
    """Tokens of the offline summary of one message of `text(i)`."""
    item = TierItem(1, L1, "message", 0.5, ITEM_TOKENS, 0.0, msg(i))
    summary = ExtractiveTierSummarizer().summarize_now([item])
    return Counters().text("estimate", summary)


def config(**values: Any) -> str:
    base: dict[str, Any] = {"score_importance": False}
    base.update(values)
    return json.dumps(base)


def covered_origins(l3: list[TierItem]) -> set[int]:
    return {o for s in l3 if s.kind == SUMMARY for o in s.origins}


def summary_msg(text_: str) -> Msg:
    return Msg(role=MsgRole.SYSTEM, content=[TextBlock(text_)])
