"""`ListLongTermMemories` and `GetLongTermMemoryHistory` a page at a time: the engine's cursor
inside a signed page token."""

from __future__ import annotations

from typing import Callable

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.engine import HistoryEntry, LongTermEngine, LongTermItem, Scope, history_entry_size
from agentscope_memory.paging import PageTokens, cut_to_budget
from agentscope_memory.validation.ids import check_id

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "history_page", "list_page"]

# Both listings: page_size 0 means 100; a larger one than 1000 is served as 1000 (AIP-158).
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def _page_size(page_size: int) -> int:
    if page_size < 0:
        raise InvalidArgumentError("page_size", f"must not be negative, not {page_size}")
    return min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


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
    size = _page_size(page_size)
    await tokens.ready()
    binding: list[str | int] = [tenant, scope.agent_name or "", scope.user_id or "", scope.run_name or "", page_size]
    cursor = tokens.read_with_text(page_token, "long_term", binding, 0)[1] if page_token else ""
    page = await engine.list_page(tenant, scope, size, cursor)
    kept = cut_to_budget(page.items, size_of, budget)
    more = page.more or kept < len(page.items)
    token = tokens.issue("long_term", binding, [], page.cursors[kept - 1]) if more and kept else ""
    return page.items[:kept], token


async def history_page(
    engine: LongTermEngine,
    tokens: PageTokens,
    tenant: str,
    memory_id: str,
    page_size: int,
    page_token: str,
    budget: int,
    size_of: Callable[[HistoryEntry], int] = history_entry_size,
) -> tuple[list[HistoryEntry], str]:
    """A page of a memory's history, oldest first (at most `page_size`, 0 meaning 100, and
    `budget` bytes as `size_of` counts them; the first entry always goes), and the next page's
    token ("" at the end). The token is bound to the tenant, the memory and the page size. A
    history only grows and its entries never change, so pages read at different times still
    make one list (no snapshot is needed)."""
    check_id(memory_id, "id")
    size = _page_size(page_size)
    await tokens.ready()
    binding: list[str | int] = [tenant, memory_id, page_size]
    after = tokens.read(page_token, "long_term_history", binding, 1)[0] if page_token else 0
    page = await engine.history_page(tenant, memory_id, size, after, budget)
    kept = cut_to_budget(page.entries, size_of, budget)
    more = page.more or kept < len(page.entries)
    token = tokens.issue("long_term_history", binding, [page.cursors[kept - 1]]) if more and kept else ""
    return page.entries[:kept], token
