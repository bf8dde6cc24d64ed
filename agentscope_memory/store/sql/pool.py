"""Shared memory pools (`agentscope_memory.pool`): entries and the events of every change.

- `pools`: one row per pool, holding its last event sequence number. Every change of a pool
  locks this row first, so a pool's changes are serialised (also across PostgreSQL replicas)
  and its sequence numbers commit in order: a watcher reading "after N" never skips one.
- `pool_entries`: one row per key, its JSON content, version, writers, times and metadata.
- `pool_events`: one row per write or delete, by (pool, sequence). They are kept: a key's
  events are also what remembers the versions a deleted key had, so that it never repeats one.
"""

from __future__ import annotations

import json
from typing import Any

from agentscope_memory.store.base import PoolEntryRow, PoolEventRow
from agentscope_memory.store.sql.base import SqlTxBase

POOL_SCHEMA = """
CREATE TABLE IF NOT EXISTS {pools} (
    tenant TEXT NOT NULL,
    pool_id TEXT NOT NULL,
    last_seq BIGINT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, pool_id)
);
CREATE TABLE IF NOT EXISTS {pool_entries} (
    tenant TEXT NOT NULL,
    pool_id TEXT NOT NULL,
    entry_key TEXT NOT NULL,
    content_json TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_by TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    metadata_json TEXT NOT NULL,
    PRIMARY KEY (tenant, pool_id, entry_key)
);
CREATE INDEX IF NOT EXISTS {pool_entries}_by_update ON {pool_entries} (tenant, pool_id, updated_at);
CREATE TABLE IF NOT EXISTS {pool_events} (
    tenant TEXT NOT NULL,
    pool_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    event_type TEXT NOT NULL,
    entry_key TEXT NOT NULL,
    version BIGINT NOT NULL,
    writer TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, pool_id, seq)
);
CREATE INDEX IF NOT EXISTS {pool_events}_by_key ON {pool_events} (tenant, pool_id, entry_key, version);
"""

POOL_TABLES = ("pools", "pool_entries", "pool_events")

_ENTRY = ("pool_id, entry_key, content_json, version, created_by, updated_by, created_at, updated_at,"
          " metadata_json")


def _entry(r: Any) -> PoolEntryRow:
    return PoolEntryRow(pool_id=r[0], key=r[1], content_json=r[2], version=int(r[3]), created_by=r[4],
                        updated_by=r[5], created_at=float(r[6]), updated_at=float(r[7]),
                        metadata=json.loads(r[8]))


class PoolStatements(SqlTxBase):
    def pool_lock(self, pool_id: str, now: float) -> int:
        """Locks a pool for a change (creating it when new); returns its last sequence number."""
        self._execute(
            "INSERT INTO {pools} (tenant, pool_id, last_seq, created) VALUES (?, ?, 0, ?)"
            " ON CONFLICT (tenant, pool_id) DO NOTHING",
            (self.tenant, pool_id, now),
        )
        row = self._one("SELECT last_seq FROM {pools} WHERE tenant = ? AND pool_id = ?{row_lock}",
                        (self.tenant, pool_id))
        return int(row[0])

    def pool_get(self, pool_id: str, key: str) -> PoolEntryRow | None:
        row = self._one(f"SELECT {_ENTRY} FROM {{pool_entries}} WHERE tenant = ? AND pool_id = ? AND entry_key = ?",
                        (self.tenant, pool_id, key))
        return _entry(row) if row else None

    def pool_last_version(self, pool_id: str, key: str) -> int:
        row = self._one("SELECT MAX(version) FROM {pool_events} WHERE tenant = ? AND pool_id = ? AND entry_key = ?",
                        (self.tenant, pool_id, key))
        return int(row[0]) if row and row[0] is not None else 0

    def pool_put(self, entry: PoolEntryRow) -> None:
        self._execute(
            f"INSERT INTO {{pool_entries}} (tenant, {_ENTRY}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (tenant, pool_id, entry_key) DO UPDATE SET content_json = excluded.content_json,"
            " version = excluded.version, updated_by = excluded.updated_by, updated_at = excluded.updated_at,"
            " metadata_json = excluded.metadata_json",
            (self.tenant, entry.pool_id, entry.key, entry.content_json, entry.version, entry.created_by,
             entry.updated_by, entry.created_at, entry.updated_at, json.dumps(entry.metadata, ensure_ascii=False)),
        )

    def pool_remove(self, pool_id: str, key: str) -> None:
        self._execute("DELETE FROM {pool_entries} WHERE tenant = ? AND pool_id = ? AND entry_key = ?",
                      (self.tenant, pool_id, key))

    def pool_add_event(self, event: PoolEventRow) -> None:
        self._execute(
            "INSERT INTO {pool_events} (tenant, pool_id, seq, event_type, entry_key, version, writer, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (self.tenant, event.pool_id, event.seq, event.event_type, event.key, event.version, event.writer,
             event.created_at),
        )
        self._execute("UPDATE {pools} SET last_seq = ? WHERE tenant = ? AND pool_id = ?",
                      (event.seq, self.tenant, event.pool_id))

    def pool_list(self, pool_id: str, prefix: str, after_key: str | None, limit: int) -> list[PoolEntryRow]:
        sql = f"SELECT {_ENTRY} FROM {{pool_entries}} WHERE tenant = ? AND pool_id = ?"
        params: list[Any] = [self.tenant, pool_id]
        if prefix:
            # Characters, not bytes, on both databases; no LIKE, so no wildcard can be smuggled in.
            sql += " AND substr(entry_key, 1, ?) = ?"
            params += [len(prefix), prefix]
        if after_key is not None:
            sql += " AND entry_key{bytewise} > ?"
            params.append(after_key)
        return [_entry(r) for r in self._all(sql + " ORDER BY entry_key{bytewise} LIMIT ?", [*params, limit])]

    def pool_newest(self, pool_id: str, before: tuple[float, str] | None, limit: int) -> list[PoolEntryRow]:
        """Entries by `updated_at` descending (then key), after the position `before`."""
        sql = f"SELECT {_ENTRY} FROM {{pool_entries}} WHERE tenant = ? AND pool_id = ?"
        params: list[Any] = [self.tenant, pool_id]
        if before is not None:
            sql += " AND (updated_at < ? OR (updated_at = ? AND entry_key{bytewise} > ?))"
            params += [before[0], before[0], before[1]]
        return [_entry(r) for r in self._all(sql + " ORDER BY updated_at DESC, entry_key{bytewise} LIMIT ?", [*params, limit])]

    def pool_events(self, pool_id: str, after_seq: int, limit: int) -> list[PoolEventRow]:
        rows = self._all(
            "SELECT pool_id, seq, event_type, entry_key, version, writer, created_at FROM {pool_events}"
            " WHERE tenant = ? AND pool_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (self.tenant, pool_id, after_seq, limit),
        )
        return [PoolEventRow(pool_id=r[0], seq=int(r[1]), event_type=r[2], key=r[3], version=int(r[4]), writer=r[5],
                             created_at=float(r[6])) for r in rows]
