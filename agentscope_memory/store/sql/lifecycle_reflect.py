"""Reads the reflection and consolidation jobs make over one exact long-term scope."""

from __future__ import annotations

from agentscope_memory.store.base import LongTermRow
from agentscope_memory.store.sql.long_term import LongTermStatements


class LifecycleReflectStatements(LongTermStatements):
    def ltm_typed_rows(self, scope_key: str, memory_type: str, limit: int, newest_first: bool = False,
                       unpinned: bool = False) -> list[LongTermRow]:
        """Live memories of one type in one exact scope, oldest (or newest) first; with
        `unpinned`, only those not pinned."""
        order = "DESC" if newest_first else "ASC"
        return self._rows(
            "SELECT {columns} FROM {ltm} WHERE tenant = ? AND scope_key = ? AND memory_type = ? AND deleted = 0"
            + (" AND pinned = 0" if unpinned else "") +
            f" ORDER BY created {order}, memory_id{{bytewise}} {order} LIMIT ?",
            (self.tenant, scope_key, memory_type, int(limit)),
        )

    def ltm_typed_count(self, scope_key: str, memory_type: str, unpinned: bool = False) -> int:
        """How many `ltm_typed_rows` holds (with `unpinned`, of those not pinned)."""
        row = self._one(
            "SELECT COUNT(*) FROM {ltm} WHERE tenant = ? AND scope_key = ? AND memory_type = ? AND deleted = 0"
            + (" AND pinned = 0" if unpinned else ""),
            (self.tenant, scope_key, memory_type),
        )
        return int(row[0]) if row else 0
