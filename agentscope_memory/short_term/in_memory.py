"""AgentScope-Java `InMemoryMemory` semantics over a stored list.

Append; read everything in insertion order; delete by position (out of range changes nothing);
clear. The list lives in the store, so "in memory" names the semantics, not where it is kept.
"""

from __future__ import annotations

from typing import Callable

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.short_term.manager import NewMessage
from agentscope_memory.message import Msg
from agentscope_memory.store.codec import decode_msg
from agentscope_memory.session.state import (
    MEMORY_MESSAGES,
    StateEntry,
    messages_from_items,
    messages_to_items,
)
from agentscope_memory.store.base import MemoryRecord, Row, Tx

MESSAGES = "messages"


class InMemoryKind:
    """The `IN_MEMORY` memory kind."""

    kind = "IN_MEMORY"
    # (key, is_list) of the session entries this kind reads and writes.
    state_keys = [(MEMORY_MESSAGES, True)]
    # Messages are deleted and marked by id in this list (DeleteMessages, UpdateMessageMarks).
    editable_list: str | None = MESSAGES

    def validate_config(self, config_json: str) -> str:
        if config_json.strip() not in ("", "{}"):
            raise InvalidArgumentError(
                "auto_context_config", "is only allowed for MEMORY_KIND_AUTO_CONTEXT memories"
            )
        return "{}"

    def add(self, tx: Tx, record: MemoryRecord, new: list[NewMessage]) -> None:
        tx.append(record.memory_id, MESSAGES, [m.data for m in new])

    def read(self, tx: Tx, record: MemoryRecord, after_seq: int, limit: int | None) -> list[Row]:
        return tx.read(record.memory_id, MESSAGES, after_seq, limit)

    def count(self, tx: Tx, record: MemoryRecord) -> int:
        return tx.length(record.memory_id, MESSAGES)

    def next_seq(self, tx: Tx, record: MemoryRecord) -> int | None:
        return tx.next_seq(record.memory_id, MESSAGES)

    def delete_at(self, tx: Tx, record: MemoryRecord, index: int) -> bool:
        return tx.delete_at(record.memory_id, MESSAGES, index)

    def clear(self, tx: Tx, record: MemoryRecord) -> None:
        tx.clear(record.memory_id, MESSAGES)

    def export_state(self, tx: Tx, record: MemoryRecord) -> list[StateEntry]:
        # InMemoryMemory.saveTo always saves the list, even when empty.
        msgs = [decode_msg(r.data) for r in tx.read(record.memory_id, MESSAGES)]
        return [StateEntry(MEMORY_MESSAGES, items=messages_to_items(msgs))]

    def parse_state(
        self, entries: list[StateEntry], encode: Callable[[Msg, str], NewMessage]
    ) -> list[NewMessage]:
        messages: list[NewMessage] = []
        for entry in entries:
            if entry.key != MEMORY_MESSAGES:
                raise InvalidArgumentError(
                    f"entries[{entry.key}]",
                    f"is not a state key of an IN_MEMORY memory (it has only {MEMORY_MESSAGES})",
                )
            msgs = messages_from_items(entry)
            messages = [encode(m, f"{MEMORY_MESSAGES}[{i}]") for i, m in enumerate(msgs)]
        # A missing key loads as an empty list, as AgentScope's loadFrom does.
        return messages

    def apply_state(self, tx: Tx, record: MemoryRecord, parsed: list[NewMessage]) -> None:
        tx.replace(record.memory_id, MESSAGES, [m.data for m in parsed])
