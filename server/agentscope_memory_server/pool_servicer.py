"""`agentscope.memory.v1.SharedPoolService`: translates requests and calls `SharedPools`."""

from __future__ import annotations

import functools
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.pool import entry_to_proto, event_to_proto, render_format_from_proto, rendered_to_proto
from agentscope_memory.pool import PoolAttachments, PoolConflictError, SharedPools
from agentscope_memory_server.errors import grpc_errors, grpc_stream_errors
from agentscope_memory_server.tenancy import tenant_of

# Trailing metadata of an ABORTED compare-and-set: the entry's version that won (0: absent).
CURRENT_VERSION_KEY = "agentscope-memory-current-version"

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _conflicts(method: F) -> F:
    """ABORTED naming key, expected and actual version, the actual one also in trailing metadata."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except PoolConflictError as exc:
            await context.abort(grpc.StatusCode.ABORTED, str(exc),
                                trailing_metadata=((CURRENT_VERSION_KEY, str(exc.actual)),))

    return wrapper  # type: ignore[return-value]


class PoolServicer(pb_grpc.SharedPoolServiceServicer):
    def __init__(self, pools: SharedPools, attachments: PoolAttachments) -> None:
        self.pools = pools
        self.attachments = attachments

    @grpc_errors
    @_conflicts
    async def WritePoolEntry(self, request: pb.WritePoolEntryRequest, context: grpc.aio.ServicerContext) -> pb.WritePoolEntryResponse:
        done = await self.pools.write(
            tenant_of(context), request.pool_id, request.key, request.content_json, writer=request.writer,
            metadata_json=request.metadata_json,
            expected_version=request.expected_version if request.HasField("expected_version") else None)
        return pb.WritePoolEntryResponse(entry=entry_to_proto(done.entry), sequence=done.sequence)

    @grpc_errors
    async def GetPoolEntry(self, request: pb.GetPoolEntryRequest, context: grpc.aio.ServicerContext) -> pb.GetPoolEntryResponse:
        entry = await self.pools.get(tenant_of(context), request.pool_id, request.key)
        return pb.GetPoolEntryResponse(entry=entry_to_proto(entry))

    @grpc_errors
    async def ListPoolEntries(self, request: pb.ListPoolEntriesRequest, context: grpc.aio.ServicerContext) -> pb.ListPoolEntriesResponse:
        page = await self.pools.list(tenant_of(context), request.pool_id, request.key_prefix, request.page_size,
                                     request.page_token)
        return pb.ListPoolEntriesResponse(entries=[entry_to_proto(e) for e in page.entries],
                                          next_page_token=page.next_page_token)

    @grpc_errors
    @_conflicts
    async def DeletePoolEntry(self, request: pb.DeletePoolEntryRequest, context: grpc.aio.ServicerContext) -> pb.DeletePoolEntryResponse:
        done = await self.pools.delete(
            tenant_of(context), request.pool_id, request.key, writer=request.writer,
            expected_version=request.expected_version if request.HasField("expected_version") else None)
        return pb.DeletePoolEntryResponse(deleted_version=done.deleted_version, sequence=done.sequence)

    @grpc_errors
    async def ListPoolEvents(self, request: pb.ListPoolEventsRequest, context: grpc.aio.ServicerContext) -> pb.ListPoolEventsResponse:
        page = await self.pools.events(tenant_of(context), request.pool_id, request.after_sequence, request.page_size,
                                       request.page_token)
        return pb.ListPoolEventsResponse(events=[event_to_proto(e) for e in page.events],
                                         next_page_token=page.next_page_token)

    @grpc_stream_errors
    async def WatchPoolEvents(self, request: pb.WatchPoolEventsRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.WatchPoolEventsResponse]:
        async for event in self.pools.watch(tenant_of(context), request.pool_id, request.after_sequence):
            yield pb.WatchPoolEventsResponse(event=event_to_proto(event))

    @grpc_errors
    async def RenderPoolContext(self, request: pb.RenderPoolContextRequest, context: grpc.aio.ServicerContext) -> pb.RenderPoolContextResponse:
        messages = render_format_from_proto(request.format)
        rendered = await self.pools.render(tenant_of(context), list(request.pool_ids), request.max_tokens,
                                           as_messages=messages)
        return rendered_to_proto(rendered, messages)

    @grpc_errors
    async def SetMemoryPools(self, request: pb.SetMemoryPoolsRequest, context: grpc.aio.ServicerContext) -> pb.SetMemoryPoolsResponse:
        chosen = await self.attachments.set(tenant_of(context), request.memory_id, list(request.pool_ids),
                                            request.max_tokens)
        return pb.SetMemoryPoolsResponse(pool_ids=chosen.pool_ids, max_tokens=chosen.max_tokens)

    @grpc_errors
    async def GetMemoryPools(self, request: pb.GetMemoryPoolsRequest, context: grpc.aio.ServicerContext) -> pb.GetMemoryPoolsResponse:
        chosen = await self.attachments.get(tenant_of(context), request.memory_id)
        return pb.GetMemoryPoolsResponse(pool_ids=chosen.pool_ids, max_tokens=chosen.max_tokens)
