"""A memory's state in AgentScope's session terms: the keys and JSON values `saveTo` writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import Msg, msg_from_dict, msg_to_dict

__all__ = ["MEMORY_MESSAGES", "StateEntry", "messages_from_items", "messages_to_items"]

# InMemoryMemory's key: prefix "memory" + "_messages" (reference §2.2).
MEMORY_MESSAGES = "memory_messages"


@dataclass
class StateEntry:
    """One session entry: a single JSON value (`{key}.json`) or a list (`{key}.jsonl`)."""

    key: str
    value: Any = None
    items: list[Any] | None = None

    @property
    def is_list(self) -> bool:
        return self.items is not None


def messages_to_items(msgs: list[Msg]) -> list[dict[str, Any]]:
    return [msg_to_dict(m) for m in msgs]


def messages_from_items(entry: StateEntry) -> list[Msg]:
    """Messages of a list entry, read as Java reads them; `null` items are dropped (AgentScope's
    getMessages() hides them too)."""
    if entry.items is None:
        raise InvalidArgumentError(entry.key, "must be a list state (a .jsonl file), not a single value")
    return [msg_from_dict(item, f"{entry.key}[{i}]") for i, item in enumerate(entry.items) if item is not None]
