"""`RemoteAccess`: the memory tools' `MemoryAccess` over a running server (gRPC clients).

`agentscope-memory mcp --target host:port` serves the MCP tools over stdio with this, so an MCP
client on a laptop reaches the same memories as the agents that talk gRPC to that server; the
API key given decides the tenant, as for any gRPC client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.client import _requests
from agentscope_memory.client.aio import AsyncMemoryClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.long_term.engine import HistoryEntry, LongTermItem, Scope
from agentscope_memory.memory_tools.access import (
    HistoryPage,
    MessagesPage,
    WorkingMemoriesPage,
    WorkingMemoryInfo,
)
from agentscope_memory.message import Msg
from agentscope_memory.paging import cut_to_budget

T = TypeVar("T")


class RemoteAccess:
    """`MemoryAccess` over gRPC. Failures arrive as the library's errors (the clients translate
    status codes), so the tools report them exactly as in-process ones."""

    def __init__(self, target: str, *, api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = 30.0) -> None:
        self.target = target
        self.memories = AsyncMemoryClient(target, api_key=api_key, root_certificates=root_certificates, timeout=timeout)
        self.long_term = AsyncLongTermClient(target, api_key=api_key, root_certificates=root_certificates, timeout=timeout)

    async def close(self) -> None:
        await self.memories.close()
        await self.long_term.close()

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any],
                     pinned: bool = False) -> list[LongTermItem]:
        return await self.long_term.record(scope, msgs, metadata or None, pinned=pinned)

    async def search(self, scope: Scope, query: str, limit: int, filters: dict[str, Any]) -> list[LongTermItem]:
        # The ranked search an in-process server runs for the tool (`ServiceAccess.search`): the
        # server filters by metadata before its top-k cut, with the same equality.
        return await self.long_term.search(scope, query, top_k=limit, metadata=filters or None)

    async def list_long_term(self, scope: Scope, limit: int, offset: int = 0) -> list[LongTermItem]:
        # ListLongTermMemories has no offset: read past it (the client follows the pages). The
        # limit is not capped at one gRPC page: that ended a listing at 1,000 memories.
        return (await self.long_term.list(scope, offset + limit))[offset:]

    async def get(self, memory_id: str) -> LongTermItem:
        return await self.long_term.get(memory_id)

    async def update(self, memory_id: str, text: str | None, metadata: dict[str, Any] | None,
                     importance: float | None = None, pinned: bool | None = None) -> LongTermItem:
        return await self.long_term.update(memory_id, text, importance=importance, metadata=metadata, pinned=pinned)

    async def delete(self, memory_id: str) -> None:
        await self.long_term.delete(memory_id)

    async def history_page(self, memory_id: str, page_size: int, page_token: str,
                           budget: tuple[Callable[[HistoryEntry], int], int] | None = None) -> HistoryPage:
        start, skip = _read_token(page_token)
        entries, token = await self.long_term.history_page(memory_id, page_size, start)
        entries, token = _cut(entries, skip, token, start, budget)
        return HistoryPage(entries, token)

    async def read_messages(self, memory_id: str, page_size: int, page_token: str,
                            budget: tuple[Callable[[Msg], int], int] | None = None) -> MessagesPage:
        start, skip = _read_token(page_token)
        client = self.memories
        response = await client._call(client._stub.GetMessages, pb.GetMessagesRequest(
            memory_id=memory_id, page_size=page_size, page_token=start))
        messages, token = _cut(_requests.page_messages(response), skip, response.next_page_token, start, budget)
        return MessagesPage(messages, token, response.total_size)

    async def append_messages(self, memory_id: str, msgs: Sequence[Msg]) -> int:
        try:
            return await self.memories.add_messages(memory_id, msgs)
        except NotFoundError:
            await self.memories.create_memory(memory_id, "IN_MEMORY", allow_existing=True)
            return await self.memories.add_messages(memory_id, msgs)

    async def list_working_memories(self, page_size: int, page_token: str) -> WorkingMemoriesPage:
        client = self.memories
        response = await client._call(client._stub.ListMemories, pb.ListMemoriesRequest(
            page_size=page_size, page_token=page_token))
        return WorkingMemoriesPage(
            [WorkingMemoryInfo(m.memory_id, pb.MemoryKind.Name(m.kind).removeprefix("MEMORY_KIND_"), m.message_count)
             for m in response.memories],
            response.next_page_token,
        )


# A page of the server's is sized for gRPC (4 MiB of stored messages), not for the tools' answers
# (each message's JSON, twice, once escaped in a string: several times as large), so it is cut to
# the tools' budget as the in-process path cuts it. The server's token cannot say where a cut
# page ends, and another page size would not match the token's binding: the next page is the same
# server page, `skip` items in. Such a token is `~skip~token`; a plain one is the server's as is.
# A forged `skip` only moves within a page its bearer may read anyway.
_CUT = "~"


def _read_token(page_token: str) -> tuple[str, int]:
    """(the server's token of the page, how many of its items were given already)."""
    if not page_token.startswith(_CUT):
        return page_token, 0
    skip, _, start = page_token[len(_CUT):].partition(_CUT)
    if not skip.isdigit() or not 0 < int(skip) < 1_000_000:
        raise InvalidArgumentError("page_token", "invalid or expired")
    return start, int(skip)


def _cut(items: Sequence[T], skip: int, next_token: str, start: str,
         budget: tuple[Callable[[T], int], int] | None) -> tuple[list[T], str]:
    """The items of a server page after `skip`, as many as fit `budget`, and the next token."""
    rest = list(items[skip:])
    if skip and not rest:
        raise InvalidArgumentError("page_token", "invalid or expired")
    if budget is None:
        return rest, next_token
    size_of, max_bytes = budget
    kept = cut_to_budget(rest, size_of, max_bytes)
    if kept == len(rest):
        return rest, next_token
    return rest[:kept], f"{_CUT}{skip + kept}{_CUT}{start}"
