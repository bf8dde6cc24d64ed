"""`agentscope.memory.v1.TieredMemoryService`: translates requests and calls the tiered
memory service (`agentscope_memory.short_term.tiered`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator

import grpc
from prometheus_client import CollectorRegistry, Gauge, Histogram

from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.from_proto import msg_from_proto, msgs_from_proto
from agentscope_memory.convert.tiered import (
    event_to_proto, hit_to_proto, importances_from_proto, item_to_proto, mode_from_proto, projection_to_proto, status_to_proto,
    tier_from_proto, weights_from_proto,
)
from agentscope_memory.errors import InvalidArgumentError, ResourceExhaustedError
from agentscope_memory.paging import cut_to_budget
from agentscope_memory.short_term.tiered.projection import ProjectionRequest
from agentscope_memory.short_term.tiered.service import TieredService, TierStatus
from agentscope_memory_server.errors import grpc_errors, grpc_stream_errors
from agentscope_memory_server.tenancy import tenant_of

MAX_RESPONSE_BYTES = 4 * 1024 * 1024 - 64 * 1024


class TierGauges:
    """The status view as Prometheus series, summed over the TIERED memories this server has
    reported (a status read, or a move through it) and not seen deleted: per tier, the items,
    tokens and budgets; summaries and L4 vectors; how many memories; and, at every report,
    histograms of each tier's fill and of the compaction ratio.

    No series is labelled with a tenant or a memory id: `/metrics` is the server's, not a
    tenant's, and a label per memory grows without bound. The per-memory figures the sums are
    kept from stay in this process, a few numbers a memory."""

    def __init__(self, registry: CollectorRegistry) -> None:
        tier = ["tier"]
        self.memories = Gauge("agentscope_memory_tiered_memories", "TIERED memories reported through this server",
                              registry=registry)
        self.items = Gauge("agentscope_memory_tiered_items", "Items per tier, over the TIERED memories", tier,
                           registry=registry)
        self.tokens = Gauge("agentscope_memory_tiered_tokens", "Tokens per tier, over the TIERED memories", tier,
                            registry=registry)
        self.budget = Gauge("agentscope_memory_tiered_budget_tokens", "Token budgets per tier, over the TIERED memories",
                            tier, registry=registry)
        self.summaries = Gauge("agentscope_memory_tiered_summaries", "Summaries in L3, over the TIERED memories",
                               registry=registry)
        self.vectors = Gauge("agentscope_memory_tiered_l4_vectors",
                             "Vectors written to long-term memory, over the TIERED memories", registry=registry)
        self.fill = Histogram("agentscope_memory_tiered_fill_ratio", "A tier's tokens over its budget, at each report",
                              tier, buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25, 1.5, 2.0), registry=registry)
        self.ratio = Histogram("agentscope_memory_tiered_compaction_ratio",
                               "Tokens replaced per summary token, at each report of a memory with summaries",
                               buckets=(0.5, 1, 1.5, 2, 3, 5, 10, 20, 50), registry=registry)
        self._last: dict[tuple[str, str], _Figures] = {}

    def forget(self, tenant: str, memory_id: str) -> None:
        """Take a deleted memory out of the sums (a memory that never reported is in none)."""
        last = self._last.pop((tenant, memory_id), None)
        if last is not None:
            self._add(last, -1)
            self.memories.dec()

    def set(self, tenant: str, status: TierStatus) -> None:
        figures = _Figures(tuple((f"L{u.tier}", u.items, u.tokens, u.budget) for u in status.tiers),
                           status.summaries, status.l4_vectors)
        last = self._last.get((tenant, status.memory_id))
        if last is None:
            self.memories.inc()
        else:
            self._add(last, -1)
        self._add(figures, 1)
        self._last[(tenant, status.memory_id)] = figures
        for usage in status.tiers:
            if usage.budget:
                self.fill.labels(f"L{usage.tier}").observe(usage.fill)
        if status.summaries:
            self.ratio.observe(status.compaction_ratio)

    def _add(self, figures: _Figures, sign: int) -> None:
        for tier, items, tokens, budget in figures.tiers:
            self.items.labels(tier).inc(sign * items)
            self.tokens.labels(tier).inc(sign * tokens)
            self.budget.labels(tier).inc(sign * budget)
        self.summaries.inc(sign * figures.summaries)
        self.vectors.inc(sign * figures.vectors)


@dataclass(frozen=True)
class _Figures:
    """What one memory last added to the sums: (tier, items, tokens, budget) per tier."""

    tiers: tuple[tuple[str, int, int, int], ...]
    summaries: int
    vectors: int


class TieredServicer(pb_grpc.TieredMemoryServiceServicer):
    def __init__(self, tiered: TieredService, gauges: TierGauges | None = None) -> None:
        self.tiered = tiered
        self.gauges = gauges

    async def _status(self, tenant: str, memory_id: str) -> pb.TierStatus:
        status = await self.tiered.status(tenant, memory_id)
        if self.gauges is not None:
            self.gauges.set(tenant, status)
        return status_to_proto(status)

    @grpc_errors
    async def AddTieredItems(self, request: pb.AddTieredItemsRequest, context: grpc.aio.ServicerContext
                             ) -> pb.AddTieredItemsResponse:
        tenant = tenant_of(context)
        msgs = [msg_from_proto(item.message, f"items[{i}].message") for i, item in enumerate(request.items)]
        if not msgs:
            raise InvalidArgumentError("items", "must contain at least one item")
        # The caller's deadline bounds LLM scoring and the pass's LLM summaries: the add answers in
        # time, with heuristic scores and offline summaries for what the LLM could not finish.
        result = await self.tiered.add_items(tenant, request.memory_id, msgs, importances_from_proto(request.items),
                                             request.request_id or None, time_left_s=context.time_remaining())
        return pb.AddTieredItemsResponse(message_count=result.message_count, version=result.version,
                                         replayed=result.replayed, status=await self._status(tenant, request.memory_id))

    @grpc_errors
    async def CompactTiers(self, request: pb.CompactTiersRequest, context: grpc.aio.ServicerContext
                           ) -> pb.CompactTiersResponse:
        tenant = tenant_of(context)
        events = [event_to_proto(s, e) for s, e in await self.tiered.compact(tenant, request.memory_id)]
        status = await self._status(tenant, request.memory_id)
        # A pass's events are few, but their details (long-term ids) grow with L3's budget: the
        # response keeps what fits and ListTierEvents has them all.
        kept = cut_to_budget(events, lambda e: e.ByteSize(), MAX_RESPONSE_BYTES - status.ByteSize())
        return pb.CompactTiersResponse(events=events[:kept], status=status)

    @grpc_errors
    async def QueryTiers(self, request: pb.QueryTiersRequest, context: grpc.aio.ServicerContext) -> pb.QueryTiersResponse:
        tiers = [tier_from_proto(t, f"tiers[{i}]") for i, t in enumerate(request.tiers)]
        hits = await self.tiered.query(tenant_of(context), request.memory_id, request.query, request.limit, tiers,
                                       weights_from_proto(request.weights))
        out = [hit_to_proto(h) for h in hits]
        if out:
            _fit_hit(out[0], MAX_RESPONSE_BYTES)
        kept = cut_to_budget(out, lambda h: h.ByteSize(), MAX_RESPONSE_BYTES)
        return pb.QueryTiersResponse(hits=out[:kept])

    @grpc_errors
    async def ProjectContext(self, request: pb.ProjectContextRequest, context: grpc.aio.ServicerContext
                             ) -> pb.ProjectContextResponse:
        projection = await self.tiered.project(tenant_of(context), request.memory_id, ProjectionRequest(
            instruction=request.instruction, budget=request.total_budget, mode=mode_from_proto(request.mode),
            include_plan=request.include_plan, plan=request.plan,
            include_facts=request.include_facts if request.HasField("include_facts") else True,
            shared_context=msgs_from_proto(request.shared_context, "shared_context") if request.shared_context else (),
        ))
        response = projection_to_proto(projection)
        if response.ByteSize() > MAX_RESPONSE_BYTES:
            raise ResourceExhaustedError("total_budget", "selects more than 4 MiB of messages; ask for a smaller budget")
        return response

    @grpc_errors
    async def GetTierStatus(self, request: pb.GetTierStatusRequest, context: grpc.aio.ServicerContext
                            ) -> pb.GetTierStatusResponse:
        return pb.GetTierStatusResponse(status=await self._status(tenant_of(context), request.memory_id))

    @grpc_errors
    async def ListTierItems(self, request: pb.ListTierItemsRequest, context: grpc.aio.ServicerContext
                            ) -> pb.ListTierItemsResponse:
        items, token = await self.tiered.items_page(tenant_of(context), request.memory_id,
                                                    tier_from_proto(request.tier, "tier"), request.page_size,
                                                    request.page_token)
        return pb.ListTierItemsResponse(items=[item_to_proto(i) for i in items], next_page_token=token)

    @grpc_errors
    async def ListTierEvents(self, request: pb.ListTierEventsRequest, context: grpc.aio.ServicerContext
                             ) -> pb.ListTierEventsResponse:
        events, token = await self.tiered.events_page(tenant_of(context), request.memory_id, request.after_sequence,
                                                      request.page_size, request.page_token)
        return pb.ListTierEventsResponse(events=[event_to_proto(s, e) for s, e in events], next_page_token=token)

    @grpc_stream_errors
    async def WatchTierEvents(self, request: pb.WatchTierEventsRequest, context: grpc.aio.ServicerContext
                              ) -> AsyncIterator[pb.WatchTierEventsResponse]:
        async for seq, event in self.tiered.watch(tenant_of(context), request.memory_id, request.after_sequence):
            yield pb.WatchTierEventsResponse(event=event_to_proto(seq, event))


def _fit_hit(hit: pb.TierHit, budget: int) -> None:
    """A message hit carries its content twice (`text`, and `message` whole), so one of a message
    near the size limit (4 MiB) would be twice the limit, and the first hit always travels: it
    keeps its message whole and as much of its text as fits the response."""
    over = hit.ByteSize() + 16 - budget
    if over <= 0 or not hit.HasField("message"):
        return
    text = hit.text.encode("utf-8")
    hit.text = text[: max(0, len(text) - over)].decode("utf-8", "ignore")
