"""`agentscope.memory.v1.AgentStateService`: AgentScope-Java 2.x agent state."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import agent_state_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    agent_state_service_pb2_grpc as pb_grpc,
)
from agentscope_memory.agent_state import AgentStateEngine, StateConflictError, ValueTooLargeError
from agentscope_memory.convert.agent_state import (
    expected_from_proto,
    join_put_stream,
    keys_to_proto,
    list_page_to_proto,
    session_ids_to_proto,
    slot_from_proto,
    value_to_proto,
    value_to_stream,
)
from agentscope_memory.errors import FailedPreconditionError
from agentscope_memory_server.errors import grpc_errors, grpc_stream_errors
from agentscope_memory_server.tenancy import tenant_of

# Trailing metadata of an ABORTED compare-and-set: the version that won.
CURRENT_VERSION_KEY = "agentscope-memory-current-version"

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def _conflicts(method: F) -> F:
    """ABORTED with the current version in the message and in trailing metadata."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except StateConflictError as exc:
            await context.abort(
                grpc.StatusCode.ABORTED, str(exc),
                trailing_metadata=((CURRENT_VERSION_KEY, str(exc.current_version)),),
            )

    return wrapper  # type: ignore[return-value]


class AgentStateServicer(pb_grpc.AgentStateServiceServicer):
    def __init__(self, engine: AgentStateEngine) -> None:
        self.engine = engine

    @grpc_errors
    @_conflicts
    async def PutValue(self, request: pb.PutValueRequest, context: grpc.aio.ServicerContext) -> pb.PutValueResponse:
        version = await self.engine.put_value(
            tenant_of(context), slot_from_proto(request), request.key, request.json, expected_from_proto(request)
        )
        return pb.PutValueResponse(version=version)

    @grpc_errors
    async def GetValue(self, request: pb.GetValueRequest, context: grpc.aio.ServicerContext) -> pb.GetValueResponse:
        try:
            value = await self.engine.get_value(tenant_of(context), slot_from_proto(request), request.key)
        except ValueTooLargeError as exc:
            # Never a response a stock client could not receive (RESOURCE_EXHAUSTED from its
            # transport, with no word on what to do).
            raise FailedPreconditionError(
                f"value {exc.key!r} is {exc.size} bytes, more than one GetValue response carries"
                f" ({exc.limit}, max_state_value_bytes); read it with StreamGetValue"
            ) from None
        return value_to_proto(value)

    @grpc_errors
    @_conflicts
    async def StreamPutValue(
        self, requests: AsyncIterator[pb.StreamPutValueRequest], context: grpc.aio.ServicerContext
    ) -> pb.StreamPutValueResponse:
        # The pieces are held until the stream ends, then written in one transaction: a stream
        # that fails or is cancelled midway stores nothing.
        limit = self.engine.limits.max_streamed_value_bytes
        joined = await join_put_stream(requests, limit, self.engine.check_put)
        version = await self.engine.put_value(
            tenant_of(context), joined.slot, joined.key, joined.json, joined.expected_version, streamed=True
        )
        return pb.StreamPutValueResponse(version=version)

    @grpc_stream_errors
    async def StreamGetValue(
        self, request: pb.StreamGetValueRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamGetValueResponse]:
        # One read (a snapshot), then its pieces.
        value = await self.engine.get_value(tenant_of(context), slot_from_proto(request), request.key, whole=True)
        for piece in value_to_stream(value):
            yield piece

    @grpc_errors
    @_conflicts
    async def PutList(self, request: pb.PutListRequest, context: grpc.aio.ServicerContext) -> pb.PutListResponse:
        written = await self.engine.put_list(
            tenant_of(context), slot_from_proto(request), request.key, request.items, expected_from_proto(request)
        )
        return pb.PutListResponse(version=written.version, length=written.length)

    @grpc_errors
    @_conflicts
    async def AppendList(self, request: pb.AppendListRequest, context: grpc.aio.ServicerContext) -> pb.AppendListResponse:
        written = await self.engine.append_list(
            tenant_of(context), slot_from_proto(request), request.key, request.items,
            request.expected_length, expected_from_proto(request),
        )
        return pb.AppendListResponse(version=written.version, length=written.length)

    @grpc_errors
    @_conflicts
    async def GetList(self, request: pb.GetListRequest, context: grpc.aio.ServicerContext) -> pb.GetListResponse:
        page = await self.engine.get_list(
            tenant_of(context), slot_from_proto(request), request.key, request.page_size, request.page_token
        )
        return list_page_to_proto(page)

    @grpc_errors
    async def SessionExists(self, request: pb.SessionExistsRequest, context: grpc.aio.ServicerContext) -> pb.SessionExistsResponse:
        return pb.SessionExistsResponse(exists=await self.engine.session_exists(tenant_of(context), slot_from_proto(request)))

    @grpc_errors
    async def DeleteSession(self, request: pb.DeleteSessionRequest, context: grpc.aio.ServicerContext) -> pb.DeleteSessionResponse:
        return pb.DeleteSessionResponse(deleted=await self.engine.delete_session(tenant_of(context), slot_from_proto(request)))

    @grpc_errors
    async def DeleteKey(self, request: pb.DeleteKeyRequest, context: grpc.aio.ServicerContext) -> pb.DeleteKeyResponse:
        deleted = await self.engine.delete_key(tenant_of(context), slot_from_proto(request), request.key, list_=request.list)
        return pb.DeleteKeyResponse(deleted=deleted)

    @grpc_errors
    async def ListKeys(self, request: pb.ListKeysRequest, context: grpc.aio.ServicerContext) -> pb.ListKeysResponse:
        page = await self.engine.keys(tenant_of(context), slot_from_proto(request), request.page_size, request.page_token)
        return keys_to_proto(page)

    @grpc_errors
    async def ListSessionIds(self, request: pb.ListSessionIdsRequest, context: grpc.aio.ServicerContext) -> pb.ListSessionIdsResponse:
        page = await self.engine.list_session_ids(
            tenant_of(context), request.user_id, request.page_size, request.page_token
        )
        return session_ids_to_proto(page)
