"""What a shared memory pool holds and reports, in library types."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentscope_memory.errors import AbortedError
from agentscope_memory.message import Msg

WRITE_EVENT = "shared_pool.write"
DELETE_EVENT = "shared_pool.delete"


@dataclass(frozen=True)
class PoolEntry:
    pool_id: str
    key: str
    # One JSON document, as written.
    content_json: str
    version: int
    created_by: str
    updated_by: str
    created_at: float
    updated_at: float
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> Any:
        """The content as a Python value."""
        return json.loads(self.content_json)


@dataclass(frozen=True)
class PoolEvent:
    sequence: int
    event_type: str  # WRITE_EVENT or DELETE_EVENT
    pool_id: str
    key: str
    version: int
    writer: str
    time: float


@dataclass(frozen=True)
class PoolWrite:
    entry: PoolEntry
    sequence: int


@dataclass(frozen=True)
class PoolDelete:
    deleted_version: int
    sequence: int


@dataclass(frozen=True)
class EntryPage:
    entries: list[PoolEntry]
    next_page_token: str


@dataclass(frozen=True)
class EventPage:
    events: list[PoolEvent]
    next_page_token: str


@dataclass(frozen=True)
class RenderedPools:
    """Pool entries rendered for a model call: `text` (one line per entry) and `messages` (one
    SYSTEM message per entry), newest first."""

    text: str
    messages: list[Msg]
    entry_count: int
    omitted_count: int
    token_count: int


class PoolConflictError(AbortedError):
    """A compare-and-set found the entry at another version than expected (0: absent)."""

    def __init__(self, pool_id: str, key: str, expected: int, actual: int) -> None:
        self.pool_id, self.key, self.expected, self.actual = pool_id, key, expected, actual
        super().__init__(
            f"key {key!r} of pool {pool_id!r} is at version {actual}, not the expected {expected}"
            + (" (it does not exist)" if actual == 0 else "")
        )
