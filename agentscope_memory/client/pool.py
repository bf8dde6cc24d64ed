"""Clients of shared memory pools (`SharedPoolService`): asyncio, blocking and local mode, in
library types. Values are any JSON-serialisable Python value.

    async with AsyncPoolClient("127.0.0.1:50051") as pools:
        await pools.write("团队", "plan", {"step": 1}, writer="planner")
        entry = await pools.get("团队", "plan")
        await pools.write("团队", "plan", {"step": 2}, writer="coder", expected_version=entry.version)
        async for event in pools.watch("团队"):
            ...

A compare-and-set that loses raises `PoolConflictError` (`.expected`, `.actual`). Writes and
deletes are not retried (a repeated write would add a version); reads are, until the deadline.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator, Sequence

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pool_pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2_grpc as pool_grpc
from agentscope_memory.client._base import AsyncGrpcClient, BlockingGrpcClient
from agentscope_memory.client._retry import Reconnects, resuming_stream, resuming_stream_blocking
from agentscope_memory.client.local import Blocking, _LocalClient
from agentscope_memory.convert.pool import entry_from_proto, event_from_proto
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.errors import AbortedError
from agentscope_memory.pool import (
    EntryPage,
    EventPage,
    PoolConflictError,
    PoolDelete,
    PoolEntry,
    PoolEvent,
    MemoryPools,
    PoolWrite,
    RenderedPools,
)

if TYPE_CHECKING:
    from agentscope_memory.service import Service, ServiceSettings

# Anchored at the end: the key and pool id come earlier in the message, and may hold this text.
_VERSIONS = re.compile(r"is at version (\d+), not the expected (\d+)(?: \(it does not exist\))?\Z")


def _to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _conflict(exc: AbortedError, pool_id: str, key: str) -> AbortedError:
    match = _VERSIONS.search(str(exc))
    if match is None:
        return exc
    return PoolConflictError(pool_id, key, int(match.group(2)), int(match.group(1)))


def _write_request(pool_id: str, key: str, value: Any, writer: str, metadata_: dict[str, Any] | None,
                   expected_version: int | None) -> pool_pb.WritePoolEntryRequest:
    request = pool_pb.WritePoolEntryRequest(pool_id=pool_id, key=key, content_json=_to_json(value), writer=writer,
                                            metadata_json=_to_json(metadata_) if metadata_ else "")
    if expected_version is not None:
        request.expected_version = expected_version
    return request


def _delete_request(pool_id: str, key: str, writer: str, expected_version: int | None) -> pool_pb.DeletePoolEntryRequest:
    request = pool_pb.DeletePoolEntryRequest(pool_id=pool_id, key=key, writer=writer)
    if expected_version is not None:
        request.expected_version = expected_version
    return request


def _rendered(response: pool_pb.RenderPoolContextResponse) -> RenderedPools:
    return RenderedPools(response.text, [msg_from_proto(m, newer_kinds=True) for m in response.messages], response.entry_count,
                         response.omitted_count, response.token_count)


def _render_request(pool_ids: Sequence[str], max_tokens: int, messages: bool) -> pool_pb.RenderPoolContextRequest:
    return pool_pb.RenderPoolContextRequest(
        pool_ids=list(pool_ids), max_tokens=max_tokens,
        format=pool_pb.POOL_RENDER_FORMAT_MESSAGES if messages else pool_pb.POOL_RENDER_FORMAT_TEXT)



class AsyncPoolClient(AsyncGrpcClient):
    """Shared memory pools over gRPC (asyncio)."""

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._stub = pool_grpc.SharedPoolServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> AsyncLocalPoolClient:
        """The same methods over an in-process service (no server, no gRPC)."""
        return AsyncLocalPoolClient(service)

    async def write(self, pool_id: str, key: str, value: Any, *, writer: str = "",
                    metadata: dict[str, Any] | None = None, expected_version: int | None = None) -> PoolWrite:
        """Write `value` (any JSON-serialisable value); `expected_version` makes it a
        compare-and-set (0: the key must not exist)."""
        try:
            response = await self._call(self._stub.WritePoolEntry, _write_request(
                pool_id, key, value, writer, metadata, expected_version), retry=False)
        except AbortedError as exc:
            raise _conflict(exc, pool_id, key) from None
        return PoolWrite(entry_from_proto(response.entry), response.sequence)

    async def get(self, pool_id: str, key: str) -> PoolEntry:
        response = await self._call(self._stub.GetPoolEntry, pool_pb.GetPoolEntryRequest(pool_id=pool_id, key=key))
        return entry_from_proto(response.entry)

    async def delete(self, pool_id: str, key: str, *, writer: str = "", expected_version: int | None = None) -> PoolDelete:
        try:
            response = await self._call(self._stub.DeletePoolEntry, _delete_request(pool_id, key, writer, expected_version),
                                        retry=False)
        except AbortedError as exc:
            raise _conflict(exc, pool_id, key) from None
        return PoolDelete(response.deleted_version, response.sequence)

    async def iter_entries(self, pool_id: str, key_prefix: str = "", page_size: int = 0) -> AsyncIterator[PoolEntry]:
        """Every entry whose key starts with `key_prefix`, by key, following the pages."""
        request = pool_pb.ListPoolEntriesRequest(pool_id=pool_id, key_prefix=key_prefix, page_size=page_size)
        async for response in self._paged(self._stub.ListPoolEntries, request):
            for entry in response.entries:
                yield entry_from_proto(entry)

    async def list_entries(self, pool_id: str, key_prefix: str = "") -> list[PoolEntry]:
        return [e async for e in self.iter_entries(pool_id, key_prefix)]

    async def iter_events(self, pool_id: str, after_sequence: int = 0, page_size: int = 0) -> AsyncIterator[PoolEvent]:
        """The pool's events after `after_sequence` committed so far, oldest first."""
        request = pool_pb.ListPoolEventsRequest(pool_id=pool_id, after_sequence=after_sequence, page_size=page_size)
        async for response in self._paged(self._stub.ListPoolEvents, request):
            for event in response.events:
                yield event_from_proto(event)

    async def watch(self, pool_id: str, after_sequence: int = 0) -> AsyncIterator[PoolEvent]:
        """Events after `after_sequence`, then each new one, until the caller stops reading.
        A broken stream is reopened after the last event seen, so nothing is missed or repeated,
        with growing pauses; a server unreachable for the client's `timeout` raises
        `UnavailableError`."""
        responses = resuming_stream(
            lambda last: self._stub.WatchPoolEvents(
                pool_pb.WatchPoolEventsRequest(pool_id=pool_id, after_sequence=last), metadata=self._metadata),
            after_sequence, lambda response: response.event.sequence, Reconnects(self.retry_policy, self.timeout))
        async for response in responses:
            yield event_from_proto(response.event)

    async def render(self, pool_ids: Sequence[str], max_tokens: int = 0, *, messages: bool = False) -> RenderedPools:
        response = await self._call(self._stub.RenderPoolContext, _render_request(pool_ids, max_tokens, messages))
        return _rendered(response)

    async def set_memory_pools(self, memory_id: str, pool_ids: Sequence[str], max_tokens: int = 0) -> MemoryPools:
        """Name the pools whose rendering `memory_id`'s context-building calls include ([]: none)."""
        response = await self._call(self._stub.SetMemoryPools, pool_pb.SetMemoryPoolsRequest(
            memory_id=memory_id, pool_ids=list(pool_ids), max_tokens=max_tokens))
        return MemoryPools(list(response.pool_ids), response.max_tokens)

    async def get_memory_pools(self, memory_id: str) -> MemoryPools:
        response = await self._call(self._stub.GetMemoryPools, pool_pb.GetMemoryPoolsRequest(memory_id=memory_id))
        return MemoryPools(list(response.pool_ids), response.max_tokens)


class PoolClient(BlockingGrpcClient):
    """`AsyncPoolClient`'s methods, blocking."""

    def _bind(self, channel: grpc.Channel) -> None:
        self._stub = pool_grpc.SharedPoolServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        return Blocking(lambda: AsyncLocalPoolClient(service))

    def write(self, pool_id: str, key: str, value: Any, *, writer: str = "",
              metadata: dict[str, Any] | None = None, expected_version: int | None = None) -> PoolWrite:
        try:
            response = self._call(self._stub.WritePoolEntry, _write_request(
                pool_id, key, value, writer, metadata, expected_version), retry=False)
        except AbortedError as exc:
            raise _conflict(exc, pool_id, key) from None
        return PoolWrite(entry_from_proto(response.entry), response.sequence)

    def get(self, pool_id: str, key: str) -> PoolEntry:
        return entry_from_proto(self._call(self._stub.GetPoolEntry, pool_pb.GetPoolEntryRequest(
            pool_id=pool_id, key=key)).entry)

    def delete(self, pool_id: str, key: str, *, writer: str = "", expected_version: int | None = None) -> PoolDelete:
        try:
            response = self._call(self._stub.DeletePoolEntry, _delete_request(pool_id, key, writer, expected_version),
                                  retry=False)
        except AbortedError as exc:
            raise _conflict(exc, pool_id, key) from None
        return PoolDelete(response.deleted_version, response.sequence)

    def iter_entries(self, pool_id: str, key_prefix: str = "", page_size: int = 0) -> Iterator[PoolEntry]:
        request = pool_pb.ListPoolEntriesRequest(pool_id=pool_id, key_prefix=key_prefix, page_size=page_size)
        for response in self._paged(self._stub.ListPoolEntries, request):
            yield from (entry_from_proto(e) for e in response.entries)

    def list_entries(self, pool_id: str, key_prefix: str = "") -> list[PoolEntry]:
        return list(self.iter_entries(pool_id, key_prefix))

    def iter_events(self, pool_id: str, after_sequence: int = 0, page_size: int = 0) -> Iterator[PoolEvent]:
        request = pool_pb.ListPoolEventsRequest(pool_id=pool_id, after_sequence=after_sequence, page_size=page_size)
        for response in self._paged(self._stub.ListPoolEvents, request):
            yield from (event_from_proto(e) for e in response.events)

    def watch(self, pool_id: str, after_sequence: int = 0) -> Iterator[PoolEvent]:
        responses = resuming_stream_blocking(
            lambda last: self._stub.WatchPoolEvents(
                pool_pb.WatchPoolEventsRequest(pool_id=pool_id, after_sequence=last), metadata=self._metadata),
            after_sequence, lambda response: response.event.sequence, Reconnects(self.retry_policy, self.timeout))
        for response in responses:
            yield event_from_proto(response.event)

    def render(self, pool_ids: Sequence[str], max_tokens: int = 0, *, messages: bool = False) -> RenderedPools:
        return _rendered(self._call(self._stub.RenderPoolContext, _render_request(pool_ids, max_tokens, messages)))

    def set_memory_pools(self, memory_id: str, pool_ids: Sequence[str], max_tokens: int = 0) -> MemoryPools:
        response = self._call(self._stub.SetMemoryPools, pool_pb.SetMemoryPoolsRequest(
            memory_id=memory_id, pool_ids=list(pool_ids), max_tokens=max_tokens))
        return MemoryPools(list(response.pool_ids), response.max_tokens)

    def get_memory_pools(self, memory_id: str) -> MemoryPools:
        response = self._call(self._stub.GetMemoryPools, pool_pb.GetMemoryPoolsRequest(memory_id=memory_id))
        return MemoryPools(list(response.pool_ids), response.max_tokens)


class AsyncLocalPoolClient(_LocalClient):
    """`AsyncPoolClient`'s methods over an in-process service (local mode, tenant `default`)."""

    async def _pools(self) -> Any:
        return await self._part("pools")

    async def write(self, pool_id: str, key: str, value: Any, *, writer: str = "",
                    metadata: dict[str, Any] | None = None, expected_version: int | None = None) -> PoolWrite:
        pools = await self._pools()
        return await pools.write(self.tenant, pool_id, key, _to_json(value), writer=writer,
                                 metadata_json=_to_json(metadata) if metadata else "", expected_version=expected_version)

    async def get(self, pool_id: str, key: str) -> PoolEntry:
        return await (await self._pools()).get(self.tenant, pool_id, key)

    async def delete(self, pool_id: str, key: str, *, writer: str = "", expected_version: int | None = None) -> PoolDelete:
        return await (await self._pools()).delete(self.tenant, pool_id, key, writer=writer,
                                                  expected_version=expected_version)

    async def iter_entries(self, pool_id: str, key_prefix: str = "", page_size: int = 0) -> AsyncIterator[PoolEntry]:
        pools = await self._pools()
        token = ""
        while True:
            page: EntryPage = await pools.list(self.tenant, pool_id, key_prefix, page_size, token)
            for entry in page.entries:
                yield entry
            token = page.next_page_token
            if not token:
                return

    async def list_entries(self, pool_id: str, key_prefix: str = "") -> list[PoolEntry]:
        return [e async for e in self.iter_entries(pool_id, key_prefix)]

    async def iter_events(self, pool_id: str, after_sequence: int = 0, page_size: int = 0) -> AsyncIterator[PoolEvent]:
        pools = await self._pools()
        token = ""
        while True:
            page: EventPage = await pools.events(self.tenant, pool_id, after_sequence, page_size, token)
            for event in page.events:
                yield event
            token = page.next_page_token
            if not token:
                return

    async def watch(self, pool_id: str, after_sequence: int = 0) -> AsyncIterator[PoolEvent]:
        async for event in (await self._pools()).watch(self.tenant, pool_id, after_sequence):
            yield event

    async def render(self, pool_ids: Sequence[str], max_tokens: int = 0, *, messages: bool = False) -> RenderedPools:
        rendered: RenderedPools = await (await self._pools()).render(self.tenant, list(pool_ids), max_tokens,
                                                                     as_messages=messages)
        if messages:
            return RenderedPools("", rendered.messages, rendered.entry_count, rendered.omitted_count, rendered.token_count)
        return RenderedPools(rendered.text, [], rendered.entry_count, rendered.omitted_count, rendered.token_count)

    async def _attachments(self) -> Any:
        return await self._part("pool_attachments")

    async def set_memory_pools(self, memory_id: str, pool_ids: Sequence[str], max_tokens: int = 0) -> MemoryPools:
        chosen: MemoryPools = await (await self._attachments()).set(self.tenant, memory_id, list(pool_ids), max_tokens)
        return chosen

    async def get_memory_pools(self, memory_id: str) -> MemoryPools:
        chosen: MemoryPools = await (await self._attachments()).get(self.tenant, memory_id)
        return chosen
