"""The global `meta` table: facts about the database itself (schema version, done migrations)."""

from __future__ import annotations

from agentscope_memory.store.sql.base import SqlTxBase


class MetaStatements(SqlTxBase):
    def meta_get(self, key: str) -> str | None:
        row = self._one("SELECT value FROM {meta} WHERE key = ?", (key,))
        return row[0] if row else None

    def meta_put(self, key: str, value: str) -> None:
        self._execute(
            "INSERT INTO {meta} (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def meta_setdefault(self, key: str, value: str) -> str:
        # Read first: a value that exists needs no write (a database role granted only reads
        # can still serve). Then insert only if absent, and read again: replicas racing to
        # create a value all end up with the one that was stored first.
        stored = self.meta_get(key)
        if stored is not None:
            return stored
        self._execute(
            "INSERT INTO {meta} (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, value)
        )
        stored = self.meta_get(key)
        assert stored is not None
        return stored
