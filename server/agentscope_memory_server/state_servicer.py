"""`agentscope.memory.v1.StateService`: memory state in AgentScope session terms."""

from __future__ import annotations

from pathlib import Path

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as pb_grpc
from agentscope_memory.memory.manager import MemoryManager
from agentscope_memory.proto_convert import entry_from_proto, entry_to_proto
from agentscope_memory.session.exchange import export_to_session, import_from_session
from agentscope_memory.session.json_session import JsonSession
from agentscope_memory_server.errors import grpc_errors
from agentscope_memory_server.tenancy import tenant_of


class StateServicer(pb_grpc.StateServiceServicer):
    def __init__(self, manager: MemoryManager, sessions_dir: Path) -> None:
        self.manager = manager
        self.sessions_dir = sessions_dir

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

    def _session(self, tenant: str) -> JsonSession:
        # Each tenant gets its own sessions root, so no session id reaches another tenant's files.
        return JsonSession(self.sessions_dir / tenant)

    @grpc_errors
    async def ExportSession(self, request: pb.ExportSessionRequest, context: grpc.aio.ServicerContext) -> pb.ExportSessionResponse:
        tenant = tenant_of(context)
        directory, keys = await export_to_session(
            self.manager, tenant, self._session(tenant), request.session_id, list(request.memory_ids)
        )
        return pb.ExportSessionResponse(directory=str(directory), keys=keys)

    @grpc_errors
    async def ImportSession(self, request: pb.ImportSessionRequest, context: grpc.aio.ServicerContext) -> pb.ImportSessionResponse:
        tenant = tenant_of(context)
        expected = request.expected_version if request.HasField("expected_version") else None
        version, keys = await import_from_session(
            self.manager, tenant, self._session(tenant), request.session_id, request.memory_id, expected
        )
        return pb.ImportSessionResponse(version=version, keys=keys)
