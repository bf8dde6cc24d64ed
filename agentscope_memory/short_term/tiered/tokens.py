"""Token counts of tier items: cl100k (AutoContext's `Cl100kCounter`) or Loom's estimate of
four characters per token."""

from __future__ import annotations

import math
from typing import Iterable

from agentscope_memory.message import (
    Base64Source, ContentBlock, Msg, MsgRole, TextBlock, ThinkingBlock, ToolResultBlock, URLSource,
)
from agentscope_memory.short_term.auto_context.summarizers import render
from agentscope_memory.short_term.auto_context.tokens import Cl100kCounter, TokenCounter
from agentscope_memory.short_term.tiered.config import CL100K

# What a chat format adds per message (role, separators).
MESSAGE_OVERHEAD = 4


def _unrendered(block: ContentBlock) -> int:
    """Characters a block carries that its text rendering leaves out: thinking, and media inline
    or by URL. They travel in every message returned (a projection's too), so a budget counts them:
    a 2 MB thinking block or image counted as one word let a projection of 100 tokens exceed 4 MiB."""
    if isinstance(block, ThinkingBlock):
        return len(block.thinking)
    if isinstance(block, ToolResultBlock):
        return sum(_unrendered(b) for b in block.output)
    source = getattr(block, "source", None)
    if isinstance(source, Base64Source):
        return len(source.data)
    if isinstance(source, URLSource):
        return len(source.url)
    return 0


class CharEstimate:
    """ceil(characters / 4) of the message as text, with what that text leaves out (thinking,
    media), plus the per-message overhead."""

    def count(self, msgs: Iterable[Msg | None]) -> int:
        return sum(MESSAGE_OVERHEAD + math.ceil((len(render(m)) + sum(_unrendered(b) for b in m.content)) / 4)
                   for m in msgs if m is not None)


class Counters:
    """One counter of each kind, made when first needed (cl100k loads its tables once)."""

    def __init__(self) -> None:
        self._estimate = CharEstimate()
        self._cl100k: Cl100kCounter | None = None

    def get(self, name: str) -> TokenCounter:
        if name == CL100K:
            if self._cl100k is None:
                self._cl100k = Cl100kCounter()
            return self._cl100k
        return self._estimate

    def text(self, name: str, text: str) -> int:
        return self.get(name).count([Msg(role=MsgRole.SYSTEM, content=[TextBlock(text)])])
