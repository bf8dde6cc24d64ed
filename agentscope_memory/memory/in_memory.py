"""AgentScope-Java `InMemoryMemory` semantics over a stored list.

Append; read everything in insertion order; delete by position (out of range changes nothing);
clear. The list lives in the store, so "in memory" names the semantics, not where it is kept.
"""

from __future__ import annotations

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.memory.manager import NewMessage
from agentscope_memory.store.base import MemoryRecord, Row, Tx

MESSAGES = "messages"


class InMemoryKind:
    """The `IN_MEMORY` memory kind."""

    kind = "IN_MEMORY"

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

    def delete_at(self, tx: Tx, record: MemoryRecord, index: int) -> bool:
        return tx.delete_at(record.memory_id, MESSAGES, index)

    def clear(self, tx: Tx, record: MemoryRecord) -> None:
        tx.clear(record.memory_id, MESSAGES)
