"""`ListLongTermMemories` a page at a time: the engine's cursor inside a signed page token."""

from __future__ import annotations

from typing import Callable

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.engine import LongTermEngine, LongTermItem, Scope
from agentscope_memory.paging import PageTokens, cut_to_budget

__all__ = ["list_page"]


async def list_page(
    engine: LongTermEngine,
    tokens: PageTokens,
    tenant: str,
    scope: Scope,
    page_size: int,
    page_token: str,
    budget: int,
    size_of: Callable[[LongTermItem], int],
) -> tuple[list[LongTermItem], str]:
    """A page of the scope's memories (at most `page_size`, 0 meaning 100, and `budget` bytes
    as `size_of` counts them) and the next page's token ("" at the end)."""
    if not 0 <= page_size <= 1000:
        raise InvalidArgumentError("page_size", "must be between 0 and 1000")
    await tokens.ready()
    binding: list[str | int] = [tenant, scope.agent_name or "", scope.user_id or "", scope.run_name or "", page_size]
    cursor = tokens.read_with_text(page_token, "long_term", binding, 0)[1] if page_token else ""
    page = await engine.list_page(tenant, scope, page_size or 100, cursor)
    kept = cut_to_budget(page.items, size_of, budget)
    more = page.more or kept < len(page.items)
    token = tokens.issue("long_term", binding, [], page.cursors[kept - 1]) if more and kept else ""
    return page.items[:kept], token
