"""The AUTO_CONTEXT RPCs of MemoryService: translate, call `AutoContextService`, translate back."""

from __future__ import annotations

from dataclasses import asdict
from typing import AsyncIterator

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.errors import InvalidArgumentError, UnimplementedError
from agentscope_memory.memory.autoctx.config import CL100K, IMPROVED, JAVA_ESTIMATE, PARITY, AutoContextConfig, PromptConfig
from agentscope_memory.memory.autoctx.engine import CompressionEvent, PlanNote, PlanSubtask
from agentscope_memory.memory.autoctx.service import AutoContextService, CompressOutcome
from agentscope_memory.message import to_json_text
from agentscope_memory.proto_convert import msg_from_proto, msg_to_proto, msgs_to_proto, stored_to_proto
from agentscope_memory_server.errors import grpc_errors, grpc_stream_errors
from agentscope_memory_server.tenancy import tenant_of

_NUMERIC = ("msg_threshold", "max_token", "token_ratio", "last_keep", "large_payload_threshold",
            "offload_single_preview", "min_consecutive_tool_messages", "current_round_compression_ratio",
            "min_compression_token_threshold")
_PROMPTS = ("previous_round_tool_compress_prompt", "previous_round_summary_prompt",
            "current_round_large_message_prompt", "current_round_compress_prompt")
_PROFILES = {pb.AUTO_CONTEXT_PROFILE_UNSPECIFIED: PARITY, pb.AUTO_CONTEXT_PROFILE_PARITY: PARITY,
             pb.AUTO_CONTEXT_PROFILE_IMPROVED: IMPROVED}
_COUNTERS = {pb.TOKEN_COUNTER_UNSPECIFIED: JAVA_ESTIMATE, pb.TOKEN_COUNTER_JAVA_ESTIMATE: JAVA_ESTIMATE,
             pb.TOKEN_COUNTER_CL100K: CL100K}


def auto_context_config_json(config: pb.AutoContextConfig) -> str:
    """Validate a wire config and return its stored JSON form (unset fields take Java's defaults)."""
    values = {name: getattr(config, name) for name in _NUMERIC if config.HasField(name)}
    prompts = {name: getattr(config.custom_prompt, name) or None for name in _PROMPTS}
    if config.profile not in _PROFILES:
        raise InvalidArgumentError("auto_context_config.profile", f"unknown profile {config.profile}")
    if config.token_counter not in _COUNTERS:
        raise InvalidArgumentError("auto_context_config.token_counter", f"unknown token counter {config.token_counter}")
    return AutoContextConfig(
        custom_prompt=PromptConfig(**prompts), profile=_PROFILES[config.profile],
        token_counter=_COUNTERS[config.token_counter], **values,
    ).validate().to_json()


def event_to_proto(seq: int, event: CompressionEvent) -> pb.CompressionEvent:
    out = pb.CompressionEvent(
        event_type=event.event_type, timestamp=event.timestamp,
        compressed_message_count=event.compressed_message_count,
        metadata_json=to_json_text(event.metadata) if event.metadata else "", sequence=seq,
    )
    for name in ("previous_message_id", "next_message_id", "compressed_message_id"):
        value = getattr(event, name)
        if value is not None:
            setattr(out, name, value)
    return out


def _plan(plan: pb.PlanNote) -> PlanNote:
    return PlanNote(plan.description, plan.expected_outcome, [PlanSubtask(s.name, s.state or "todo") for s in plan.subtasks])


class AutoContextRpcs:
    """Mixed into the MemoryService servicer, which provides `self.auto_context`."""

    auto_context: AutoContextService | None

    def _service(self) -> AutoContextService:
        if self.auto_context is None:
            raise UnimplementedError("AutoContextMemory is not enabled on this server")
        return self.auto_context

    def auto_context_config_to_proto(self, config_json: str) -> pb.AutoContextConfig:
        config = AutoContextConfig.from_json(config_json)
        values = {k: v for k, v in asdict(config).items() if k in _NUMERIC}
        return pb.AutoContextConfig(
            custom_prompt=pb.PromptConfig(**{k: v or "" for k, v in asdict(config.custom_prompt).items()}),
            profile=pb.AUTO_CONTEXT_PROFILE_IMPROVED if config.profile == IMPROVED else pb.AUTO_CONTEXT_PROFILE_PARITY,
            token_counter=pb.TOKEN_COUNTER_CL100K if config.token_counter == CL100K else pb.TOKEN_COUNTER_JAVA_ESTIMATE,
            **values,
        )

    @staticmethod
    def _outcome(outcome: CompressOutcome) -> dict:
        return {"compressed": outcome.compressed, "events": [event_to_proto(s, e) for s, e in outcome.events]}

    @grpc_errors
    async def CompressIfNeeded(self, request: pb.CompressIfNeededRequest, context: grpc.aio.ServicerContext) -> pb.CompressIfNeededResponse:
        outcome = await self._service().compress_if_needed(tenant_of(context), request.memory_id)
        return pb.CompressIfNeededResponse(**self._outcome(outcome), tokens_before=outcome.tokens_before,
                                           tokens_after=outcome.tokens_after, message_count=outcome.message_count)

    @grpc_errors
    async def PrepareReasoningInput(self, request: pb.PrepareReasoningInputRequest, context: grpc.aio.ServicerContext) -> pb.PrepareReasoningInputResponse:
        prompt = request.system_prompt if request.HasField("system_prompt") else None
        system = msg_from_proto(request.system_message, "system_message") if request.HasField("system_message") else None
        msgs, outcome = await self._service().prepare_reasoning_input(tenant_of(context), request.memory_id, prompt, system)
        return pb.PrepareReasoningInputResponse(messages=msgs_to_proto(msgs), **self._outcome(outcome))

    @grpc_errors
    async def GetOriginalMessages(self, request: pb.GetOriginalMessagesRequest, context: grpc.aio.ServicerContext) -> pb.GetOriginalMessagesResponse:
        if request.page_size < 0:
            raise InvalidArgumentError("page_size", "must not be negative")
        size = min(request.page_size or 1000, 10_000)
        after = 0
        if request.page_token:
            if not request.page_token.isdigit():
                raise InvalidArgumentError("page_token", "is not a page token issued for this listing")
            after = int(request.page_token)
        rows, total = await self._service().original_page(tenant_of(context), request.memory_id, after, size + 1)
        more = len(rows) > size
        rows = rows[:size]
        return pb.GetOriginalMessagesResponse(
            messages=[stored_to_proto(d) for _, d in rows],
            next_page_token=str(rows[-1][0]) if more and rows else "", total_size=total)

    @grpc_errors
    async def GetInteractionMessages(self, request: pb.GetInteractionMessagesRequest, context: grpc.aio.ServicerContext) -> pb.GetInteractionMessagesResponse:
        msgs = await self._service().interaction(tenant_of(context), request.memory_id)
        return pb.GetInteractionMessagesResponse(messages=msgs_to_proto(msgs))

    @grpc_errors
    async def ReloadContext(self, request: pb.ReloadContextRequest, context: grpc.aio.ServicerContext) -> pb.ReloadContextResponse:
        msgs, found = await self._service().reload(tenant_of(context), request.memory_id, request.working_context_offload_uuid)
        return pb.ReloadContextResponse(messages=[msg_to_proto(m) for m in msgs], found=found)

    @grpc_errors
    async def ListCompressionEvents(self, request: pb.ListCompressionEventsRequest, context: grpc.aio.ServicerContext) -> pb.ListCompressionEventsResponse:
        events = await self._service().events(tenant_of(context), request.memory_id, request.after_sequence)
        return pb.ListCompressionEventsResponse(events=[event_to_proto(s, e) for s, e in events])

    @grpc_stream_errors
    async def WatchCompressionEvents(self, request: pb.WatchCompressionEventsRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.WatchCompressionEventsResponse]:
        async for seq, event in self._service().watch(tenant_of(context), request.memory_id, request.after_sequence):
            yield pb.WatchCompressionEventsResponse(event=event_to_proto(seq, event))

    @grpc_errors
    async def AttachPlanNote(self, request: pb.AttachPlanNoteRequest, context: grpc.aio.ServicerContext) -> pb.AttachPlanNoteResponse:
        plan = _plan(request.plan) if request.HasField("plan") else None
        await self._service().attach_plan(tenant_of(context), request.memory_id, plan)
        return pb.AttachPlanNoteResponse()
