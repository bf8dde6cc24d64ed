"""Python clients for reflection, consolidation and compressed recall: asyncio and blocking over
gRPC (`LongTermLifecycleService`, `SearchLongTermMemories` with `compress`), and local mode over
an in-process service. Results are library types (`ReflectionResult`, `ConsolidationReport`).

Neither call is retried on UNAVAILABLE: both write (a rerun is safe, but is the caller's choice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as ltm_grpc
from agentscope_memory.client._base import AsyncGrpcClient, BlockingGrpcClient
from agentscope_memory.client.local import Blocking, _LocalClient
from agentscope_memory.convert.from_proto import long_term_item_from_proto
from agentscope_memory.convert.lifecycle_reflect import (
    forget_report_from_proto,
    forget_request,
    consolidate_request,
    consolidation_report_from_proto,
    reflection_request,
    reflection_result_from_proto,
)
from agentscope_memory.convert.to_proto import scope_to_proto
from agentscope_memory.errors import UnimplementedError
from agentscope_memory.lifecycle.consolidation import ConsolidationReport
from agentscope_memory.lifecycle.forgetting import ForgetReport
from agentscope_memory.lifecycle.reflection import ReflectionResult
from agentscope_memory.long_term.engine import LongTermItem, Scope
from agentscope_memory.validation.ids import check_id

if TYPE_CHECKING:
    from agentscope_memory.lifecycle.reflect_service import ReflectLifecycle
    from agentscope_memory.service import Service, ServiceSettings


@dataclass(frozen=True)
class CompressedResults:
    """A search's results and, when more than the minimum came back, their summary."""

    items: list[LongTermItem]
    summary: str
    # `llm` or `extractive`; empty without a summary.
    summary_method: str


def _search_request(scope: Scope, query: str, top_k: int, min_results: int, max_chars: int) -> ltm_pb.SearchLongTermMemoriesRequest:
    return ltm_pb.SearchLongTermMemoriesRequest(scope=scope_to_proto(scope), query=query, top_k=top_k, compress=True,
                                               compress_min_results=min_results, compress_max_chars=max_chars)


def _compressed(response: ltm_pb.SearchLongTermMemoriesResponse) -> CompressedResults:
    return CompressedResults([long_term_item_from_proto(r.memory) for r in response.results], response.summary,
                             response.summary_method)


class AsyncReflectionClient(AsyncGrpcClient):
    """Reflection, consolidation and compressed recall over gRPC (asyncio)."""

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.LongTermLifecycleServiceStub(channel)
        self._search = ltm_grpc.LongTermMemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> AsyncLocalReflectionClient:
        return AsyncLocalReflectionClient(service)

    async def trigger_reflection(self, scope: Scope, *, importance_threshold: float | None = None,
                                 min_facts: int | None = None, cooldown_s: float | None = None) -> ReflectionResult:
        """Reflect over the exact scope's unreflected facts now, if they call for it."""
        request = reflection_request(scope, importance_threshold, min_facts, cooldown_s)
        return reflection_result_from_proto(await self._call(self._stub.TriggerReflection, request, retry=False))

    async def consolidate(self, scope: Scope, *, dry_run: bool = False, **overrides: Any) -> ConsolidationReport:
        """Consolidate the exact scope's facts now (overrides: threshold, similarity,
        min_cluster_size, fidelity_threshold)."""
        request = consolidate_request(scope, dry_run, overrides)
        return consolidation_report_from_proto(await self._call(self._stub.Consolidate, request, retry=False))

    async def search_compressed(self, scope: Scope, query: str, *, top_k: int = 0, min_results: int = 0,
                                max_chars: int = 0) -> CompressedResults:
        """Ranked search that also summarises the results when more than `min_results` (default
        5) came back, within `max_chars` (default 500)."""
        request = _search_request(scope, query, top_k, min_results, max_chars)
        return _compressed(await self._call(self._search.SearchLongTermMemories, request, retry=True))

    async def forget(self, scope: Scope, *, dry_run: bool = False, max_results: int = 0, **overrides: Any) -> ForgetReport:
        """Forget what has faded in the exact scope now (overrides: base_retention,
        strengthening_factor, threshold, excluded_types; [] forgets every type). The report
        lists at most `max_results` (default 100) memories, lowest retention first."""
        request = forget_request(scope, dry_run, overrides, max_results)
        return forget_report_from_proto(await self._call(self._stub.Forget, request, retry=dry_run))

    async def restore(self, memory_id: str) -> LongTermItem:
        """Bring a soft-deleted memory back into recall."""
        response = await self._call(self._stub.RestoreLongTermMemory, pb.RestoreLongTermMemoryRequest(id=memory_id), retry=False)
        return long_term_item_from_proto(response.memory)

    async def purge(self, memory_ids: list[str]) -> list[str]:
        """Delete these soft-deleted memories for good; returns the ids purged."""
        request = pb.PurgeLongTermMemoriesRequest(ids=memory_ids)
        return list((await self._call(self._stub.PurgeLongTermMemories, request, retry=True)).purged_ids)


class ReflectionClient(BlockingGrpcClient):
    """Reflection, consolidation and compressed recall over gRPC (blocking)."""

    def _bind(self, channel: grpc.Channel) -> None:
        self._stub = pb_grpc.LongTermLifecycleServiceStub(channel)
        self._search = ltm_grpc.LongTermMemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        """The same methods over an in-process service (no server, no gRPC)."""
        return Blocking(lambda: AsyncLocalReflectionClient(service))

    def trigger_reflection(self, scope: Scope, *, importance_threshold: float | None = None,
                           min_facts: int | None = None, cooldown_s: float | None = None) -> ReflectionResult:
        request = reflection_request(scope, importance_threshold, min_facts, cooldown_s)
        return reflection_result_from_proto(self._call(self._stub.TriggerReflection, request, retry=False))

    def consolidate(self, scope: Scope, *, dry_run: bool = False, **overrides: Any) -> ConsolidationReport:
        request = consolidate_request(scope, dry_run, overrides)
        return consolidation_report_from_proto(self._call(self._stub.Consolidate, request, retry=False))

    def search_compressed(self, scope: Scope, query: str, *, top_k: int = 0, min_results: int = 0,
                          max_chars: int = 0) -> CompressedResults:
        request = _search_request(scope, query, top_k, min_results, max_chars)
        return _compressed(self._call(self._search.SearchLongTermMemories, request, retry=True))

    def forget(self, scope: Scope, *, dry_run: bool = False, max_results: int = 0, **overrides: Any) -> ForgetReport:
        request = forget_request(scope, dry_run, overrides, max_results)
        return forget_report_from_proto(self._call(self._stub.Forget, request, retry=dry_run))

    def restore(self, memory_id: str) -> LongTermItem:
        response = self._call(self._stub.RestoreLongTermMemory, pb.RestoreLongTermMemoryRequest(id=memory_id), retry=False)
        return long_term_item_from_proto(response.memory)

    def purge(self, memory_ids: list[str]) -> list[str]:
        request = pb.PurgeLongTermMemoriesRequest(ids=memory_ids)
        return list(self._call(self._stub.PurgeLongTermMemories, request, retry=True).purged_ids)


class AsyncLocalReflectionClient(_LocalClient):
    """`AsyncReflectionClient`'s methods over an in-process service (the local tenant)."""

    async def __aenter__(self) -> Self:
        await self._lifecycle()  # a service without the lifecycle jobs fails here, not at a call
        return self

    async def _lifecycle(self) -> ReflectLifecycle:
        service = await self._handle.get()
        if service.reflect_lifecycle is None:
            raise UnimplementedError("lifecycle jobs need the server's own long-term engine (long_term_enabled=true)")
        return service.reflect_lifecycle

    async def trigger_reflection(self, scope: Scope, *, importance_threshold: float | None = None,
                                 min_facts: int | None = None, cooldown_s: float | None = None) -> ReflectionResult:
        return await (await self._lifecycle()).reflector.reflect(
            self.tenant, scope, importance_threshold=importance_threshold, min_facts=min_facts, cooldown_s=cooldown_s)

    async def consolidate(self, scope: Scope, *, dry_run: bool = False, **overrides: Any) -> ConsolidationReport:
        consolidate_request(scope, dry_run, overrides)  # the same checks as the remote client
        return await (await self._lifecycle()).consolidator.consolidate_scope(self.tenant, scope, dry_run=dry_run, **overrides)

    async def search_compressed(self, scope: Scope, query: str, *, top_k: int = 0, min_results: int = 0,
                                max_chars: int = 0) -> CompressedResults:
        lifecycle = await self._lifecycle()
        engine = lifecycle.compressed._engine
        options = engine.rank_defaults.with_overrides(top_k=top_k) if top_k else None
        items, _, summary = await lifecycle.compressed.search(self.tenant, scope, query, options,
                                                             min_results=min_results, max_chars=max_chars)
        return CompressedResults(items, summary.summary if summary else "", summary.method if summary else "")

    async def forget(self, scope: Scope, *, dry_run: bool = False, max_results: int = 0, **overrides: Any) -> ForgetReport:
        forget_request(scope, dry_run, overrides, max_results)  # the same checks as the remote client
        report = await (await self._lifecycle()).forgetter.forget(self.tenant, scope, dry_run=dry_run, **overrides)
        report.forgotten = report.forgotten[: max_results or 100]
        return report

    async def restore(self, memory_id: str) -> LongTermItem:
        return await (await self._lifecycle()).forgetter.restore(self.tenant, memory_id)

    async def purge(self, memory_ids: list[str]) -> list[str]:
        for i, memory_id in enumerate(memory_ids):
            check_id(memory_id, f"ids[{i}]")
        return await (await self._lifecycle()).forgetter.purge(self.tenant, list(memory_ids))
