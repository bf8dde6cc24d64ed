"""`MemoryDescription`: a short-term memory as callers see it (not what it holds)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.store.base import MemoryRecord


@dataclass(frozen=True)
class MemoryDescription:
    """What `create_memory`, `get_memory` and `list_memories` return, remote or local."""

    memory_id: str
    kind: str
    message_count: int
    version: int
    labels: dict[str, str] = field(default_factory=dict)
    create_time: float = 0.0
    update_time: float = 0.0
    # Set for AUTO_CONTEXT memories: the effective configuration (unset fields take Java's defaults).
    auto_context_config: AutoContextConfig | None = None
    # Set for TIERED memories: the effective configuration.
    tiered_config: TieredConfig | None = None


def describe(record: MemoryRecord, message_count: int) -> MemoryDescription:
    return MemoryDescription(
        memory_id=record.memory_id,
        kind=record.kind,
        message_count=message_count,
        version=record.version,
        labels=dict(record.labels),
        create_time=record.create_time,
        update_time=record.update_time,
        auto_context_config=(
            AutoContextConfig.from_json(record.config_json) if record.kind == "AUTO_CONTEXT" else None
        ),
        tiered_config=TieredConfig.from_json(record.config_json) if record.kind == "TIERED" else None,
    )
