"""Parent/child scopes (`agentscope_memory.scopes`): who is whose parent, and which stored items
their owners made visible beyond themselves.

- `scope_links`: one row per child naming its parent, in a `space` (`memory` for short-term
  memories by id, `ltm` for long-term scopes by exact scope key).
- `scope_locks`: one row per (tenant, space), updated by every change of the hierarchy so that
  concurrent changes (PostgreSQL replicas) queue up and no two of them can close a cycle.
- `scope_marks`: the SHARED and GLOBAL items of a memory's list, by sequence number (LOCAL, the
  default, has no row). An item deleted from its list disappears from what children inherit
  because reads join the items themselves; sequence numbers are never reused while the memory
  lives, and its marks are deleted with it (`SqlTx.delete_memory`).
- `scope_ltm_keys`: the long-term scope keys that hold SHARED or GLOBAL memories, with the exact
  scope they belong to.
"""

from __future__ import annotations

from typing import Sequence

from agentscope_memory.store.base import Row
from agentscope_memory.store.sql.base import SqlTxBase
from agentscope_memory.store.sql.dialect import placeholders

SCOPES_SCHEMA = """
CREATE TABLE IF NOT EXISTS {scope_links} (
    tenant TEXT NOT NULL,
    space TEXT NOT NULL,
    child TEXT NOT NULL,
    parent TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, space, child)
);
CREATE INDEX IF NOT EXISTS {scope_links}_by_parent ON {scope_links} (tenant, space, parent, child);
CREATE TABLE IF NOT EXISTS {scope_locks} (
    tenant TEXT NOT NULL,
    space TEXT NOT NULL,
    changes BIGINT NOT NULL,
    PRIMARY KEY (tenant, space)
);
CREATE TABLE IF NOT EXISTS {scope_marks} (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    list_name TEXT NOT NULL,
    seq BIGINT NOT NULL,
    visibility TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id, list_name, seq)
);
CREATE INDEX IF NOT EXISTS {scope_marks}_global ON {scope_marks} (tenant, visibility, memory_id);
CREATE TABLE IF NOT EXISTS {scope_ltm_keys} (
    tenant TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    base_key TEXT NOT NULL,
    visibility TEXT NOT NULL,
    PRIMARY KEY (tenant, scope_key)
);
CREATE INDEX IF NOT EXISTS {scope_ltm_keys}_by_base ON {scope_ltm_keys} (tenant, base_key);
CREATE INDEX IF NOT EXISTS {scope_ltm_keys}_global ON {scope_ltm_keys} (tenant, visibility);
"""

SCOPE_TABLES = ("scope_links", "scope_locks", "scope_marks", "scope_ltm_keys")


class ScopeStatements(SqlTxBase):
    # -- hierarchy ---------------------------------------------------------------------------

    def scope_lock(self, space: str) -> None:
        """Serialise hierarchy changes of this tenant's `space` until the transaction ends."""
        self._execute(
            "INSERT INTO {scope_locks} (tenant, space, changes) VALUES (?, ?, 1)"
            " ON CONFLICT (tenant, space) DO UPDATE SET changes = {scope_locks}.changes + 1",
            (self.tenant, space),
        )

    def scope_parent(self, space: str, child: str) -> str | None:
        row = self._one(
            "SELECT parent FROM {scope_links} WHERE tenant = ? AND space = ? AND child = ?",
            (self.tenant, space, child),
        )
        return row[0] if row else None

    def scope_set_parent(self, space: str, child: str, parent: str | None, now: float) -> None:
        if parent is None:
            self._execute(
                "DELETE FROM {scope_links} WHERE tenant = ? AND space = ? AND child = ?",
                (self.tenant, space, child),
            )
            return
        self._execute(
            "INSERT INTO {scope_links} (tenant, space, child, parent, created) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (tenant, space, child) DO UPDATE SET parent = excluded.parent,"
            " created = excluded.created",
            (self.tenant, space, child, parent, now),
        )

    def scope_children(self, space: str, parent: str, after: str, limit: int) -> list[str]:
        rows = self._all(
            "SELECT child FROM {scope_links} WHERE tenant = ? AND space = ? AND parent = ? AND child{bytewise} > ?"
            " ORDER BY child{bytewise} LIMIT ?",
            (self.tenant, space, parent, after, limit),
        )
        return [r[0] for r in rows]

    def scope_child_count(self, space: str, parent: str) -> int:
        row = self._one(
            "SELECT COUNT(*) FROM {scope_links} WHERE tenant = ? AND space = ? AND parent = ?",
            (self.tenant, space, parent),
        )
        return int(row[0])

    def scope_detach_children(self, space: str, parent: str) -> int:
        cursor = self._execute(
            "DELETE FROM {scope_links} WHERE tenant = ? AND space = ? AND parent = ?",
            (self.tenant, space, parent),
        )
        return int(cursor.rowcount)

    # -- visibility of short-term items ------------------------------------------------------

    def scope_mark_last(self, memory_id: str, list_name: str, count: int, visibility: str) -> None:
        """Mark the last `count` items of a list (the ones just appended) with `visibility`."""
        rows = self._all(
            "SELECT seq FROM {items} WHERE tenant = ? AND memory_id = ? AND list_name = ?"
            " ORDER BY seq DESC LIMIT ?",
            (self.tenant, memory_id, list_name, count),
        )
        self._many(
            "INSERT INTO {scope_marks} (tenant, memory_id, list_name, seq, visibility) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (tenant, memory_id, list_name, seq) DO UPDATE SET visibility = excluded.visibility",
            [(self.tenant, memory_id, list_name, r[0], visibility) for r in rows],
        )

    def scope_marked(
        self, memory_id: str, list_name: str, visibilities: Sequence[str], after_seq: int, limit: int
    ) -> tuple[list[tuple[Row, str]], int | None]:
        """The items of a list marked with one of `visibilities` among the next `limit` marks
        after `after_seq`, in order, and the last mark's sequence number (None: no marks left).
        Marks of items deleted since are skipped, so fewer items than marks may come back."""
        marks = self._all(
            "SELECT seq, visibility FROM {scope_marks} WHERE tenant = ? AND memory_id = ? AND list_name = ?"
            f" AND visibility IN ({placeholders(len(visibilities))}) AND seq > ? ORDER BY seq LIMIT ?",
            (self.tenant, memory_id, list_name, *visibilities, after_seq, limit),
        )
        if not marks:
            return [], None
        seen = {int(m[0]): m[1] for m in marks}
        rows = self._dialect.decode_rows(self._all(
            "SELECT seq, {item_columns} FROM {items} WHERE tenant = ? AND memory_id = ? AND list_name = ?"
            f" AND seq IN ({placeholders(len(seen))}) ORDER BY seq",
            (self.tenant, memory_id, list_name, *seen),
        ))
        return [(row, seen[row.seq]) for row in rows], int(marks[-1][0])

    def scope_global_memories(self, after: str, limit: int) -> list[str]:
        """The tenant's memories holding GLOBAL items, by id."""
        rows = self._all(
            "SELECT DISTINCT memory_id{bytewise} FROM {scope_marks} WHERE tenant = ? AND visibility = 'GLOBAL'"
            " AND memory_id{bytewise} > ? ORDER BY memory_id{bytewise} LIMIT ?",
            (self.tenant, after, limit),
        )
        return [r[0] for r in rows]

    def scope_forget_memory(self, memory_id: str) -> None:
        """A deleted memory: its marks and its own parent link go with it."""
        self._execute("DELETE FROM {scope_marks} WHERE tenant = ? AND memory_id = ?", (self.tenant, memory_id))
        self.scope_set_parent("memory", memory_id, None, 0.0)

    # -- long-term scope keys ----------------------------------------------------------------

    def scope_ltm_register(self, scope_key: str, base_key: str, visibility: str) -> None:
        self._execute(
            "INSERT INTO {scope_ltm_keys} (tenant, scope_key, base_key, visibility) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (tenant, scope_key) DO NOTHING",
            (self.tenant, scope_key, base_key, visibility),
        )

    def scope_ltm_visible_keys(self, base_keys: Sequence[str]) -> list[str]:
        """The SHARED and GLOBAL keys of these exact scopes."""
        if not base_keys:
            return []
        rows = self._all(
            f"SELECT scope_key FROM {{scope_ltm_keys}} WHERE tenant = ? AND base_key IN ({placeholders(len(base_keys))})"
            " ORDER BY scope_key{bytewise}",
            (self.tenant, *base_keys),
        )
        return [r[0] for r in rows]

    def scope_ltm_global_keys(self) -> list[str]:
        rows = self._all(
            "SELECT scope_key FROM {scope_ltm_keys} WHERE tenant = ? AND visibility = 'GLOBAL' ORDER BY scope_key{bytewise}",
            (self.tenant,),
        )
        return [r[0] for r in rows]
