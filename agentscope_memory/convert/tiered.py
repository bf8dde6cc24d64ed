"""TIERED memories on the wire: `TieredConfig`, tier items, events, status, query hits and
projections, both ways (the servicer and the Python client use only these)."""

from __future__ import annotations

import json
from typing import Any, Sequence

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2 as pb
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.convert.to_proto import msg_to_proto, timestamp_to_proto
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.short_term.tiered.config import CL100K, ESTIMATE, TieredConfig
from agentscope_memory.short_term.tiered.items import MARKER, MESSAGE, SUMMARY, TierEvent, TierItem
from agentscope_memory.short_term.tiered.projection import MODES, Projection
from agentscope_memory.short_term.tiered.service import QueryHit, QueryWeights, TierStatus, TierUsage

_NUMBERS = ("l1_budget", "l2_budget", "l3_budget", "l4_budget", "promote_threshold", "l2_compact_at", "l2_compact_to",
            "l3_vectorize_at", "l3_vectorize_fraction", "l1_compact_trigger", "l1_compact_keep", "score_importance",
            "default_importance", "vectorize", "llm_importance")
_TEXTS = ("agent_name", "user_id", "run_name")
COUNTER_TO_PB = {ESTIMATE: mem_pb.TIERED_TOKEN_COUNTER_ESTIMATE, CL100K: mem_pb.TIERED_TOKEN_COUNTER_CL100K}
COUNTER_FROM_PB = {**{v: k for k, v in COUNTER_TO_PB.items()}, mem_pb.TIERED_TOKEN_COUNTER_UNSPECIFIED: ESTIMATE}
KIND_TO_PB = {MESSAGE: pb.TIER_ITEM_KIND_MESSAGE, SUMMARY: pb.TIER_ITEM_KIND_SUMMARY, MARKER: pb.TIER_ITEM_KIND_MARKER}
KIND_FROM_PB = {v: k for k, v in KIND_TO_PB.items()}
MODE_TO_PB = {name: getattr(pb, f"PROJECTION_MODE_{name}") for name in MODES}
MODE_FROM_PB = {v: k for k, v in MODE_TO_PB.items()}
TIERS: dict[int, int] = {pb.TIER_L1: 1, pb.TIER_L2: 2, pb.TIER_L3: 3, pb.TIER_L4: 4}


def tiered_config_from_proto(config: mem_pb.TieredConfig, field: str = "tiered_config") -> TieredConfig:
    values: dict[str, Any] = {name: getattr(config, name) for name in _NUMBERS if config.HasField(name)}
    values.update({name: getattr(config, name) for name in _TEXTS if getattr(config, name)})
    counter = COUNTER_FROM_PB.get(config.token_counter)
    if counter is None:
        raise InvalidArgumentError(f"{field}.token_counter", f"has unknown value {config.token_counter}")
    values["token_counter"] = counter
    return TieredConfig.from_dict(values)


def tiered_config_to_proto(config: TieredConfig) -> mem_pb.TieredConfig:
    out = mem_pb.TieredConfig(token_counter=COUNTER_TO_PB[config.token_counter])
    for name in _NUMBERS + _TEXTS:
        setattr(out, name, getattr(config, name))
    return out


def tier_from_proto(value: int, field: str) -> int:
    tier = TIERS.get(value)
    if tier is None:
        raise InvalidArgumentError(field, "must be TIER_L1, TIER_L2, TIER_L3 or TIER_L4")
    return tier


def tier_to_proto(tier: int) -> pb.Tier:
    return {1: pb.TIER_L1, 2: pb.TIER_L2, 3: pb.TIER_L3, 4: pb.TIER_L4}.get(tier, pb.TIER_UNSPECIFIED)


def item_to_proto(item: TierItem) -> pb.TierItem:
    out = pb.TierItem(sequence=item.seq, tier=tier_to_proto(item.tier), kind=KIND_TO_PB.get(item.kind, 0),  # type: ignore[arg-type]
                      importance=item.importance, tokens=item.tokens, create_time=timestamp_to_proto(item.created),
                      text=item.text, origin_sequences=item.origins, method=item.method, hits=item.hits,
                      covered=item.covered)
    if item.msg is not None:
        out.message.CopyFrom(msg_to_proto(item.msg))
    return out


def item_from_proto(item: pb.TierItem) -> TierItem:
    return TierItem(item.sequence, TIERS.get(item.tier, 0), KIND_FROM_PB.get(item.kind, MESSAGE), item.importance,
                    item.tokens, item.create_time.ToNanoseconds() / 1e9,
                    msg_from_proto(item.message, "message", newer_kinds=True) if item.HasField("message") else None, item.text,
                    list(item.origin_sequences), item.method, item.hits, item.covered)


def importances_from_proto(items: Sequence[pb.TieredItemInput]) -> list[float | None]:
    """Each item's importance (None: unset, to be scored), checked here so that an error names
    the request's field (`items[i].importance`), not the library's argument."""
    out: list[float | None] = []
    for i, item in enumerate(items):
        value = item.importance if item.HasField("importance") else None
        if value is not None and not 0.0 <= value <= 1.0:  # NaN fails too
            raise InvalidArgumentError(f"items[{i}].importance", f"is {value!r}; must be a number from 0 to 1")
        out.append(value)
    return out


def event_to_proto(seq: int, event: TierEvent) -> pb.TierEvent:
    return pb.TierEvent(sequence=seq, kind=event.kind, from_tier=tier_to_proto(event.from_tier),
                        to_tier=tier_to_proto(event.to_tier), item_sequences=event.item_seqs, tokens=event.tokens,
                        time=timestamp_to_proto(event.time),
                        detail_json=json.dumps(event.detail, ensure_ascii=False) if event.detail else "")


def event_from_proto(event: pb.TierEvent) -> tuple[int, TierEvent]:
    return event.sequence, TierEvent(event.kind, TIERS.get(event.from_tier, 0), TIERS.get(event.to_tier, 0),
                                     list(event.item_sequences), event.tokens, event.time.ToNanoseconds() / 1e9,
                                     json.loads(event.detail_json) if event.detail_json else {})


def status_to_proto(status: TierStatus) -> pb.TierStatus:
    return pb.TierStatus(
        memory_id=status.memory_id,
        tiers=[pb.TierUsage(tier=tier_to_proto(u.tier), items=u.items, tokens=u.tokens, budget=u.budget, fill=u.fill)
               for u in status.tiers],
        summaries=status.summaries, l4_vectors=status.l4_vectors, compaction_ratio=status.compaction_ratio,
        compactions=status.compactions, compacted=status.compacted, evicted_summaries=status.evicted_summaries)


def status_from_proto(status: pb.TierStatus) -> TierStatus:
    return TierStatus(status.memory_id, [TierUsage(TIERS.get(u.tier, 0), u.items, u.tokens, u.budget) for u in status.tiers],
                      status.summaries, status.l4_vectors, status.compaction_ratio, status.compactions,
                      status.compacted, status.evicted_summaries)


def weights_from_proto(weights: pb.QueryWeights) -> QueryWeights:
    defaults = QueryWeights()
    return QueryWeights(*(getattr(weights, n) if weights.HasField(n) else getattr(defaults, n)
                          for n in ("relevance", "recency", "importance", "frequency"))).validate()


def weights_to_proto(weights: QueryWeights) -> pb.QueryWeights:
    return pb.QueryWeights(relevance=weights.relevance, recency=weights.recency, importance=weights.importance,
                           frequency=weights.frequency)


def hit_to_proto(hit: QueryHit) -> pb.TierHit:
    out = pb.TierHit(tier=tier_to_proto(hit.tier), sequence=hit.seq, text=hit.text, importance=hit.importance,
                     relevance=hit.relevance, recency=hit.recency, frequency=hit.frequency, score=hit.score,
                     long_term_id=hit.long_term_id, kind=hit.kind)
    if hit.msg is not None:
        out.message.CopyFrom(msg_to_proto(hit.msg))
    return out


def hit_from_proto(hit: pb.TierHit) -> QueryHit:
    return QueryHit(TIERS.get(hit.tier, 0), hit.sequence, hit.kind, hit.text, hit.importance, hit.relevance,
                    hit.recency, hit.frequency, hit.score,
                    msg_from_proto(hit.message, "message", newer_kinds=True) if hit.HasField("message") else None,
                    hit.long_term_id)


def mode_from_proto(value: int) -> str:
    if value == pb.PROJECTION_MODE_UNSPECIFIED:
        return ""
    mode = MODE_FROM_PB.get(value)
    if mode is None:
        raise InvalidArgumentError("mode", f"has unknown value {value}")
    return mode


def projection_to_proto(projection: Projection) -> pb.ProjectContextResponse:
    return pb.ProjectContextResponse(messages=[msg_to_proto(m) for m in projection.messages],
                                     mode=MODE_TO_PB[projection.mode], mode_detected=projection.detected,
                                     tokens=projection.tokens, section_tokens=projection.sections)


def projection_from_proto(response: pb.ProjectContextResponse, budget: int) -> Projection:
    return Projection(MODE_FROM_PB.get(response.mode, ""), response.mode_detected,
                      [msg_from_proto(m, "messages", newer_kinds=True) for m in response.messages], budget, response.tokens,
                      dict(response.section_tokens))
