"""`agentscope.memory.v1.ScopeService`: translates requests and calls the scope engine."""

from __future__ import annotations

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.from_proto import auto_context_config_from_proto, kind_from_proto, scope_from_proto
from agentscope_memory.convert.scopes import inherited_to_proto
from agentscope_memory.convert.to_proto import memory_to_proto, scope_to_proto
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.scopes.engine import ScopeEngine
from agentscope_memory.short_term.description import describe
from agentscope_memory_server.errors import grpc_errors
from agentscope_memory_server.tenancy import tenant_of


class ScopeServicer(pb_grpc.ScopeServiceServicer):
    def __init__(self, scopes: ScopeEngine) -> None:
        self.scopes = scopes

    @grpc_errors
    async def SetParent(self, request: pb.SetParentRequest, context: grpc.aio.ServicerContext) -> pb.SetParentResponse:
        chain = await self.scopes.set_parent(tenant_of(context), request.memory_id, request.parent_memory_id)
        return pb.SetParentResponse(ancestor_memory_ids=chain)

    @grpc_errors
    async def CreateChild(self, request: pb.CreateChildRequest, context: grpc.aio.ServicerContext) -> pb.CreateChildResponse:
        kind = kind_from_proto(request.kind) if request.kind else None
        config_json = None
        if request.HasField("auto_context_config"):
            config_json = auto_context_config_from_proto(request.auto_context_config).to_json()
            if kind is None:
                raise InvalidArgumentError("auto_context_config", "needs kind; without one the parent's is copied")
        info, chain = await self.scopes.create_child(
            tenant_of(context), request.parent_memory_id, request.memory_id, kind, config_json, dict(request.labels)
        )
        return pb.CreateChildResponse(memory=memory_to_proto(describe(info.record, info.message_count)),
                                      ancestor_memory_ids=chain)

    @grpc_errors
    async def GetLineage(self, request: pb.GetLineageRequest, context: grpc.aio.ServicerContext) -> pb.GetLineageResponse:
        lineage = await self.scopes.lineage(tenant_of(context), request.memory_id)
        return pb.GetLineageResponse(parent_memory_id=lineage.parent, ancestor_memory_ids=lineage.ancestors,
                                     child_count=lineage.child_count)

    @grpc_errors
    async def ListChildren(self, request: pb.ListChildrenRequest, context: grpc.aio.ServicerContext) -> pb.ListChildrenResponse:
        children, token = await self.scopes.list_children(
            tenant_of(context), request.memory_id, request.page_size, request.page_token
        )
        return pb.ListChildrenResponse(child_memory_ids=children, next_page_token=token)

    @grpc_errors
    async def ListInheritedMessages(
        self, request: pb.ListInheritedMessagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListInheritedMessagesResponse:
        page = await self.scopes.list_inherited(tenant_of(context), request.memory_id, request.page_size,
                                                request.page_token)
        return pb.ListInheritedMessagesResponse(messages=[inherited_to_proto(m) for m in page.messages],
                                                next_page_token=page.next_page_token)

    @grpc_errors
    async def SetLongTermParent(
        self, request: pb.SetLongTermParentRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetLongTermParentResponse:
        parent = scope_from_proto(request.parent, "parent") if request.HasField("parent") else None
        chain = await self.scopes.set_long_term_parent(tenant_of(context), scope_from_proto(request.scope), parent)
        return pb.SetLongTermParentResponse(ancestors=[scope_to_proto(s) for s in chain])

    @grpc_errors
    async def GetLongTermLineage(
        self, request: pb.GetLongTermLineageRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetLongTermLineageResponse:
        lineage = await self.scopes.long_term_lineage(tenant_of(context), scope_from_proto(request.scope))
        return pb.GetLongTermLineageResponse(ancestors=[scope_to_proto(s) for s in lineage.ancestors],
                                             child_count=lineage.child_count)
