"""The reflection and consolidation RPCs of `agentscope.memory.v1.LongTermLifecycleService`,
as a mixin the lifecycle servicer composes (`ReflectionRpcs`), plus run metrics."""

from __future__ import annotations

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram

from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.from_proto import scope_from_proto
from agentscope_memory.convert.lifecycle_reflect import (
    consolidation_overrides_from_proto,
    consolidation_report_to_proto,
    forget_overrides_from_proto,
    forget_report_to_proto,
    reflection_overrides_from_proto,
    reflection_result_to_proto,
)
from agentscope_memory.convert.to_proto import long_term_item_to_proto
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.validation.ids import check_id
from agentscope_memory.lifecycle.reflect_service import ReflectLifecycle
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, cut_to_budget
from agentscope_memory_server.errors import grpc_errors
from agentscope_memory_server.tenancy import tenant_of


class ReflectionRpcs:
    """TriggerReflection and Consolidate over `self.reflect_lifecycle`."""

    reflect_lifecycle: ReflectLifecycle

    @grpc_errors
    async def TriggerReflection(self, request: pb.TriggerReflectionRequest,
                                context: grpc.aio.ServicerContext) -> pb.TriggerReflectionResponse:
        if not request.HasField("scope"):
            raise InvalidArgumentError("scope", "is required")
        result = await self.reflect_lifecycle.reflector.reflect(
            tenant_of(context), scope_from_proto(request.scope), **reflection_overrides_from_proto(request))
        return reflection_result_to_proto(result)

    @grpc_errors
    async def Consolidate(self, request: pb.ConsolidateRequest, context: grpc.aio.ServicerContext) -> pb.ConsolidateResponse:
        if not request.HasField("scope"):
            raise InvalidArgumentError("scope", "is required")
        report = await self.reflect_lifecycle.consolidator.consolidate_scope(
            tenant_of(context), scope_from_proto(request.scope), dry_run=request.dry_run,
            **consolidation_overrides_from_proto(request))
        return consolidation_report_to_proto(report)


class ForgettingRpcs:
    """Forget, RestoreLongTermMemory and PurgeLongTermMemories over `self.reflect_lifecycle`."""

    reflect_lifecycle: ReflectLifecycle
    max_page_bytes: int = DEFAULT_PAGE_BYTES

    @grpc_errors
    async def Forget(self, request: pb.ForgetRequest, context: grpc.aio.ServicerContext) -> pb.ForgetResponse:
        if not request.HasField("scope"):
            raise InvalidArgumentError("scope", "is required")
        if not 0 <= request.max_results <= 1000:
            raise InvalidArgumentError("max_results", f"must be between 0 and 1000, not {request.max_results}")
        report = await self.reflect_lifecycle.forgetter.forget(
            tenant_of(context), scope_from_proto(request.scope), dry_run=request.dry_run,
            **forget_overrides_from_proto(request))
        response = forget_report_to_proto(report, request.max_results)
        # Up to 1000 whole memories (64 KiB of metadata each) could outgrow a stock client's
        # 4 MiB, after the memories were forgotten: the list (lowest retention first) keeps what
        # fits; total_forgotten still counts all.
        kept = cut_to_budget(response.forgotten, lambda f: f.ByteSize(), self.max_page_bytes)
        del response.forgotten[kept:]
        return response

    @grpc_errors
    async def RestoreLongTermMemory(self, request: pb.RestoreLongTermMemoryRequest,
                                    context: grpc.aio.ServicerContext) -> pb.RestoreLongTermMemoryResponse:
        item = await self.reflect_lifecycle.forgetter.restore(tenant_of(context), request.id)
        return pb.RestoreLongTermMemoryResponse(memory=long_term_item_to_proto(item))

    @grpc_errors
    async def PurgeLongTermMemories(self, request: pb.PurgeLongTermMemoriesRequest,
                                    context: grpc.aio.ServicerContext) -> pb.PurgeLongTermMemoriesResponse:
        for i, memory_id in enumerate(request.ids):
            check_id(memory_id, f"ids[{i}]")
        purged = await self.reflect_lifecycle.forgetter.purge(tenant_of(context), list(request.ids))
        return pb.PurgeLongTermMemoriesResponse(purged_ids=purged)


class ReflectionServicer(ReflectionRpcs, ForgettingRpcs, pb_grpc.LongTermLifecycleServiceServicer):
    """`LongTermLifecycleService`: reflection, consolidation, forgetting, restore and purge."""

    def __init__(self, reflect_lifecycle: ReflectLifecycle, max_page_bytes: int = DEFAULT_PAGE_BYTES) -> None:
        self.reflect_lifecycle = reflect_lifecycle
        self.max_page_bytes = max_page_bytes


class LifecycleMetrics:
    """Prometheus series of the lifecycle jobs (RPC-triggered and background alike): runs,
    memories reflected or merged, and run durations, per job."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.runs = Counter("agentscope_memory_lifecycle_job_runs", "lifecycle job runs", ["job"], registry=registry)
        self.memories = Counter("agentscope_memory_lifecycle_job_memories",
                                "memories changed by lifecycle jobs (reflections and merges written, memories forgotten)", ["job"], registry=registry)
        self.seconds = Histogram("agentscope_memory_lifecycle_job_seconds", "lifecycle job run time", ["job"],
                                 buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800), registry=registry)

    def record(self, job: str, memories: int, seconds: float) -> None:
        self.runs.labels(job).inc()
        self.memories.labels(job).inc(memories)
        self.seconds.labels(job).observe(seconds)

    def observe(self, reflect_lifecycle: ReflectLifecycle) -> None:
        reflect_lifecycle.reflector.observers.append(self.record)
        reflect_lifecycle.consolidator.observers.append(self.record)
        reflect_lifecycle.forgetter.observers.append(self.record)
