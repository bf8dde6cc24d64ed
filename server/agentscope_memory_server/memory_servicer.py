"""`agentscope.memory.v1.MemoryService`: translates requests and calls the memory manager."""

from __future__ import annotations

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.memory.autoctx.service import AutoContextService
from agentscope_memory.memory.manager import MemoryInfo, MemoryManager
from agentscope_memory.proto_convert import msgs_from_proto, stored_to_proto
from agentscope_memory_server.auto_context_rpcs import AutoContextRpcs, auto_context_config_json
from agentscope_memory_server.errors import grpc_errors
from agentscope_memory_server.tenancy import tenant_of

_KIND_NAMES = {
    pb.MEMORY_KIND_IN_MEMORY: "IN_MEMORY",
    pb.MEMORY_KIND_AUTO_CONTEXT: "AUTO_CONTEXT",
}
_KIND_VALUES = {v: k for k, v in _KIND_NAMES.items()}


def _timestamp(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


class MemoryServicer(AutoContextRpcs, pb_grpc.MemoryServiceServicer):
    def __init__(self, manager: MemoryManager, auto_context: AutoContextService | None = None) -> None:
        self.manager = manager
        self.auto_context = auto_context

    def memory_to_proto(self, info: MemoryInfo) -> pb.Memory:
        record = info.record
        out = pb.Memory(
            memory_id=record.memory_id,
            kind=_KIND_VALUES.get(record.kind, pb.MEMORY_KIND_UNSPECIFIED),
            message_count=info.message_count,
            labels=record.labels,
            create_time=_timestamp(record.create_time),
            update_time=_timestamp(record.update_time),
            version=record.version,
        )
        if record.kind == "AUTO_CONTEXT":
            out.auto_context_config.CopyFrom(self.auto_context_config_to_proto(record.config_json))
        return out

    @grpc_errors
    async def CreateMemory(self, request: pb.CreateMemoryRequest, context: grpc.aio.ServicerContext) -> pb.CreateMemoryResponse:
        kind = _KIND_NAMES.get(request.kind)
        if kind is None:
            raise InvalidArgumentError(
                "kind", "must be MEMORY_KIND_IN_MEMORY or MEMORY_KIND_AUTO_CONTEXT"
            )
        config_json = "{}"
        if request.HasField("auto_context_config"):
            if kind != "AUTO_CONTEXT":
                raise InvalidArgumentError(
                    "auto_context_config", "is only allowed with MEMORY_KIND_AUTO_CONTEXT"
                )
            config_json = auto_context_config_json(request.auto_context_config)
        info, created = await self.manager.create_memory(
            tenant_of(context),
            request.memory_id,
            kind,
            config_json,
            dict(request.labels),
            request.allow_existing,
        )
        return pb.CreateMemoryResponse(memory=self.memory_to_proto(info), created=created)

    @grpc_errors
    async def GetMemory(self, request: pb.GetMemoryRequest, context: grpc.aio.ServicerContext) -> pb.GetMemoryResponse:
        info = await self.manager.get_memory(tenant_of(context), request.memory_id)
        return pb.GetMemoryResponse(memory=self.memory_to_proto(info))

    @grpc_errors
    async def ListMemories(self, request: pb.ListMemoriesRequest, context: grpc.aio.ServicerContext) -> pb.ListMemoriesResponse:
        page = await self.manager.list_memories(
            tenant_of(context), request.page_size, request.page_token
        )
        return pb.ListMemoriesResponse(
            memories=[self.memory_to_proto(i) for i in page.memories],
            next_page_token=page.next_page_token,
        )

    @grpc_errors
    async def DeleteMemory(self, request: pb.DeleteMemoryRequest, context: grpc.aio.ServicerContext) -> pb.DeleteMemoryResponse:
        await self.manager.delete_memory(tenant_of(context), request.memory_id)
        return pb.DeleteMemoryResponse()

    @grpc_errors
    async def AddMessages(self, request: pb.AddMessagesRequest, context: grpc.aio.ServicerContext) -> pb.AddMessagesResponse:
        msgs = msgs_from_proto(request.messages)
        result = await self.manager.add_messages(
            tenant_of(context), request.memory_id, msgs, request.request_id or None
        )
        return pb.AddMessagesResponse(
            message_count=result.message_count, replayed=result.replayed, version=result.version,
            etag=result.etag, previous_etag=result.previous_etag,
        )

    @grpc_errors
    async def GetMessages(self, request: pb.GetMessagesRequest, context: grpc.aio.ServicerContext) -> pb.GetMessagesResponse:
        page = await self.manager.get_messages_page(
            tenant_of(context), request.memory_id, request.page_size, request.page_token, request.if_none_match
        )
        return pb.GetMessagesResponse(
            messages=[stored_to_proto(d) for d in page.stored],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
            etag=page.etag,
            not_modified=page.not_modified,
        )

    @grpc_errors
    async def DeleteMessage(self, request: pb.DeleteMessageRequest, context: grpc.aio.ServicerContext) -> pb.DeleteMessageResponse:
        deleted, count = await self.manager.delete_message(
            tenant_of(context), request.memory_id, request.index
        )
        return pb.DeleteMessageResponse(deleted=deleted, message_count=count)

    @grpc_errors
    async def ClearMessages(self, request: pb.ClearMessagesRequest, context: grpc.aio.ServicerContext) -> pb.ClearMessagesResponse:
        await self.manager.clear_messages(tenant_of(context), request.memory_id)
        return pb.ClearMessagesResponse()
