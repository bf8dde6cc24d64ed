"""An AUTO_CONTEXT memory kept in the store.

Layout per memory: lists `working` and `original` (messages), `events` (event JSON); key/values
`offload:<uuid>` (the offloaded messages as JSON), `plan` (the attached plan) and `totals` (the
working list's estimated tokens, kept up to date on every change so that checking the trigger
never re-reads the history).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.messages import check_msgs
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.short_term.auto_context.config import CL100K, AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import CompressionEvent, PlanNote, PlanSubtask
from agentscope_memory.short_term.auto_context.tokens import Cl100kCounter, estimate_tokens
from agentscope_memory.short_term.manager import NewMessage
from agentscope_memory.message import Msg, msg_from_dict, msg_to_dict, to_json_text
from agentscope_memory.store.codec import decode_msg
from agentscope_memory.session.state import StateEntry, messages_from_items
from agentscope_memory.store.base import MemoryRecord, Row, Tx

KIND = "AUTO_CONTEXT"
WORKING = "working"
ORIGINAL = "original"
EVENTS = "events"
OFFLOAD_PREFIX = "offload:"
PLAN = "plan"
TOTALS = "totals"

# Session keys of AgentScope-Java's AutoContextMemory (reference/autocontext.md §14).
KEY_WORKING = "autoContextMemory_workingMessages"
KEY_ORIGINAL = "autoContextMemory_originalMessages"
KEY_OFFLOAD = "autoContextMemory_offloadContext"
KEY_EVENTS = "autoContextMemory_compressionEvents"


def read_messages(tx: Tx, memory_id: str, list_name: str) -> list[Msg]:
    return [decode_msg(r.data) for r in tx.read(memory_id, list_name)]


def get_totals(tx: Tx, memory_id: str) -> dict[str, int]:
    """`tokens`: Java's estimate of the working history (drives the trigger); `reported`: its
    cl100k count, kept only for memories whose token counter is cl100k."""
    return json.loads(tx.kv_get(memory_id, TOTALS) or '{"tokens": 0}')


def get_tokens(tx: Tx, memory_id: str) -> int:
    return int(get_totals(tx, memory_id)["tokens"])


def set_tokens(tx: Tx, memory_id: str, tokens: int, reported: int | None = None) -> None:
    data = {"tokens": max(tokens, 0)}
    if reported is not None:
        data["reported"] = max(reported, 0)
    tx.kv_put(memory_id, TOTALS, json.dumps(data))


def put_offload(tx: Tx, memory_id: str, uuid: str, msgs: list[Msg]) -> None:
    tx.kv_put(memory_id, OFFLOAD_PREFIX + uuid, to_json_text([msg_to_dict(m) for m in msgs]))


def get_offload(tx: Tx, memory_id: str, uuid: str) -> list[Msg] | None:
    text = tx.kv_get(memory_id, OFFLOAD_PREFIX + uuid)
    return None if text is None else [msg_from_dict(d) for d in json.loads(text)]


def read_events(tx: Tx, memory_id: str, after_seq: int = 0) -> list[tuple[int, CompressionEvent]]:
    return [(r.seq, CompressionEvent.from_dict(json.loads(r.data))) for r in tx.read(memory_id, EVENTS, after_seq)]


def append_events(tx: Tx, memory_id: str, events: list[CompressionEvent]) -> None:
    tx.append(memory_id, EVENTS, [to_json_text(e.to_dict()) for e in events])


def get_plan(tx: Tx, memory_id: str) -> PlanNote | None:
    text = tx.kv_get(memory_id, PLAN)
    if text is None:
        return None
    data = json.loads(text)
    return PlanNote(data["description"], data["expected_outcome"], [PlanSubtask(**s) for s in data["subtasks"]])


def set_plan(tx: Tx, memory_id: str, plan: PlanNote | None) -> None:
    if plan is None:
        tx.kv_delete(memory_id, PLAN)
        return
    tx.kv_put(memory_id, PLAN, json.dumps({
        "description": plan.description, "expected_outcome": plan.expected_outcome,
        "subtasks": [{"name": s.name, "state": s.state} for s in plan.subtasks]}))


class AutoContextKind:
    """The AUTO_CONTEXT memory kind for the plain Memory operations and session state."""

    kind = KIND
    state_keys = [(KEY_WORKING, True), (KEY_ORIGINAL, True), (KEY_OFFLOAD, False), (KEY_EVENTS, True)]
    # Its lists are not a plain message list: no delete or mark by id.
    editable_list: str | None = None

    def __init__(self) -> None:
        self._cl100k: Cl100kCounter | None = None

    def reporter(self, record: MemoryRecord) -> Cl100kCounter | None:
        """The cl100k counter when this memory reports real token counts, else None."""
        if CL100K not in record.config_json or AutoContextConfig.from_json(record.config_json).token_counter != CL100K:
            return None
        if self._cl100k is None:
            self._cl100k = Cl100kCounter()
        return self._cl100k

    def _update_totals(self, tx: Tx, record: MemoryRecord, msgs: list[Msg], sign: int) -> None:
        totals = get_totals(tx, record.memory_id)
        reporter = self.reporter(record)
        reported = None
        if reporter is not None:
            reported = int(totals.get("reported", 0)) + sign * reporter.count(msgs)
        set_tokens(tx, record.memory_id, int(totals["tokens"]) + sign * estimate_tokens(msgs), reported)

    def validate_config(self, config_json: str) -> str:
        return AutoContextConfig.from_json(config_json).to_json()

    def add(self, tx: Tx, record: MemoryRecord, new: list[NewMessage]) -> None:
        data = [m.data for m in new]
        # Java appends to both histories and never compresses on add.
        tx.append(record.memory_id, WORKING, data)
        tx.append(record.memory_id, ORIGINAL, data)
        self._update_totals(tx, record, [m.msg for m in new], +1)

    def read(self, tx: Tx, record: MemoryRecord, after_seq: int, limit: int | None) -> list[Row]:
        return tx.read(record.memory_id, WORKING, after_seq, limit)

    def count(self, tx: Tx, record: MemoryRecord) -> int:
        return tx.length(record.memory_id, WORKING)

    def next_seq(self, tx: Tx, record: MemoryRecord) -> int | None:
        # Reads are the working list's items; a compression replaces them (new seqs for all).
        return tx.next_seq(record.memory_id, WORKING)

    def delete_at(self, tx: Tx, record: MemoryRecord, index: int) -> bool:
        # Working history only, as Java's deleteMessage.
        rows = tx.read(record.memory_id, WORKING, 0, index + 1)
        if len(rows) <= index:
            return False
        removed = decode_msg(rows[index].data)
        tx.delete_at(record.memory_id, WORKING, index)
        self._update_totals(tx, record, [removed], -1)
        return True

    def clear(self, tx: Tx, record: MemoryRecord) -> None:
        # Java's clear() empties both histories but keeps offloads and events (quirk Q2).
        tx.clear(record.memory_id, WORKING)
        tx.clear(record.memory_id, ORIGINAL)
        set_tokens(tx, record.memory_id, 0, None if self.reporter(record) is None else 0)

    # -- session state ----------------------------------------------------------------------

    def export_state(self, tx: Tx, record: MemoryRecord) -> list[StateEntry]:
        memory_id = record.memory_id
        entries = [
            StateEntry(KEY_WORKING, items=[msg_to_dict(m) for m in read_messages(tx, memory_id, WORKING)]),
            StateEntry(KEY_ORIGINAL, items=[msg_to_dict(m) for m in read_messages(tx, memory_id, ORIGINAL)]),
        ]
        offload = {
            key[len(OFFLOAD_PREFIX):]: json.loads(tx.kv_get(memory_id, key) or "[]")
            for key in tx.kv_keys(memory_id, OFFLOAD_PREFIX)
        }
        if offload:
            entries.append(StateEntry(KEY_OFFLOAD, value={"offloadContext": offload}))
        events = [e.to_dict() for _, e in read_events(tx, memory_id)]
        if events:
            entries.append(StateEntry(KEY_EVENTS, items=events))
        return entries

    def parse_state(self, entries: list[StateEntry], encode: Callable[[Msg, str], NewMessage]) -> dict[str, Any]:
        parsed: dict[str, Any] = {"working": [], "original": [], "offload": None, "events": []}
        for entry in entries:
            if entry.key in (KEY_WORKING, KEY_ORIGINAL):
                msgs = messages_from_items(entry)
                parsed["working" if entry.key == KEY_WORKING else "original"] = [
                    encode(m, f"{entry.key}[{i}]") for i, m in enumerate(msgs)]
            elif entry.key == KEY_OFFLOAD:
                value = entry.value
                if entry.is_list or not isinstance(value, dict) or not isinstance(value.get("offloadContext"), dict):
                    raise InvalidArgumentError(KEY_OFFLOAD, 'must be a single value {"offloadContext": {uuid: [messages]}}')
                offload = {}
                for uuid, items in value["offloadContext"].items():
                    if not isinstance(items, list):
                        raise InvalidArgumentError(f"{KEY_OFFLOAD}.offloadContext.{uuid}", "must be a list of messages")
                    where = f"{KEY_OFFLOAD}.offloadContext.{uuid}"
                    # The uuid becomes a store key: the id rules keep NUL and control characters out.
                    check_id(uuid, f"{KEY_OFFLOAD}.offloadContext (key {uuid!r})")
                    offload[uuid] = list(check_msgs(messages_from_items(StateEntry(where, items=items)), where))
                parsed["offload"] = offload
            elif entry.key == KEY_EVENTS:
                if entry.items is None:
                    raise InvalidArgumentError(KEY_EVENTS, "must be a list state")
                events = []
                for i, item in enumerate(entry.items):
                    if not isinstance(item, dict):
                        raise InvalidArgumentError(f"{KEY_EVENTS}[{i}]", "must be a JSON object")
                    try:
                        events.append(CompressionEvent.from_dict(item))
                    except (ValueError, TypeError, OverflowError) as exc:
                        raise InvalidArgumentError(f"{KEY_EVENTS}[{i}]", f"is not a compression event: {exc}") from None
                parsed["events"] = events
            else:
                raise InvalidArgumentError(
                    f"entries[{entry.key}]",
                    "is not a state key of an AUTO_CONTEXT memory (autoContextMemory_workingMessages, "
                    "_originalMessages, _offloadContext, _compressionEvents)",
                )
        return parsed

    def apply_state(self, tx: Tx, record: MemoryRecord, parsed: dict[str, Any]) -> None:
        memory_id = record.memory_id
        tx.replace(memory_id, WORKING, [m.data for m in parsed["working"]])
        tx.replace(memory_id, ORIGINAL, [m.data for m in parsed["original"]])
        working = [m.msg for m in parsed["working"]]
        reporter = self.reporter(record)
        set_tokens(tx, memory_id, estimate_tokens(working), None if reporter is None else reporter.count(working))
        # Java's loadFrom keeps the in-memory offload map when the session has none, and clears
        # the events when the session has none.
        if parsed["offload"] is not None:
            for key in tx.kv_keys(memory_id, OFFLOAD_PREFIX):
                tx.kv_delete(memory_id, key)
            for uuid, msgs in parsed["offload"].items():
                put_offload(tx, memory_id, uuid, msgs)
        tx.clear(memory_id, EVENTS)
        append_events(tx, memory_id, parsed["events"])
