"""Shared memory pools: versioned key -> JSON spaces several agents share (Loom's shared pool)."""

from agentscope_memory.pool.attachments import MemoryPools, PoolAttachments
from agentscope_memory.pool.engine import PoolLimits, SharedPools
from agentscope_memory.pool.model import (
    DELETE_EVENT,
    WRITE_EVENT,
    EntryPage,
    EventPage,
    PoolConflictError,
    PoolDelete,
    PoolEntry,
    PoolEvent,
    PoolWrite,
    RenderedPools,
)

__all__ = [
    "DELETE_EVENT", "WRITE_EVENT", "EntryPage", "EventPage", "MemoryPools", "PoolAttachments", "PoolConflictError", "PoolDelete", "PoolEntry",
    "PoolEvent", "PoolLimits", "PoolWrite", "RenderedPools", "SharedPools",
]
