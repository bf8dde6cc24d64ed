"""A TIERED memory kept in the store, for the plain `Memory` operations and session state.

Layout per memory: its L1-L3 items in `tiered_items` (`store/sql/tiered.py`); key/values
`tiered:next` (the next sequence number) and `tiered:stats` (summaries made, tokens they
replaced, long-term vectors written); list `tier_events` (every move, as JSON).

An add stores each message in L1 and, when its importance is above the promotion threshold,
a copy in L2: a few rows, whatever the history's length. Moves that need a summary or
long-term memory happen after the add commits (`service.TieredService.compact`, the pass).

`GetMessages` on a TIERED memory returns L1: the compaction marker (a system message starting
with "📦 History compacted") when compaction has run, then the recent messages in order.
`DeleteMessage` removes an L1 message by that position; `ClearMessages` empties L1-L3.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.message import Msg, msg_from_dict, msg_to_dict
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.manager import NewMessage
from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.short_term.tiered.items import (
    L1, L2, L3, MARKER, MESSAGE, SUMMARY, TierEvent, TierItem,
)
from agentscope_memory.short_term.tiered.state_values import count, epoch_seconds, sequence, sequences
from agentscope_memory.short_term.tiered.tokens import Counters
from agentscope_memory.store.base import MemoryRecord, Row, TieredRow, Tx
from agentscope_memory.store.codec import encode_msg

KIND = "TIERED"
NEXT = "tiered:next"
STATS = "tiered:stats"
EVENTS = "tier_events"
LAST_EVENT = "tiered:last_event"
# Changed by every LoadState: a loaded state numbers its items itself, so the same sequence
# number may name another item afterwards (see `incarnation`).
LOADED = "tiered:loaded"

# Session keys of a TIERED memory's state (SaveState/LoadState, JsonSession).
KEY_L1 = "tieredMemory_l1"
KEY_L2 = "tieredMemory_l2"
KEY_L3 = "tieredMemory_l3"
KEY_EVENTS = "tieredMemory_events"
KEY_STATS = "tieredMemory_stats"
TIER_KEYS = {KEY_L1: L1, KEY_L2: L2, KEY_L3: L3}
# What each tier holds: L3 moves its items by their summary text, L2 are copies of messages.
TIER_KINDS = {L1: (MESSAGE, MARKER), L2: (MESSAGE,), L3: (SUMMARY,)}


@dataclass
class TierStats:
    """Running totals of one memory (the status view's compaction ratio and L4 vectors)."""

    compactions: int = 0
    summaries_made: int = 0
    # Tokens of the items summaries replaced, and of the summaries themselves.
    source_tokens: int = 0
    summary_tokens: int = 0
    l4_vectors: int = 0
    evicted_summaries: int = 0
    l4_tokens: int = 0

    @staticmethod
    def from_json(text: str | None) -> TierStats:
        data = json.loads(text) if text else {}
        return TierStats(**{k: int(v) for k, v in data.items() if k in TierStats.__dataclass_fields__})


def get_stats(tx: Tx, memory_id: str) -> TierStats:
    return TierStats.from_json(tx.kv_get(memory_id, STATS))


def put_stats(tx: Tx, memory_id: str, stats: TierStats) -> None:
    tx.kv_put(memory_id, STATS, json.dumps(asdict(stats)))


def next_seqs(tx: Tx, memory_id: str, count: int) -> list[int]:
    first = int(tx.kv_get(memory_id, NEXT) or "1")
    tx.kv_put(memory_id, NEXT, str(first + count))
    return list(range(first, first + count))


def incarnation(tx: Tx, record: MemoryRecord) -> tuple[float, str]:
    """What must not change under a pass for its sequence numbers to name the same items: the
    memory (deleted and created again, it numbers from 1 again) and its last loaded state."""
    return record.create_time, tx.kv_get(record.memory_id, LOADED) or ""


def to_row(item: TierItem) -> TieredRow:
    return TieredRow(item.seq, item.tier, item.kind, item.importance, item.tokens, item.created, item.hits,
                     item.body_json())


def of_row(row: TieredRow) -> TierItem:
    return TierItem.from_row(row.seq, row.tier, row.kind, row.importance, row.tokens, row.created, row.hits, row.body)


def read_tier(tx: Tx, memory_id: str, tier: int) -> list[TierItem]:
    return [of_row(r) for r in tx.tiered_rows(memory_id, tier)]


def append_events(tx: Tx, memory_id: str, events: list[TierEvent]) -> list[tuple[int, TierEvent]]:
    """Record `events`; returns them with their sequence numbers (the last one is kept, so
    finding them reads only them)."""
    if not events:
        return []
    last = int(tx.kv_get(memory_id, LAST_EVENT) or "0")
    tx.append(memory_id, EVENTS, [json.dumps(e.to_dict(), ensure_ascii=False) for e in events])
    recorded = read_events(tx, memory_id, last, None)
    tx.kv_put(memory_id, LAST_EVENT, str(recorded[-1][0]))
    return recorded


def read_events(tx: Tx, memory_id: str, after_seq: int = 0, limit: int | None = None) -> list[tuple[int, TierEvent]]:
    return [(r.seq, TierEvent.from_dict(json.loads(r.data))) for r in tx.read(memory_id, EVENTS, after_seq, limit)]


class TieredKind:
    """The TIERED memory kind (Loom's L1-L4) for `MemoryManager`."""

    kind = KIND
    state_keys = [(KEY_L1, True), (KEY_L2, True), (KEY_L3, True), (KEY_EVENTS, True), (KEY_STATS, False)]
    # Its lists are not a plain message list: no delete or mark by id.
    editable_list: str | None = None

    def __init__(self, counters: Counters | None = None) -> None:
        self.counters = counters or Counters()
        self._scorer = HeuristicScorer()
        self._configs: dict[str, TieredConfig] = {}

    def config(self, record: MemoryRecord) -> TieredConfig:
        config = self._configs.get(record.config_json)
        if config is None:
            if len(self._configs) > 1000:
                self._configs.clear()
            config = self._configs[record.config_json] = TieredConfig.from_json(record.config_json)
        return config

    def validate_config(self, config_json: str) -> str:
        return TieredConfig.from_json(config_json).to_json()

    def count_tokens(self, config: TieredConfig, msg: Msg) -> int:
        return self.counters.get(config.token_counter).count([msg])

    def importance(self, config: TieredConfig, msg: Msg, given: float | None, method: str = "") -> tuple[float, str]:
        if given is not None:
            return given, method or "caller"
        if config.score_importance:
            text = msg.text_content
            if text.strip():
                return self._scorer.assess_now([text]).importance_score, "heuristic"
        return config.default_importance, "default"

    def add(self, tx: Tx, record: MemoryRecord, new: list[NewMessage]) -> None:
        self.add_items(tx, record, new)

    def add_items(self, tx: Tx, record: MemoryRecord, new: list[NewMessage]) -> list[TierEvent]:
        """Store `new` in L1 and promote the important ones to L2; returns the promotions."""
        config = self.config(record)
        memory_id = record.memory_id
        now = time.time()
        items: list[TierItem] = []
        promoted: list[TierItem] = []
        for m in new:
            importance, method = self.importance(config, m.msg, m.importance, m.importance_method)
            tokens = self.count_tokens(config, m.msg)
            items.append(TierItem(0, L1, MESSAGE, importance, tokens, now, m.msg, method=method))
        seqs = next_seqs(tx, memory_id, len(items) + sum(1 for i in items if i.importance > config.promote_threshold))
        it = iter(seqs)
        for item in items:
            item.seq = next(it)
            item.origins = [item.seq]
        for item in items:
            if item.importance > config.promote_threshold:
                promoted.append(TierItem(next(it), L2, MESSAGE, item.importance, item.tokens, now, item.msg,
                                         origins=[item.seq], method=item.method))
        tx.tiered_insert(memory_id, [to_row(i) for i in items + promoted])
        events = [TierEvent("promote", L1, L2, [p.origins[0]], p.tokens, now, {"l2_seq": p.seq, "importance": p.importance})
                  for p in promoted]
        append_events(tx, memory_id, events)
        return events

    def read(self, tx: Tx, record: MemoryRecord, after_seq: int, limit: int | None) -> list[Row]:
        return [Row(r.seq, encode_msg(of_row(r).as_message())) for r in tx.tiered_rows(record.memory_id, L1, after_seq, limit)]

    def count(self, tx: Tx, record: MemoryRecord) -> int:
        return tx.tiered_count(record.memory_id, L1)

    def next_seq(self, tx: Tx, record: MemoryRecord) -> int | None:
        # No deltas: a pass rewrites L1 items in place (a covered summary), which neither the
        # count nor the seqs would reveal.
        return None

    def delete_at(self, tx: Tx, record: MemoryRecord, index: int) -> bool:
        seq = tx.tiered_seq_at(record.memory_id, L1, index)
        return seq is not None and tx.tiered_delete(record.memory_id, [seq]) > 0

    def clear(self, tx: Tx, record: MemoryRecord) -> None:
        totals = tx.tiered_totals(record.memory_id)
        tx.tiered_clear(record.memory_id)
        append_events(tx, record.memory_id, [TierEvent("clear", 0, 0, [], sum(t for _, t in totals.values()),
                                                       detail={"items": sum(c for c, _ in totals.values())})])

    # -- session state ----------------------------------------------------------------------

    def export_state(self, tx: Tx, record: MemoryRecord) -> list[StateEntry]:
        memory_id = record.memory_id
        entries = [StateEntry(key, items=[item_to_dict(i) for i in read_tier(tx, memory_id, tier)])
                   for key, tier in TIER_KEYS.items()]
        entries.append(StateEntry(KEY_EVENTS, items=[e.to_dict() for _, e in read_events(tx, memory_id)]))
        stats = asdict(get_stats(tx, memory_id))
        stats["next_seq"] = int(tx.kv_get(memory_id, NEXT) or "1")
        entries.append(StateEntry(KEY_STATS, value=stats))
        return entries

    def parse_state(self, entries: list[StateEntry], encode: Callable[[Msg, str], NewMessage]) -> dict[str, Any]:
        parsed: dict[str, Any] = {"items": [], "events": [], "stats": TierStats(), "next_seq": 1}
        seen: set[int] = set()
        for entry in entries:
            if entry.key in TIER_KEYS:
                if entry.items is None:
                    raise InvalidArgumentError(entry.key, "must be a list state")
                for i, data in enumerate(entry.items):
                    item = item_from_dict(data, f"{entry.key}[{i}]", TIER_KEYS[entry.key], encode)
                    if item.seq in seen:
                        raise InvalidArgumentError(f"{entry.key}[{i}].seq", f"repeats sequence number {item.seq}")
                    seen.add(item.seq)
                    parsed["items"].append(item)
            elif entry.key == KEY_EVENTS:
                if entry.items is None:
                    raise InvalidArgumentError(KEY_EVENTS, "must be a list state")
                for i, data in enumerate(entry.items):
                    try:
                        event = TierEvent.from_dict(data)
                    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
                        raise InvalidArgumentError(f"{KEY_EVENTS}[{i}]", f"is not a tier event: {exc}") from None
                    sequences(event.item_seqs, f"{KEY_EVENTS}[{i}].item_seqs")
                    count(event.tokens, f"{KEY_EVENTS}[{i}].tokens")
                    epoch_seconds(event.time, f"{KEY_EVENTS}[{i}].time")
                    parsed["events"].append(event)
            elif entry.key == KEY_STATS:
                if entry.is_list or not isinstance(entry.value, dict):
                    raise InvalidArgumentError(KEY_STATS, "must be a single JSON object")
                try:
                    parsed["stats"] = TierStats.from_json(json.dumps(entry.value))
                except (TypeError, ValueError) as exc:
                    raise InvalidArgumentError(KEY_STATS, f"is not valid: {exc}") from None
                for name, value in asdict(parsed["stats"]).items():
                    count(value, f"{KEY_STATS}.{name}")
                parsed["next_seq"] = sequence(entry.value.get("next_seq", 1), f"{KEY_STATS}.next_seq")
            else:
                raise InvalidArgumentError(
                    f"entries[{entry.key}]",
                    "is not a state key of a TIERED memory (tieredMemory_l1, _l2, _l3, _events, _stats)",
                )
        parsed["next_seq"] = max([parsed["next_seq"], *(s + 1 for s in seen)])
        return parsed

    def apply_state(self, tx: Tx, record: MemoryRecord, parsed: dict[str, Any]) -> None:
        memory_id = record.memory_id
        config = self.config(record)
        tx.tiered_clear(memory_id)
        for item in parsed["items"]:
            # Recounted with this memory's counter: budgets mean this memory's tokens.
            item.tokens = (self.count_tokens(config, item.msg) if item.msg is not None
                           else self.counters.text(config.token_counter, item.text))
        tx.tiered_insert(memory_id, [to_row(i) for i in parsed["items"]])
        tx.clear(memory_id, EVENTS)
        append_events(tx, memory_id, parsed["events"])
        put_stats(tx, memory_id, parsed["stats"])
        tx.kv_put(memory_id, NEXT, str(parsed["next_seq"]))
        tx.kv_put(memory_id, LOADED, uuid.uuid4().hex)


def item_to_dict(item: TierItem) -> dict[str, Any]:
    data: dict[str, Any] = {"seq": item.seq, "kind": item.kind, "importance": item.importance, "tokens": item.tokens,
                            "created": item.created, "hits": item.hits, "origins": item.origins, "method": item.method}
    if item.covered:
        data["covered"] = True
    if item.msg is not None:
        data["msg"] = msg_to_dict(item.msg)
    else:
        data["text"] = item.text
    return data


def item_from_dict(data: Any, where: str, tier: int, encode: Callable[[Msg, str], NewMessage]) -> TierItem:
    if not isinstance(data, dict):
        raise InvalidArgumentError(where, "must be a JSON object")
    kind = data.get("kind", SUMMARY if tier == L3 else MESSAGE)
    if kind not in TIER_KINDS[tier]:
        raise InvalidArgumentError(f"{where}.kind", f"is {kind!r}; this tier holds {' or '.join(TIER_KINDS[tier])} items")
    seq = sequence(data.get("seq"), f"{where}.seq")
    importance = data.get("importance", 0.5)
    if not isinstance(importance, (int, float)) or isinstance(importance, bool) or not 0.0 <= importance <= 1.0:
        raise InvalidArgumentError(f"{where}.importance", "must be a number from 0 to 1")
    msg = None
    text = ""
    if kind == SUMMARY:
        given = data.get("text")
        if not isinstance(given, str) or not given:
            raise InvalidArgumentError(f"{where}.text", "must be the summary's text")
        text = given
    else:
        if "msg" not in data:
            raise InvalidArgumentError(f"{where}.msg", "is required for a message or marker")
        msg = encode(msg_from_dict(data["msg"], f"{where}.msg"), f"{where}.msg").msg
    origins = sequences(data.get("origins", [seq]), f"{where}.origins")
    created = epoch_seconds(data.get("created", time.time()), f"{where}.created")
    hits = count(data.get("hits", 0), f"{where}.hits")
    return TierItem(seq, tier, kind, float(importance), 0, created, msg, text, list(origins), str(data.get("method", "")),
                    hits, bool(data.get("covered", False)))
