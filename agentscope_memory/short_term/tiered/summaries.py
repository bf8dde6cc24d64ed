"""Who writes L3's session summaries: an OpenAI-compatible LLM when the server has one, else a
deterministic extractive summary marked `extractive-fallback` (also used when the LLM fails)."""

from __future__ import annotations

import logging
import re
from typing import Protocol

from agentscope_memory.llm import ChatClient
from agentscope_memory.short_term.auto_context.summarizers import render
from agentscope_memory.short_term.tiered.items import TierItem

log = logging.getLogger("agentscope_memory.tiered")

LLM = "llm"
EXTRACTIVE = "extractive-fallback"
MAX_SUMMARY_CHARS = 2000
# The least of each item's first sentence an offline summary keeps: past MAX_SUMMARY_CHARS / this
# many items it grows instead, so no item leaves its tier with nothing of it kept.
MIN_LINE_CHARS = 80
PROMPT = (
    "You compress an agent's working memory. Summarise the following items into a short, factual "
    "session summary that keeps every decision, fact, number, name and open task. Answer with the "
    "summary only, in the items' language."
)


class TierSummarizer(Protocol):
    async def summarize(self, items: list[TierItem]) -> tuple[str, str]:
        """The summary of `items` and how it was made (`llm` or `extractive-fallback`)."""
        ...


def _who(item: TierItem) -> str:
    if item.msg is not None:
        return item.msg.name or (item.msg.role.value.lower() if item.msg.role else "message")
    return "summary"


def item_text(item: TierItem) -> str:
    return render(item.msg) if item.msg is not None else item.text


class ExtractiveTierSummarizer:
    """Offline and deterministic: the first sentence of each item, in order, each within an
    equal share of the bound (at least `MIN_LINE_CHARS`: a large batch gets a longer summary
    rather than one that stops after the first few items)."""

    def __init__(self, max_chars: int = MAX_SUMMARY_CHARS) -> None:
        self._max = max_chars

    async def summarize(self, items: list[TierItem]) -> tuple[str, str]:
        return self.summarize_now(items), EXTRACTIVE

    def summarize_now(self, items: list[TierItem]) -> str:
        share = max(self._max // max(len(items), 1), MIN_LINE_CHARS)
        lines = []
        for item in sorted(items, key=lambda i: i.seq):
            text = " ".join(item_text(item).split())
            first = re.split(r"(?<=[.!?。！？])\s*", text, maxsplit=1)[0]
            line = f"{_who(item)}: {first}"
            lines.append(line if len(line) <= share else line[: share - 3] + "...")
        return "[offline summary] " + " | ".join(lines)


class LlmTierSummarizer:
    def __init__(self, client: ChatClient, fallback: ExtractiveTierSummarizer | None = None) -> None:
        self._client = client
        self._fallback = fallback or ExtractiveTierSummarizer()

    async def summarize(self, items: list[TierItem]) -> tuple[str, str]:
        body = "\n".join(f"- {_who(i)}: {item_text(i)}" for i in sorted(items, key=lambda i: i.seq))
        try:
            result = await self._client.chat([{"role": "system", "content": PROMPT}, {"role": "user", "content": body}],
                                             temperature=0)
            text = result.text.strip()
            if text:
                return text[:MAX_SUMMARY_CHARS], LLM
        except Exception:  # the offline summary still keeps what leaves
            log.warning("tier summary by the LLM failed; using the extractive summary", exc_info=True)
        return self._fallback.summarize_now(items), EXTRACTIVE
