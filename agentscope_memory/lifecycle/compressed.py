"""Compressed recall: a search that, when it returns more than `min_results` memories, also
returns one summary of them within `max_chars` characters, so a prompt can carry the summary
instead of the list. LLM when configured (cut to `max_chars` if it overruns), else an offline
extractive summary (the results' novel sentences, best result first); `method` says which."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.lifecycle.summaries import LLM_ERRORS, COMPRESS_PROMPT, EXTRACTIVE, LLM, ask, extractive_summary, log
from agentscope_memory.long_term.engine import LongTermItem, Scope
from agentscope_memory.long_term.hybrid.ranking import RankOptions

if TYPE_CHECKING:
    from agentscope_memory.llm import ChatClient
    from agentscope_memory.long_term.hybrid.engine import HybridEngine

DEFAULT_MIN_RESULTS = 5
DEFAULT_MAX_CHARS = 500
MAX_CHARS_LIMIT = 100_000


@dataclass(frozen=True)
class CompressedRecall:
    summary: str
    method: str


def check_options(min_results: int, max_chars: int) -> tuple[int, int]:
    """The effective (min_results, max_chars); 0 takes the default."""
    if min_results < 0:
        raise InvalidArgumentError("compress_min_results", f"must be >= 0, not {min_results}")
    if max_chars < 0 or max_chars > MAX_CHARS_LIMIT:
        raise InvalidArgumentError("compress_max_chars", f"must be between 0 and {MAX_CHARS_LIMIT}, not {max_chars}")
    return min_results or DEFAULT_MIN_RESULTS, max_chars or DEFAULT_MAX_CHARS


async def compress(items: Sequence[LongTermItem], query: str, max_chars: int, llm: ChatClient | None) -> CompressedRecall:
    texts = [i.text for i in items]
    if llm is not None:
        try:
            text = await ask(llm, COMPRESS_PROMPT.format(max_chars=max_chars), texts, f"Question: {query}")
            if text:
                return CompressedRecall(text[:max_chars], LLM)
        except LLM_ERRORS:
            log.warning("compressing recall by the LLM failed; using the extractive summary", exc_info=True)
    return CompressedRecall(extractive_summary(texts, max_chars), EXTRACTIVE)


class CompressedSearch:
    def __init__(self, engine: HybridEngine, llm: ChatClient | None = None) -> None:
        self._engine = engine
        self._llm = llm

    async def search(self, tenant: str, scope: Scope, query: str, options: RankOptions | None = None, *,
                     route: bool = False, min_results: int = 0, max_chars: int = 0
                     ) -> tuple[list[LongTermItem], str, CompressedRecall | None]:
        """The ranked search, plus a summary when more than `min_results` results came back."""
        min_results, max_chars = check_options(min_results, max_chars)
        items, domain = await self._engine.search_ranked(tenant, scope, query, options, route=route)
        if len(items) <= min_results:
            return items, domain, None
        return items, domain, await compress(items, query, max_chars, self._llm)
