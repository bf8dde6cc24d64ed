"""The AUTO_CONTEXT RPCs of MemoryService: translate, call `AutoContextService`, translate back."""

from __future__ import annotations

from typing import AsyncIterator

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.convert.encoded import Encoded, with_stored_messages
from agentscope_memory.convert.from_proto import msg_from_proto, plan_from_proto
from agentscope_memory.convert.to_proto import event_to_proto, msg_to_proto, msgs_to_proto
from agentscope_memory.short_term.auto_context.service import AutoContextService, CompressOutcome
from agentscope_memory_server.errors import grpc_errors, grpc_stream_errors
from agentscope_memory_server.tenancy import tenant_of


class AutoContextRpcs:
    """Mixed into the MemoryService servicer, which provides `self.auto_context`."""

    auto_context: AutoContextService

    @staticmethod
    def _outcome(outcome: CompressOutcome) -> dict:
        return {"compressed": outcome.compressed, "events": [event_to_proto(s, e) for s, e in outcome.events]}

    @grpc_errors
    async def CompressIfNeeded(self, request: pb.CompressIfNeededRequest, context: grpc.aio.ServicerContext) -> pb.CompressIfNeededResponse:
        outcome = await self.auto_context.compress_if_needed(tenant_of(context), request.memory_id)
        return pb.CompressIfNeededResponse(**self._outcome(outcome), tokens_before=outcome.tokens_before,
                                           tokens_after=outcome.tokens_after, message_count=outcome.message_count)

    @grpc_errors
    async def PrepareReasoningInput(self, request: pb.PrepareReasoningInputRequest, context: grpc.aio.ServicerContext) -> pb.PrepareReasoningInputResponse:
        prompt = request.system_prompt if request.HasField("system_prompt") else None
        system = msg_from_proto(request.system_message, "system_message") if request.HasField("system_message") else None
        page = await self.auto_context.prepare_reasoning_input(
            tenant_of(context), request.memory_id, prompt, system, request.page_size, request.page_token)
        outcome = self._outcome(page.outcome) if page.outcome is not None else {}
        return pb.PrepareReasoningInputResponse(messages=msgs_to_proto(page.items), next_page_token=page.next_page_token,
                                                **outcome)

    @grpc_errors
    async def GetOriginalMessages(self, request: pb.GetOriginalMessagesRequest, context: grpc.aio.ServicerContext) -> Encoded:
        page = await self.auto_context.original_page(
            tenant_of(context), request.memory_id, request.page_size, request.page_token)
        return with_stored_messages(pb.GetOriginalMessagesResponse(
            next_page_token=page.next_page_token, total_size=page.total_size), page.items)

    @grpc_errors
    async def GetInteractionMessages(self, request: pb.GetInteractionMessagesRequest, context: grpc.aio.ServicerContext) -> pb.GetInteractionMessagesResponse:
        page = await self.auto_context.interaction(
            tenant_of(context), request.memory_id, request.page_size, request.page_token)
        return pb.GetInteractionMessagesResponse(messages=msgs_to_proto(page.items), next_page_token=page.next_page_token)

    @grpc_errors
    async def ReloadContext(self, request: pb.ReloadContextRequest, context: grpc.aio.ServicerContext) -> pb.ReloadContextResponse:
        page, found = await self.auto_context.reload(
            tenant_of(context), request.memory_id, request.working_context_offload_uuid, request.page_size,
            request.page_token)
        return pb.ReloadContextResponse(messages=[msg_to_proto(m) for m in page.items], found=found,
                                        next_page_token=page.next_page_token)

    @grpc_errors
    async def ListCompressionEvents(self, request: pb.ListCompressionEventsRequest, context: grpc.aio.ServicerContext) -> pb.ListCompressionEventsResponse:
        page = await self.auto_context.events(
            tenant_of(context), request.memory_id, request.after_sequence, request.page_size, request.page_token)
        return pb.ListCompressionEventsResponse(events=[event_to_proto(s, e) for s, e in page.items],
                                                next_page_token=page.next_page_token)

    @grpc_stream_errors
    async def WatchCompressionEvents(self, request: pb.WatchCompressionEventsRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.WatchCompressionEventsResponse]:
        async for seq, event in self.auto_context.watch(tenant_of(context), request.memory_id, request.after_sequence):
            yield pb.WatchCompressionEventsResponse(event=event_to_proto(seq, event))

    @grpc_errors
    async def AttachPlanNote(self, request: pb.AttachPlanNoteRequest, context: grpc.aio.ServicerContext) -> pb.AttachPlanNoteResponse:
        plan = plan_from_proto(request.plan) if request.HasField("plan") else None
        await self.auto_context.attach_plan(tenant_of(context), request.memory_id, plan)
        return pb.AttachPlanNoteResponse()
