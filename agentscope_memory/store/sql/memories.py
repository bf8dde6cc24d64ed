"""A tenant's memories and what they hold: lists, key/values, idempotency records.

Appends are O(1) in the list length: each list has a head row holding its next sequence number
and its length, and items are rows keyed by (tenant, memory, list, seq).
"""

from __future__ import annotations

import json
import time
from typing import Any, Sequence

from agentscope_memory.errors import AlreadyExistsError
from agentscope_memory.store.base import KvEntry, MemoryRecord, RequestRecord, Row
from agentscope_memory.store.sql.base import Connection, SqlTxBase
from agentscope_memory.store.sql.dialect import Dialect

# Idempotency records are kept this long; a client retrying later than this is not a retry.
REQUEST_TTL_S = 24 * 3600

# `LIMIT ?` with this reads everything (both databases accept a 64-bit limit).
_NO_LIMIT = 2**63 - 1

_MEMORY_COLUMNS = "memory_id, kind, config_json, labels_json, create_time, update_time, version"
_GET_MEMORY = f"SELECT {_MEMORY_COLUMNS} FROM {{memories}} WHERE tenant = ? AND memory_id = ?"
_GET_MEMORY_LOCKED = _GET_MEMORY + "{row_lock}"

# The tables whose rows belong to one memory, deleted with it.
_MEMORY_TABLES = ("memories", "list_heads", "items", "kv", "requests", "tiered_items")


class MemoryStatements(SqlTxBase):
    def __init__(self, conn: Connection, dialect: Dialect, tenant: str, write: bool) -> None:
        super().__init__(conn, dialect, tenant, write)
        # Whether reading a memory locks its row (writes, where the database needs row locks).
        self._lock_reads = write and bool(dialect.row_lock)
        # Memories whose row this transaction has locked (or created): lock once, not per read.
        self._locked: set[str] = set()
        # List heads read or written in this transaction; saves re-reading them.
        self._heads: dict[tuple[str, str], tuple[int, int]] = {}
        # Memories this transaction created, changed (a version bump) or deleted.
        self._changed: set[str] = set()

    # -- memories ---------------------------------------------------------------------------

    def get_memory(self, memory_id: str) -> MemoryRecord | None:
        lock = self._lock_reads and memory_id not in self._locked
        row = self._one(_GET_MEMORY_LOCKED if lock else _GET_MEMORY, (self.tenant, memory_id))
        if row is None:
            return None
        if lock:
            self._locked.add(memory_id)
        return _memory_record(row)

    def insert_memory(self, record: MemoryRecord) -> None:
        # A savepoint keeps the transaction usable after a duplicate (PostgreSQL would abort it).
        self._execute("SAVEPOINT insert_memory")
        try:
            self._execute(
                f"INSERT INTO {{memories}} (tenant, {_MEMORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (self.tenant, record.memory_id, record.kind, record.config_json,
                 json.dumps(record.labels, ensure_ascii=False), record.create_time,
                 record.update_time, record.version),
            )
        except Exception as exc:
            if not self._dialect.is_unique_violation(exc):
                raise
            self._execute("ROLLBACK TO SAVEPOINT insert_memory")
            self._execute("RELEASE SAVEPOINT insert_memory")
            # Another replica created it between the caller's check and this insert.
            raise AlreadyExistsError(f"memory {record.memory_id!r} already exists") from None
        self._execute("RELEASE SAVEPOINT insert_memory")
        self._locked.add(record.memory_id)
        self._changed.add(record.memory_id)

    def touch_memory(self, memory_id: str) -> int:
        row = self._one(
            "UPDATE {memories} SET version = version + 1, update_time = ?"
            " WHERE tenant = ? AND memory_id = ? RETURNING version",
            (time.time(), self.tenant, memory_id),
        )
        if row is None:
            raise KeyError(memory_id)
        self._changed.add(memory_id)
        return int(row[0])

    def delete_memory(self, memory_id: str) -> None:
        for table in _MEMORY_TABLES:
            self._execute(
                f"DELETE FROM {{{table}}} WHERE tenant = ? AND memory_id = ?", (self.tenant, memory_id)
            )
        self._heads = {k: v for k, v in self._heads.items() if k[0] != memory_id}
        self._changed.add(memory_id)

    def changed_memories(self) -> set[str]:
        return set(self._changed)

    def list_memories(self, after_id: str, limit: int) -> list[MemoryRecord]:
        rows = self._all(
            f"SELECT {_MEMORY_COLUMNS} FROM {{memories}} WHERE tenant = ? AND memory_id{{bytewise}} > ?"
            " ORDER BY memory_id{bytewise} LIMIT ?",
            (self.tenant, after_id, limit),
        )
        return [_memory_record(r) for r in rows]

    # -- lists ------------------------------------------------------------------------------

    def _head(self, memory_id: str, list_name: str) -> tuple[int, int]:
        cached = self._heads.get((memory_id, list_name))
        if cached is not None:
            return cached
        row = self._one(
            "SELECT next_seq, length FROM {list_heads}"
            " WHERE tenant = ? AND memory_id = ? AND list_name = ?",
            (self.tenant, memory_id, list_name),
        )
        head = (int(row[0]), int(row[1])) if row else (1, 0)
        # Kept when no other transaction can change it before this one ends: a snapshot, SQLite's
        # one writer, or a locked memory row (every change here goes through `_set_head`).
        if not self._lock_reads or memory_id in self._locked:
            self._heads[(memory_id, list_name)] = head
        return head

    def _set_head(self, memory_id: str, list_name: str, next_seq: int, length: int) -> None:
        self._execute(
            "INSERT INTO {list_heads} (tenant, memory_id, list_name, next_seq, length)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, memory_id, list_name)"
            " DO UPDATE SET next_seq = excluded.next_seq, length = excluded.length",
            (self.tenant, memory_id, list_name, next_seq, length),
        )
        self._heads[(memory_id, list_name)] = (next_seq, length)

    def append(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None:
        if not items:
            return
        next_seq, length = self._head(memory_id, list_name)
        self._many(
            "INSERT INTO {items} (tenant, memory_id, list_name, seq, {item_columns})"
            " VALUES (?, ?, ?, ?, {item_values})",
            self._dialect.item_params(self.tenant, memory_id, list_name, next_seq, items),
        )
        self._set_head(memory_id, list_name, next_seq + len(items), length + len(items))

    def read(
        self, memory_id: str, list_name: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Row]:
        rows = self._all(
            "SELECT seq, {item_columns} FROM {items} WHERE tenant = ? AND memory_id = ?"
            " AND list_name = ? AND seq > ? ORDER BY seq LIMIT ?",
            (self.tenant, memory_id, list_name, after_seq, _NO_LIMIT if limit is None else limit),
        )
        return self._dialect.decode_rows(rows)

    def length(self, memory_id: str, list_name: str) -> int:
        return self._head(memory_id, list_name)[1]

    def next_seq(self, memory_id: str, list_name: str) -> int:
        return self._head(memory_id, list_name)[0]

    def delete_at(self, memory_id: str, list_name: str, index: int) -> bool:
        if index < 0:
            return False
        row = self._one(
            "DELETE FROM {items} WHERE tenant = ? AND memory_id = ? AND list_name = ? AND seq = ("
            " SELECT seq FROM {items} WHERE tenant = ? AND memory_id = ? AND list_name = ?"
            " ORDER BY seq LIMIT 1 OFFSET ?) RETURNING seq",
            (self.tenant, memory_id, list_name, self.tenant, memory_id, list_name, index),
        )
        if row is None:
            return False
        next_seq, length = self._head(memory_id, list_name)
        self._set_head(memory_id, list_name, next_seq, length - 1)
        return True

    def delete_seqs(self, memory_id: str, list_name: str, seqs: Sequence[int]) -> int:
        if not seqs:
            return 0
        deleted = 0
        for seq in seqs:
            row = self._one(
                "DELETE FROM {items} WHERE tenant = ? AND memory_id = ? AND list_name = ? AND seq = ? RETURNING seq",
                (self.tenant, memory_id, list_name, seq),
            )
            deleted += row is not None
        if deleted:
            next_seq, length = self._head(memory_id, list_name)
            self._set_head(memory_id, list_name, next_seq, length - deleted)
        return deleted

    def update_items(self, memory_id: str, list_name: str, items: Sequence[tuple[int, str | bytes]]) -> None:
        columns = ", ".join(f"{c} = ?" for c in self._dialect.item_columns)
        params = []
        for seq, item in items:
            # The dialect's insert parameters: (tenant, memory, list, seq, *columns).
            row = self._dialect.item_params(self.tenant, memory_id, list_name, seq, [item])[0]
            params.append((*row[4:], self.tenant, memory_id, list_name, seq))
        if params:
            self._many(
                f"UPDATE {{items}} SET {columns} WHERE tenant = ? AND memory_id = ? AND list_name = ? AND seq = ?",
                params,
            )

    def clear(self, memory_id: str, list_name: str) -> None:
        self._execute(
            "DELETE FROM {items} WHERE tenant = ? AND memory_id = ? AND list_name = ?",
            (self.tenant, memory_id, list_name),
        )
        next_seq, _ = self._head(memory_id, list_name)
        self._set_head(memory_id, list_name, next_seq, 0)

    def replace(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None:
        self.clear(memory_id, list_name)
        self.append(memory_id, list_name, items)

    # -- key/value --------------------------------------------------------------------------

    def kv_get(self, memory_id: str, key: str) -> str | None:
        row = self._one(
            "SELECT value FROM {kv} WHERE tenant = ? AND memory_id = ? AND key = ?",
            (self.tenant, memory_id, key),
        )
        return row[0] if row else None

    def kv_put(self, memory_id: str, key: str, value: str) -> None:
        self._execute(
            "INSERT INTO {kv} (tenant, memory_id, key, value) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (tenant, memory_id, key) DO UPDATE SET value = excluded.value",
            (self.tenant, memory_id, key, value),
        )

    def kv_delete(self, memory_id: str, key: str) -> None:
        self._execute(
            "DELETE FROM {kv} WHERE tenant = ? AND memory_id = ? AND key = ?",
            (self.tenant, memory_id, key),
        )

    def kv_keys(self, memory_id: str, prefix: str = "") -> list[str]:
        # A prefix compared with `substr`, not LIKE: keys may hold `%` and `_`, and PostgreSQL's
        # range comparisons follow the database's collation.
        rows = self._all(
            "SELECT key FROM {kv} WHERE tenant = ? AND memory_id = ? AND substr(key, 1, ?) = ?"
            " ORDER BY key{bytewise}",
            (self.tenant, memory_id, len(prefix), prefix),
        )
        return [r[0] for r in rows]

    def kv_scan(self, prefix: str) -> list[KvEntry]:
        rows = self._all(
            "SELECT tenant, memory_id, key, value FROM {kv} WHERE substr(key, 1, ?) = ?"
            " ORDER BY tenant{bytewise}, memory_id{bytewise}, key{bytewise}",
            (len(prefix), prefix),
        )
        return [KvEntry(*row) for row in rows]

    # -- idempotency ------------------------------------------------------------------------

    def request_get(self, memory_id: str, request_id: str) -> RequestRecord | None:
        row = self._one(
            "SELECT fingerprint, result_json FROM {requests}"
            " WHERE tenant = ? AND memory_id = ? AND request_id = ? AND created > ?",
            (self.tenant, memory_id, request_id, time.time() - REQUEST_TTL_S),
        )
        return RequestRecord(row[0], row[1]) if row else None

    def request_put(self, memory_id: str, request_id: str, record: RequestRecord) -> None:
        self._execute(
            "INSERT INTO {requests} (tenant, memory_id, request_id, fingerprint, result_json, created)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, memory_id, request_id) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, result_json = excluded.result_json,"
            " created = excluded.created",
            (self.tenant, memory_id, request_id, record.fingerprint, record.result_json, time.time()),
        )

    def prune_requests(self) -> None:
        """Cross-tenant: forget idempotency records older than the TTL (store housekeeping)."""
        self._execute("DELETE FROM {requests} WHERE created < ?", (time.time() - REQUEST_TTL_S,))


def _memory_record(row: Sequence[Any]) -> MemoryRecord:
    memory_id, kind, config_json, labels_json, create_time, update_time, version = row
    return MemoryRecord(
        memory_id=memory_id,
        kind=kind,
        config_json=config_json,
        # Most memories have no labels: "{}" is read on every add, so it skips the parser.
        labels={} if labels_json == "{}" else json.loads(labels_json),
        create_time=float(create_time),
        update_time=float(update_time),
        version=int(version),
    )
