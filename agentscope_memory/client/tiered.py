"""Clients of TIERED memories (`TieredMemoryService`): asyncio, blocking and local mode, in
library types. Listings follow their pages for the caller.

    async with AsyncTieredClient("127.0.0.1:50051") as tiered:
        await tiered.create_memory("agent-1", TieredConfig(l1_budget=4000))
        await tiered.add("agent-1", [Msg.create(MsgRole.USER, "部署窗口是周二上午")], importances=[0.9])
        projection = await tiered.project("agent-1", "继续之前的任务", total_budget=8000)
        status = await tiered.status("agent-1")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator, Sequence

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as mem_grpc
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client._base import AsyncGrpcClient, BlockingGrpcClient
from agentscope_memory.client._common import new_request_id
from agentscope_memory.client._validate import msg_on_wire, msgs_on_wire
from agentscope_memory.client._retry import Reconnects, resuming_stream, resuming_stream_blocking
from agentscope_memory.client.local import Blocking, _LocalClient
from agentscope_memory.convert.from_proto import memory_from_proto
from agentscope_memory.convert.tiered import (
    MODE_TO_PB, event_from_proto, hit_from_proto, item_from_proto, projection_from_proto, status_from_proto,
    tier_to_proto, tiered_config_to_proto, weights_to_proto,
)
from agentscope_memory.message import Msg
from agentscope_memory.short_term.description import MemoryDescription, describe
from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.short_term.tiered.items import TierEvent, TierItem
from agentscope_memory.short_term.tiered.projection import Projection, ProjectionRequest
from agentscope_memory.short_term.tiered.service import QueryHit, QueryWeights, TierStatus

if TYPE_CHECKING:
    from agentscope_memory.service import Service, ServiceSettings

@dataclass(frozen=True)
class TieredAddResult:
    message_count: int
    version: int
    replayed: bool
    status: TierStatus


# -- requests, shared by the asyncio and blocking clients ----------------------------------

def _create(memory_id: str, config: TieredConfig | None, labels: dict[str, str] | None,
            allow_existing: bool) -> mem_pb.CreateMemoryRequest:
    request = mem_pb.CreateMemoryRequest(memory_id=memory_id, kind=mem_pb.MEMORY_KIND_TIERED, labels=labels or {},
                                         allow_existing=allow_existing)
    request.tiered_config.CopyFrom(tiered_config_to_proto((config or TieredConfig()).validate()))
    return request


def _add(memory_id: str, msgs: Sequence[Msg], importances: Sequence[float | None] | None,
         request_id: str) -> pb.AddTieredItemsRequest:
    if importances is not None and len(importances) != len(msgs):
        raise ValueError(f"importances has {len(importances)} values for {len(msgs)} messages")
    items = []
    for i, msg in enumerate(msgs):
        item = pb.TieredItemInput(message=msg_on_wire(msg, f"messages[{i}]"))
        value = importances[i] if importances is not None else None
        if value is not None:
            item.importance = value
        items.append(item)
    return pb.AddTieredItemsRequest(memory_id=memory_id, items=items, request_id=request_id)


def _query(memory_id: str, text: str, limit: int, tiers: Sequence[int], weights: QueryWeights | None
           ) -> pb.QueryTiersRequest:
    request = pb.QueryTiersRequest(memory_id=memory_id, query=text, limit=limit,
                                   tiers=[tier_to_proto(t) for t in tiers])
    if weights is not None:
        request.weights.CopyFrom(weights_to_proto(weights.validate()))
    return request


def _project(memory_id: str, request: ProjectionRequest) -> pb.ProjectContextRequest:
    out = pb.ProjectContextRequest(memory_id=memory_id, instruction=request.instruction, total_budget=request.budget,
                                   include_plan=request.include_plan, plan=request.plan,
                                   include_facts=request.include_facts,
                                   shared_context=msgs_on_wire(request.shared_context, "shared_context"))
    if request.mode:
        out.mode = MODE_TO_PB[request.mode]
    return out


def _add_result(response: pb.AddTieredItemsResponse) -> TieredAddResult:
    return TieredAddResult(response.message_count, response.version, response.replayed,
                           status_from_proto(response.status))


class AsyncTieredClient(AsyncGrpcClient):
    """TIERED memories over gRPC (asyncio). Reads and adds (with their request id) are retried
    on UNAVAILABLE until the deadline."""

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.TieredMemoryServiceStub(channel)
        self._memories = mem_grpc.MemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> AsyncLocalTieredClient:
        """The same methods over an in-process service (no server, no gRPC)."""
        return AsyncLocalTieredClient(service)

    async def create_memory(self, memory_id: str, config: TieredConfig | None = None, *,
                            labels: dict[str, str] | None = None, allow_existing: bool = False) -> MemoryDescription:
        response = await self._call(self._memories.CreateMemory, _create(memory_id, config, labels, allow_existing),
                                    retry=allow_existing)
        return memory_from_proto(response.memory)

    async def add(self, memory_id: str, msgs: Sequence[Msg], importances: Sequence[float | None] | None = None,
                  request_id: str | None = None) -> TieredAddResult:
        """Add messages (importance in [0, 1] each, None: scored); the moves run before it returns."""
        request = _add(memory_id, msgs, importances, request_id or new_request_id())
        return _add_result(await self._call(self._stub.AddTieredItems, request))

    async def compact(self, memory_id: str) -> tuple[list[tuple[int, TierEvent]], TierStatus]:
        response = await self._call(self._stub.CompactTiers, pb.CompactTiersRequest(memory_id=memory_id))
        return [event_from_proto(e) for e in response.events], status_from_proto(response.status)

    async def query(self, memory_id: str, text: str, limit: int = 0, tiers: Sequence[int] = (),
                    weights: QueryWeights | None = None) -> list[QueryHit]:
        response = await self._call(self._stub.QueryTiers, _query(memory_id, text, limit, tiers, weights))
        return [hit_from_proto(h) for h in response.hits]

    async def project(self, memory_id: str, instruction: str = "", total_budget: int = 32_000, *, mode: str = "",
                      include_plan: bool = False, plan: str = "", include_facts: bool = True,
                      shared_context: Sequence[Msg] = ()) -> Projection:
        request = ProjectionRequest(instruction, total_budget, mode.upper(), include_plan, plan, include_facts,
                                    list(shared_context))
        response = await self._call(self._stub.ProjectContext, _project(memory_id, request))
        return projection_from_proto(response, total_budget)

    async def status(self, memory_id: str) -> TierStatus:
        response = await self._call(self._stub.GetTierStatus, pb.GetTierStatusRequest(memory_id=memory_id))
        return status_from_proto(response.status)

    async def iter_items(self, memory_id: str, tier: int, page_size: int = 0) -> AsyncIterator[TierItem]:
        request = pb.ListTierItemsRequest(memory_id=memory_id, tier=tier_to_proto(tier), page_size=page_size)
        async for response in self._paged(self._stub.ListTierItems, request):
            for item in response.items:
                yield item_from_proto(item)

    async def get_items(self, memory_id: str, tier: int) -> list[TierItem]:
        return [i async for i in self.iter_items(memory_id, tier)]

    async def iter_events(self, memory_id: str, after_sequence: int = 0, page_size: int = 0
                          ) -> AsyncIterator[tuple[int, TierEvent]]:
        request = pb.ListTierEventsRequest(memory_id=memory_id, after_sequence=after_sequence, page_size=page_size)
        async for response in self._paged(self._stub.ListTierEvents, request):
            for event in response.events:
                yield event_from_proto(event)

    async def get_events(self, memory_id: str, after_sequence: int = 0) -> list[tuple[int, TierEvent]]:
        return [e async for e in self.iter_events(memory_id, after_sequence)]

    async def watch_events(self, memory_id: str, after_sequence: int = 0) -> AsyncIterator[tuple[int, TierEvent]]:
        """Recorded events after `after_sequence`, then new ones as they happen (until the caller
        stops reading). A broken stream is reopened after the last event seen, so nothing is
        missed or repeated, with growing pauses; a server unreachable for the client's `timeout`
        raises `UnavailableError`."""
        responses = resuming_stream(
            lambda last: self._stub.WatchTierEvents(
                pb.WatchTierEventsRequest(memory_id=memory_id, after_sequence=last), metadata=self._metadata),
            after_sequence, lambda response: response.event.sequence, Reconnects(self.retry_policy, self.timeout))
        async for response in responses:
            yield event_from_proto(response.event)


class TieredClient(BlockingGrpcClient):
    """TIERED memories over gRPC (blocking); the same methods as `AsyncTieredClient`."""

    def _bind(self, channel: grpc.Channel) -> None:
        self._stub = pb_grpc.TieredMemoryServiceStub(channel)
        self._memories = mem_grpc.MemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        return Blocking(lambda: AsyncLocalTieredClient(service))

    def create_memory(self, memory_id: str, config: TieredConfig | None = None, *,
                      labels: dict[str, str] | None = None, allow_existing: bool = False) -> MemoryDescription:
        response = self._call(self._memories.CreateMemory, _create(memory_id, config, labels, allow_existing),
                              retry=allow_existing)
        return memory_from_proto(response.memory)

    def add(self, memory_id: str, msgs: Sequence[Msg], importances: Sequence[float | None] | None = None,
            request_id: str | None = None) -> TieredAddResult:
        request = _add(memory_id, msgs, importances, request_id or new_request_id())
        return _add_result(self._call(self._stub.AddTieredItems, request))

    def compact(self, memory_id: str) -> tuple[list[tuple[int, TierEvent]], TierStatus]:
        response = self._call(self._stub.CompactTiers, pb.CompactTiersRequest(memory_id=memory_id))
        return [event_from_proto(e) for e in response.events], status_from_proto(response.status)

    def query(self, memory_id: str, text: str, limit: int = 0, tiers: Sequence[int] = (),
              weights: QueryWeights | None = None) -> list[QueryHit]:
        response = self._call(self._stub.QueryTiers, _query(memory_id, text, limit, tiers, weights))
        return [hit_from_proto(h) for h in response.hits]

    def project(self, memory_id: str, instruction: str = "", total_budget: int = 32_000, *, mode: str = "",
                include_plan: bool = False, plan: str = "", include_facts: bool = True,
                shared_context: Sequence[Msg] = ()) -> Projection:
        request = ProjectionRequest(instruction, total_budget, mode.upper(), include_plan, plan, include_facts,
                                    list(shared_context))
        return projection_from_proto(self._call(self._stub.ProjectContext, _project(memory_id, request)), total_budget)

    def status(self, memory_id: str) -> TierStatus:
        return status_from_proto(self._call(self._stub.GetTierStatus,
                                            pb.GetTierStatusRequest(memory_id=memory_id)).status)

    def iter_items(self, memory_id: str, tier: int, page_size: int = 0) -> Iterator[TierItem]:
        request = pb.ListTierItemsRequest(memory_id=memory_id, tier=tier_to_proto(tier), page_size=page_size)
        for response in self._paged(self._stub.ListTierItems, request):
            yield from (item_from_proto(i) for i in response.items)

    def get_items(self, memory_id: str, tier: int) -> list[TierItem]:
        return list(self.iter_items(memory_id, tier))

    def iter_events(self, memory_id: str, after_sequence: int = 0, page_size: int = 0
                    ) -> Iterator[tuple[int, TierEvent]]:
        request = pb.ListTierEventsRequest(memory_id=memory_id, after_sequence=after_sequence, page_size=page_size)
        for response in self._paged(self._stub.ListTierEvents, request):
            yield from (event_from_proto(e) for e in response.events)

    def get_events(self, memory_id: str, after_sequence: int = 0) -> list[tuple[int, TierEvent]]:
        return list(self.iter_events(memory_id, after_sequence))

    def watch_events(self, memory_id: str, after_sequence: int = 0) -> Iterator[tuple[int, TierEvent]]:
        """`AsyncTieredClient.watch_events`, blocking."""
        responses = resuming_stream_blocking(
            lambda last: self._stub.WatchTierEvents(
                pb.WatchTierEventsRequest(memory_id=memory_id, after_sequence=last), metadata=self._metadata),
            after_sequence, lambda response: response.event.sequence, Reconnects(self.retry_policy, self.timeout))
        for response in responses:
            yield event_from_proto(response.event)


class AsyncLocalTieredClient(_LocalClient):
    """`AsyncTieredClient`'s methods over an in-process service (local mode, tenant `default`)."""

    async def _tiered(self) -> Any:
        return await self._part("tiered")

    async def create_memory(self, memory_id: str, config: TieredConfig | None = None, *,
                            labels: dict[str, str] | None = None, allow_existing: bool = False) -> MemoryDescription:
        memories = (await self._handle.get()).memories
        info, _ = await memories.create_memory(self.tenant, memory_id, "TIERED",
                                               (config or TieredConfig()).validate().to_json(), labels, allow_existing)
        return describe(info.record, info.message_count)

    async def add(self, memory_id: str, msgs: Sequence[Msg], importances: Sequence[float | None] | None = None,
                  request_id: str | None = None) -> TieredAddResult:
        tiered = await self._tiered()
        result = await tiered.add_items(self.tenant, memory_id, msgs, importances, request_id)
        return TieredAddResult(result.message_count, result.version, result.replayed,
                               await tiered.status(self.tenant, memory_id))

    async def compact(self, memory_id: str) -> tuple[list[tuple[int, TierEvent]], TierStatus]:
        tiered = await self._tiered()
        events = await tiered.compact(self.tenant, memory_id)
        return events, await tiered.status(self.tenant, memory_id)

    async def query(self, memory_id: str, text: str, limit: int = 0, tiers: Sequence[int] = (),
                    weights: QueryWeights | None = None) -> list[QueryHit]:
        return list(await (await self._tiered()).query(self.tenant, memory_id, text, limit, tiers, weights))

    async def project(self, memory_id: str, instruction: str = "", total_budget: int = 32_000, *, mode: str = "",
                      include_plan: bool = False, plan: str = "", include_facts: bool = True,
                      shared_context: Sequence[Msg] = ()) -> Projection:
        request = ProjectionRequest(instruction, total_budget, mode.upper(), include_plan, plan, include_facts,
                                    list(shared_context))
        projection: Projection = await (await self._tiered()).project(self.tenant, memory_id, request)
        return projection

    async def status(self, memory_id: str) -> TierStatus:
        status: TierStatus = await (await self._tiered()).status(self.tenant, memory_id)
        return status

    async def iter_items(self, memory_id: str, tier: int, page_size: int = 0) -> AsyncIterator[TierItem]:
        tiered, token = await self._tiered(), ""
        while True:
            items, token = await tiered.items_page(self.tenant, memory_id, tier, page_size, token)
            for item in items:
                yield item
            if not token:
                return

    async def get_items(self, memory_id: str, tier: int) -> list[TierItem]:
        return [i async for i in self.iter_items(memory_id, tier)]

    async def iter_events(self, memory_id: str, after_sequence: int = 0, page_size: int = 0
                          ) -> AsyncIterator[tuple[int, TierEvent]]:
        tiered, token = await self._tiered(), ""
        while True:
            events, token = await tiered.events_page(self.tenant, memory_id, after_sequence, page_size, token)
            for event in events:
                yield event
            if not token:
                return

    async def get_events(self, memory_id: str, after_sequence: int = 0) -> list[tuple[int, TierEvent]]:
        return [e async for e in self.iter_events(memory_id, after_sequence)]

    async def watch_events(self, memory_id: str, after_sequence: int = 0) -> AsyncIterator[tuple[int, TierEvent]]:
        async for event in (await self._tiered()).watch(self.tenant, memory_id, after_sequence):
            yield event
