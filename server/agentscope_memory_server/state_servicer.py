"""`agentscope.memory.v1.StateService`: memory state in AgentScope session terms."""

from __future__ import annotations

from typing import AsyncIterator

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.from_proto import entry_from_proto
from agentscope_memory.convert.state_chunks import join_pieces, split_entries
from agentscope_memory.convert.to_proto import entry_to_proto
from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError, ResourceExhaustedError
from agentscope_memory.session.exchange import SessionExchange
from agentscope_memory.short_term.manager import MemoryManager
from agentscope_memory_server.errors import grpc_errors, grpc_stream_errors
from agentscope_memory_server.tenancy import tenant_of


class StateServicer(pb_grpc.StateServiceServicer):
    def __init__(self, manager: MemoryManager, sessions: SessionExchange) -> None:
        self.manager = manager
        self.sessions = sessions

    @grpc_errors
    async def SaveState(self, request: pb.SaveStateRequest, context: grpc.aio.ServicerContext) -> pb.SaveStateResponse:
        record, entries = await self.manager.save_state(tenant_of(context), request.memory_id)
        response = pb.SaveStateResponse(entries=[entry_to_proto(e) for e in entries], version=record.version)
        # A response over the budget would not reach a stock client (4 MiB receive limit).
        if response.ByteSize() > self.manager.limits.max_page_bytes:
            raise FailedPreconditionError(
                f"the state of memory {request.memory_id!r} is {response.ByteSize()} bytes, more than one "
                f"response carries ({self.manager.limits.max_page_bytes}); use StreamSaveState"
            )
        return response

    @grpc_stream_errors
    async def StreamSaveState(self, request: pb.StreamSaveStateRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.StreamSaveStateResponse]:
        record, entries = await self.manager.save_state(tenant_of(context), request.memory_id)
        for chunk in split_entries([entry_to_proto(e) for e in entries], self.manager.limits.max_page_bytes):
            yield pb.StreamSaveStateResponse(entries=chunk, version=record.version)

    @grpc_errors
    async def StreamLoadState(self, requests: AsyncIterator[pb.StreamLoadStateRequest], context: grpc.aio.ServicerContext) -> pb.StreamLoadStateResponse:
        memory_id = ""
        expected: int | None = None
        pieces: list[pb.StateEntry] = []
        size = 0
        first = True
        async for request in requests:
            if first:
                memory_id = request.memory_id
                expected = request.expected_version if request.HasField("expected_version") else None
                first = False
            elif request.memory_id and request.memory_id != memory_id:
                raise InvalidArgumentError("memory_id", "must be the same in every piece of the stream")
            size += request.ByteSize()
            if size > self.manager.limits.max_state_bytes:
                raise ResourceExhaustedError("entries", f"hold more than {self.manager.limits.max_state_bytes} bytes in all")
            pieces.extend(request.entries)
        joined = join_pieces(pieces, self.manager.limits.max_state_bytes)
        entries = [entry_from_proto(e, i) for i, e in enumerate(joined)]
        result = await self.manager.load_state(tenant_of(context), memory_id, entries, expected)
        return pb.StreamLoadStateResponse(version=result.version, etag=result.etag, previous_etag=result.previous_etag)

    @grpc_errors
    async def LoadState(self, request: pb.LoadStateRequest, context: grpc.aio.ServicerContext) -> pb.LoadStateResponse:
        for i, piece in enumerate(request.entries):
            if piece.partial:
                raise InvalidArgumentError(f"entries[{i}].partial", "is for StreamLoadState only")
        entries = [entry_from_proto(e, i) for i, e in enumerate(request.entries)]
        expected = request.expected_version if request.HasField("expected_version") else None
        result = await self.manager.load_state(tenant_of(context), request.memory_id, entries, expected)
        return pb.LoadStateResponse(version=result.version, etag=result.etag, previous_etag=result.previous_etag)

    @grpc_errors
    async def ExportSession(self, request: pb.ExportSessionRequest, context: grpc.aio.ServicerContext) -> pb.ExportSessionResponse:
        directory, keys = await self.sessions.export(
            tenant_of(context), request.session_id, list(request.memory_ids)
        )
        return pb.ExportSessionResponse(directory=str(directory), keys=keys)

    @grpc_errors
    async def ImportSession(self, request: pb.ImportSessionRequest, context: grpc.aio.ServicerContext) -> pb.ImportSessionResponse:
        expected = request.expected_version if request.HasField("expected_version") else None
        version, keys = await self.sessions.import_(
            tenant_of(context), request.session_id, request.memory_id, expected
        )
        return pb.ImportSessionResponse(version=version, keys=keys)
