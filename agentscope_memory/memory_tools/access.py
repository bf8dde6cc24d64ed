"""What the memory tools need from the service, for one caller (one tenant).

`ServiceAccess` calls an in-process `Service` (the server's HTTP MCP endpoint, `agentscope-memory
mcp` with an embedded store); `agentscope_memory.client.tool_access.RemoteAccess` forwards the
same calls to a running server over gRPC (`agentscope-memory mcp --target`). The tools are
written against `MemoryAccess` only, so both serve the same tools.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from agentscope_memory.errors import NotFoundError, UnimplementedError
from agentscope_memory.long_term.engine import (
    HistoryEntry,
    LongTermEngine,
    LongTermItem,
    Scope,
    history_entry_size,
)
from agentscope_memory.long_term.paging import history_page
from agentscope_memory.memory_tools.budget import surely_fits
from agentscope_memory.message import Msg
from agentscope_memory.service import Service
from agentscope_memory.store.codec import decode_msg


@dataclass(frozen=True)
class MessagesPage:
    """Messages of a working memory, oldest first, and the token of the next (newer) page."""

    messages: list[Msg]
    next_page_token: str
    total_size: int


@dataclass(frozen=True)
class HistoryPage:
    """Changes of a long-term memory, oldest first, and the token of the next page."""

    entries: list[HistoryEntry]
    next_page_token: str


@dataclass(frozen=True)
class WorkingMemoryInfo:
    memory_id: str
    kind: str
    message_count: int


@dataclass(frozen=True)
class WorkingMemoriesPage:
    memories: list[WorkingMemoryInfo]
    next_page_token: str


class MemoryAccess(Protocol):
    """The service as one tenant sees it."""

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any],
                     pinned: bool = False) -> list[LongTermItem]:
        """Store the messages' facts; `pinned` pins them (never forgotten, no time decay)."""
        ...
    async def search(self, scope: Scope, query: str, limit: int, filters: dict[str, Any]) -> list[LongTermItem]:
        """The best `limit` memories of `scope` for `query` whose metadata has every key/value
        of `filters`, best first."""
        ...
    async def list_long_term(self, scope: Scope, limit: int, offset: int = 0) -> list[LongTermItem]:
        """Up to `limit` memories of `scope`, oldest first, after the first `offset`."""
        ...
    async def get(self, memory_id: str) -> LongTermItem: ...
    async def update(self, memory_id: str, text: str | None, metadata: dict[str, Any] | None,
                     importance: float | None = None, pinned: bool | None = None) -> LongTermItem:
        """Change text, merge metadata, set the importance the engine ranks by and/or pin or
        unpin (`pinned`; None leaves it)."""
        ...
    async def delete(self, memory_id: str) -> None: ...
    async def history_page(self, memory_id: str, page_size: int, page_token: str,
                           budget: tuple[Callable[[HistoryEntry], int], int] | None = None) -> HistoryPage:
        """A page of a memory's changes, as `GetLongTermMemoryHistory` pages them (at most
        `page_size` and the server's page byte budget, or `budget`'s bytes as its function counts
        them, where the access can cut pages; the token bound to the memory)."""
        ...
    async def read_messages(self, memory_id: str, page_size: int, page_token: str,
                            budget: tuple[Callable[[Msg], int], int] | None = None) -> MessagesPage:
        """A page of messages of at most `page_size` and the server's page byte budget, or
        `budget`'s bytes as its function counts them, where the access can cut pages."""
        ...
    async def append_messages(self, memory_id: str, msgs: Sequence[Msg]) -> int:
        """Append to the working memory, creating it (IN_MEMORY) when it does not exist yet;
        returns its message count afterwards."""
        ...
    async def list_working_memories(self, page_size: int, page_token: str) -> WorkingMemoriesPage: ...


class ServiceAccess:
    """`MemoryAccess` over an in-process `Service`, acting as `tenant`."""

    def __init__(self, service: Service, tenant: str) -> None:
        self.service = service
        self.tenant = tenant

    def _engine(self) -> LongTermEngine:
        if self.service.long_term is None:
            raise UnimplementedError("long-term memory is switched off on this server (long_term_enabled=false)")
        return self.service.long_term

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any],
                     pinned: bool = False) -> list[LongTermItem]:
        return await self._engine().record(self.tenant, scope, msgs, metadata or None, pinned=pinned)

    async def search(self, scope: Scope, query: str, limit: int, filters: dict[str, Any]) -> list[LongTermItem]:
        engine = self._engine()
        # The engine filters by metadata in its index and returns every score component.
        options = engine.rank_defaults.with_overrides(top_k=limit)
        if filters:
            options = replace(options, where=replace(options.where, metadata=dict(filters)))
        items, _domain = await engine.search_ranked(self.tenant, scope, query, options)
        return list(items)

    async def list_long_term(self, scope: Scope, limit: int, offset: int = 0) -> list[LongTermItem]:
        return await self._engine().list(self.tenant, scope, limit, offset=offset)

    async def get(self, memory_id: str) -> LongTermItem:
        return await self._engine().get(self.tenant, memory_id)

    async def update(self, memory_id: str, text: str | None, metadata: dict[str, Any] | None,
                     importance: float | None = None, pinned: bool | None = None) -> LongTermItem:
        return await self._engine().update(self.tenant, memory_id, text, metadata, importance, pinned)

    async def delete(self, memory_id: str) -> None:
        await self._engine().delete(self.tenant, memory_id)

    async def history_page(self, memory_id: str, page_size: int, page_token: str,
                           budget: tuple[Callable[[HistoryEntry], int], int] | None = None) -> HistoryPage:
        memories = self.service.memories
        size_of, max_bytes = budget or (history_entry_size, memories.limits.max_page_bytes)
        entries, token = await history_page(self._engine(), memories.tokens, self.tenant, memory_id, page_size,
                                            page_token, max_bytes, size_of)
        return HistoryPage(entries, token)

    async def read_messages(self, memory_id: str, page_size: int, page_token: str,
                            budget: tuple[Callable[[Msg], int], int] | None = None) -> MessagesPage:
        memories = self.service.memories
        page = await memories.get_messages_page(self.tenant, memory_id, page_size, page_token)
        if budget is not None:
            size_of, max_bytes = budget
            # Counting each message's answer exactly doubles the cost of a page: only a page
            # that might not fit is read again, counted.
            if not surely_fits((len(data) for data in page.stored), max_bytes):
                page = await memories.get_messages_page(self.tenant, memory_id, page_size, page_token,
                                                        budget=((lambda data: size_of(decode_msg(data))), max_bytes))
        return MessagesPage(page.messages, page.next_page_token, page.total_size)

    async def append_messages(self, memory_id: str, msgs: Sequence[Msg]) -> int:
        memories = self.service.memories
        try:
            result = await memories.add_messages(self.tenant, memory_id, msgs)
        except NotFoundError:
            # Another session may create it at the same moment: any existing IN_MEMORY is fine.
            await memories.create_memory(self.tenant, memory_id, "IN_MEMORY", allow_existing=True)
            result = await memories.add_messages(self.tenant, memory_id, msgs)
        return result.message_count

    async def list_working_memories(self, page_size: int, page_token: str) -> WorkingMemoriesPage:
        page = await self.service.memories.list_memories(self.tenant, page_size, page_token)
        return WorkingMemoriesPage(
            [WorkingMemoryInfo(m.record.memory_id, m.record.kind, m.message_count) for m in page.memories],
            page.next_page_token,
        )
