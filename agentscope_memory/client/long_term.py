"""Python clients for `LongTermMemoryService`, asyncio and blocking, in library types.

Reads are retried on UNAVAILABLE like the memory clients' reads; writes are not (a repeated
record could store twice when an LLM extracts facts).
"""

from __future__ import annotations

import builtins  # `list` is also a method name of the clients
import time

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import _requests
from agentscope_memory.client._base import AsyncGrpcClient, BlockingGrpcClient
from agentscope_memory.client._validate import fields_named
from agentscope_memory.convert.from_proto import (
    long_term_history_from_proto,
    long_term_item_from_proto,
    long_term_result_from_proto,
)
from agentscope_memory.convert.to_proto import scope_to_proto
from agentscope_memory.long_term.engine import HistoryEntry, LongTermItem, Scope
from agentscope_memory.long_term.modes import Mode
from agentscope_memory.long_term.paging import MAX_PAGE_SIZE as MAX_LIST_PAGE_SIZE
from agentscope_memory.message import Msg

if TYPE_CHECKING:
    from agentscope_memory.service import Service, ServiceSettings

@dataclass(frozen=True)
class Turn:
    """What `begin_turn` stored, and the tools to offer the model (name -> JSON schema)."""

    input: list[Msg]
    tools: dict[str, dict[str, Any]]


def _items(response: Any) -> list[LongTermItem]:
    return [long_term_item_from_proto(i) for i in response.memories]


class AsyncLongTermClient(AsyncGrpcClient):
    """Long-term memory over gRPC (asyncio). Failures raise the library's errors."""

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.LongTermMemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        """The same methods over an in-process service (no server, no gRPC); see `client.local`."""
        from agentscope_memory.client.local import AsyncLocalLongTermClient

        return AsyncLocalLongTermClient(service)

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None = None, *,
                     pinned: bool = False) -> list[LongTermItem]:
        """Store the messages; returns what was stored or pinned. `pinned` pins what is stored and
        a memory of the scope already holding one of the texts (never forgotten, no time decay)."""
        request = _requests.record(scope, msgs, metadata, pinned)
        return _items(await self._call(self._stub.Record, request, retry=False))

    async def retrieve(self, scope: Scope, msg: Msg, limit: int = 5) -> str:
        return (await self._call(self._stub.Retrieve, _requests.retrieve(scope, msg, limit))).text

    async def record_to_memory(self, scope: Scope, thinking: str, content: Sequence[str]) -> str:
        request = pb.RecordToMemoryRequest(scope=scope_to_proto(scope), thinking=thinking, content=list(content))
        return (await self._call(self._stub.RecordToMemory, request, retry=False)).text

    async def retrieve_from_memory(self, scope: Scope, keywords: Sequence[str]) -> str:
        request = pb.RetrieveFromMemoryRequest(scope=scope_to_proto(scope), keywords=list(keywords))
        return (await self._call(self._stub.RetrieveFromMemory, request)).text

    async def list(self, scope: Scope, limit: int = 100) -> list[LongTermItem]:
        """Up to `limit` memories of the scope, following pages."""
        items: list[LongTermItem] = []
        token = ""
        # One page size throughout: a page token is bound to it, and the byte budget may cut a
        # page short of it.
        size = min(limit, MAX_LIST_PAGE_SIZE)
        deadline = time.monotonic() + self.timeout  # one call for the user: one deadline
        while len(items) < limit:
            request = _requests.long_term_pages(scope, size, token)
            response = await self._call(self._stub.ListLongTermMemories, request, deadline=deadline)
            items.extend(_items(response))
            token = response.next_page_token
            if not token:
                break
        return items[:limit]

    @fields_named(memory_id="id")
    async def get(self, memory_id: str) -> LongTermItem:
        response = await self._call(self._stub.GetLongTermMemory, pb.GetLongTermMemoryRequest(id=memory_id))
        return long_term_item_from_proto(response.memory)

    async def search(self, scope: Scope, query: str, *, top_k: int = 0, memory_types: Sequence[str] = (),
                     domains: Sequence[str] = (), route_query: bool = False, ranking: str = "",
                     metadata: dict[str, Any] | None = None, **weights: float | None) -> builtins.list[LongTermItem]:
        """Ranked search, best first; each item's `scores` holds every component of its score
        (final, semantic, dense, lexical, decay, importance, frequency). Weights (alpha, beta,
        gamma, delta, decay_rate, dense_weight) and `ranking` (shipped, seed, semantic, dense,
        lexical, rrf) left out take the server's defaults. `metadata`: only memories holding
        each of its keys with an equal value."""
        request = _requests.search(scope, query, top_k, weights, memory_types, domains, route_query, ranking, metadata)
        response = await self._call(self._stub.SearchLongTermMemories, request)
        return [long_term_result_from_proto(r) for r in response.results]

    @fields_named(memory_id="id")
    async def update(self, memory_id: str, text: str | None = None, *, importance: float | None = None,
                     metadata: dict[str, Any] | None = None, pinned: bool | None = None) -> LongTermItem:
        """Change a memory's text, importance, metadata (merged) or pin (None keeps it); the
        change joins its history."""
        request = _requests.update_long_term(memory_id, text, importance, metadata, pinned)
        return long_term_item_from_proto((await self._call(self._stub.UpdateLongTermMemory, request, retry=False)).memory)

    @fields_named(memory_id="id")
    async def history(self, memory_id: str) -> builtins.list[HistoryEntry]:
        """Every change of a memory, oldest first (ADD, UPDATE, ASSESS, DELETE), following pages."""
        request = pb.GetLongTermMemoryHistoryRequest(id=memory_id)
        deadline = time.monotonic() + self.timeout  # one call for the user: one deadline
        return [long_term_history_from_proto(e)
                async for response in self._paged(self._stub.GetLongTermMemoryHistory, request, deadline)
                for e in response.entries]

    @fields_named(memory_id="id")
    async def history_page(self, memory_id: str, page_size: int = 0,
                           page_token: str = "") -> tuple[builtins.list[HistoryEntry], str]:
        """One page of a memory's history (`page_size` 0 means the server's default, 100) and
        the next page's token ("" after the last); send the token with the same `page_size`."""
        request = pb.GetLongTermMemoryHistoryRequest(id=memory_id, page_size=page_size, page_token=page_token)
        response = await self._call(self._stub.GetLongTermMemoryHistory, request)
        return [long_term_history_from_proto(e) for e in response.entries], response.next_page_token

    @fields_named(memory_id="id")
    async def delete(self, memory_id: str) -> None:
        await self._call(self._stub.DeleteLongTermMemory, pb.DeleteLongTermMemoryRequest(id=memory_id), retry=False)

    async def forget(self, scope: Scope, *, force: bool = False) -> int:
        """Delete everything of a scope; returns how many memories were deleted. A scope with
        child scopes needs `force` (its children are then detached)."""
        request = pb.DeleteScopeRequest(scope=scope_to_proto(scope), force=force)
        return (await self._call(self._stub.DeleteScope, request, retry=False)).deleted_count

    async def begin_turn(self, memory_id: str, scope: Scope, mode: Mode | str, input_msgs: Sequence[Msg]) -> Turn:
        request = _requests.begin_turn(memory_id, scope, mode, input_msgs)
        return Turn(*_requests.turn(await self._call(self._stub.BeginTurn, request, retry=False)))

    async def end_turn(self, memory_id: str, scope: Scope, mode: Mode | str, *, background: bool = False) -> bool:
        request = _requests.end_turn(memory_id, scope, mode, background)
        return (await self._call(self._stub.EndTurn, request, retry=False)).recorded


class LongTermClient(BlockingGrpcClient):
    """Long-term memory over gRPC (blocking); the same methods as `AsyncLongTermClient`."""

    def _bind(self, channel: grpc.Channel) -> None:
        self._stub = pb_grpc.LongTermMemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        """The same methods over an in-process service (no server, no gRPC); see `client.local`."""
        from agentscope_memory.client.local import AsyncLocalLongTermClient, Blocking

        return Blocking(lambda: AsyncLocalLongTermClient(service))

    def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None = None, *,
               pinned: bool = False) -> list[LongTermItem]:
        """Store the messages; returns what was stored or pinned. `pinned` pins what is stored and
        a memory of the scope already holding one of the texts (never forgotten, no time decay)."""
        return _items(self._call(self._stub.Record, _requests.record(scope, msgs, metadata, pinned), retry=False))

    def retrieve(self, scope: Scope, msg: Msg, limit: int = 5) -> str:
        return self._call(self._stub.Retrieve, _requests.retrieve(scope, msg, limit)).text

    def record_to_memory(self, scope: Scope, thinking: str, content: Sequence[str]) -> str:
        request = pb.RecordToMemoryRequest(scope=scope_to_proto(scope), thinking=thinking, content=list(content))
        return self._call(self._stub.RecordToMemory, request, retry=False).text

    def retrieve_from_memory(self, scope: Scope, keywords: Sequence[str]) -> str:
        request = pb.RetrieveFromMemoryRequest(scope=scope_to_proto(scope), keywords=list(keywords))
        return self._call(self._stub.RetrieveFromMemory, request).text

    def list(self, scope: Scope, limit: int = 100) -> list[LongTermItem]:
        """Up to `limit` memories of the scope, following pages."""
        items: list[LongTermItem] = []
        token = ""
        # One page size throughout: a page token is bound to it, and the byte budget may cut a
        # page short of it.
        size = min(limit, MAX_LIST_PAGE_SIZE)
        deadline = time.monotonic() + self.timeout  # one call for the user: one deadline
        while len(items) < limit:
            request = _requests.long_term_pages(scope, size, token)
            response = self._call(self._stub.ListLongTermMemories, request, deadline=deadline)
            items.extend(_items(response))
            token = response.next_page_token
            if not token:
                break
        return items[:limit]

    @fields_named(memory_id="id")
    def get(self, memory_id: str) -> LongTermItem:
        response = self._call(self._stub.GetLongTermMemory, pb.GetLongTermMemoryRequest(id=memory_id))
        return long_term_item_from_proto(response.memory)

    def search(self, scope: Scope, query: str, *, top_k: int = 0, memory_types: Sequence[str] = (),
               domains: Sequence[str] = (), route_query: bool = False, ranking: str = "",
               metadata: dict[str, Any] | None = None, **weights: float | None) -> builtins.list[LongTermItem]:
        request = _requests.search(scope, query, top_k, weights, memory_types, domains, route_query, ranking, metadata)
        return [long_term_result_from_proto(r) for r in self._call(self._stub.SearchLongTermMemories, request).results]

    @fields_named(memory_id="id")
    def update(self, memory_id: str, text: str | None = None, *, importance: float | None = None,
               metadata: dict[str, Any] | None = None, pinned: bool | None = None) -> LongTermItem:
        """Change a memory's text, importance, metadata (merged) or pin (None keeps it); the
        change joins its history."""
        request = _requests.update_long_term(memory_id, text, importance, metadata, pinned)
        return long_term_item_from_proto(self._call(self._stub.UpdateLongTermMemory, request, retry=False).memory)

    @fields_named(memory_id="id")
    def history(self, memory_id: str) -> builtins.list[HistoryEntry]:
        """Every change of a memory, oldest first (ADD, UPDATE, ASSESS, DELETE), following pages."""
        request = pb.GetLongTermMemoryHistoryRequest(id=memory_id)
        deadline = time.monotonic() + self.timeout  # one call for the user: one deadline
        return [long_term_history_from_proto(e)
                for response in self._paged(self._stub.GetLongTermMemoryHistory, request, deadline)
                for e in response.entries]

    @fields_named(memory_id="id")
    def history_page(self, memory_id: str, page_size: int = 0,
                     page_token: str = "") -> tuple[builtins.list[HistoryEntry], str]:
        """One page of a memory's history (`page_size` 0 means the server's default, 100) and
        the next page's token ("" after the last); send the token with the same `page_size`."""
        request = pb.GetLongTermMemoryHistoryRequest(id=memory_id, page_size=page_size, page_token=page_token)
        response = self._call(self._stub.GetLongTermMemoryHistory, request)
        return [long_term_history_from_proto(e) for e in response.entries], response.next_page_token

    @fields_named(memory_id="id")
    def delete(self, memory_id: str) -> None:
        self._call(self._stub.DeleteLongTermMemory, pb.DeleteLongTermMemoryRequest(id=memory_id), retry=False)

    def forget(self, scope: Scope, *, force: bool = False) -> int:
        """Delete everything of a scope; returns how many memories were deleted. A scope with
        child scopes needs `force` (its children are then detached)."""
        return self._call(self._stub.DeleteScope, pb.DeleteScopeRequest(scope=scope_to_proto(scope), force=force),
                          retry=False).deleted_count

    def begin_turn(self, memory_id: str, scope: Scope, mode: Mode | str, input_msgs: Sequence[Msg]) -> Turn:
        request = _requests.begin_turn(memory_id, scope, mode, input_msgs)
        return Turn(*_requests.turn(self._call(self._stub.BeginTurn, request, retry=False)))

    def end_turn(self, memory_id: str, scope: Scope, mode: Mode | str, *, background: bool = False) -> bool:
        request = _requests.end_turn(memory_id, scope, mode, background)
        return self._call(self._stub.EndTurn, request, retry=False).recorded
