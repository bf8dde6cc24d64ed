"""`agentscope.memory.v1.StateService`: memory state in AgentScope session terms."""

from __future__ import annotations

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.from_proto import entry_from_proto
from agentscope_memory.convert.to_proto import entry_to_proto
from agentscope_memory.session.exchange import SessionExchange
from agentscope_memory.short_term.manager import MemoryManager
from agentscope_memory_server.errors import grpc_errors
from agentscope_memory_server.tenancy import tenant_of


class StateServicer(pb_grpc.StateServiceServicer):
    def __init__(self, manager: MemoryManager, sessions: SessionExchange) -> None:
        self.manager = manager
        self.sessions = sessions

    @grpc_errors
    async def SaveState(self, request: pb.SaveStateRequest, context: grpc.aio.ServicerContext) -> pb.SaveStateResponse:
        record, entries = await self.manager.save_state(tenant_of(context), request.memory_id)
        return pb.SaveStateResponse(entries=[entry_to_proto(e) for e in entries], version=record.version)

    @grpc_errors
    async def LoadState(self, request: pb.LoadStateRequest, context: grpc.aio.ServicerContext) -> pb.LoadStateResponse:
        entries = [entry_from_proto(e, i) for i, e in enumerate(request.entries)]
        expected = request.expected_version if request.HasField("expected_version") else None
        version = await self.manager.load_state(tenant_of(context), request.memory_id, entries, expected)
        return pb.LoadStateResponse(version=version)

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
