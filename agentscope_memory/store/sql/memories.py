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


_MISSING = object()

MemoryKey = tuple[str, str]
HeadKey = tuple[str, str, str]


class BatchShare:
    """What the writes of one gathered batch (`store.group_commit`) share: the memory rows and
    list heads they read, and the version bumps and head moves they made, written once when the
    batch is about to commit rather than once per write. Adds to one memory arriving together
    then read its row and head once and write each once, not once per add.

    Only the embedded store's batches use it: they hold its one write lock from their first
    statement to their commit, so nothing else can change these rows meanwhile. Every change is
    journaled, so a write undone by its savepoint (`rollback_to`) is undone here too."""

    def __init__(self) -> None:
        self.records: dict[MemoryKey, MemoryRecord] = {}
        self.heads: dict[HeadKey, tuple[int, int]] = {}
        # Rows changed here and not yet written; the values are unused (dicts, to journal alike).
        self.dirty_memories: dict[MemoryKey, bool] = {}
        self.dirty_heads: dict[HeadKey, bool] = {}
        self._journal: list[tuple[dict[Any, Any], Any, Any]] = []

    def put(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        self._journal.append((table, key, table.get(key, _MISSING)))
        table[key] = value

    def drop(self, table: dict[Any, Any], key: Any) -> None:
        if key in table:
            self._journal.append((table, key, table.pop(key)))

    def mark(self) -> int:
        """A point to roll back to: taken before each write of the batch."""
        return len(self._journal)

    def rollback_to(self, mark: int) -> None:
        while len(self._journal) > mark:
            table, key, old = self._journal.pop()
            if old is _MISSING:
                table.pop(key, None)
            else:
                table[key] = old

    def forget(self, tenant: str, memory_id: str) -> None:
        """A memory deleted: nothing of it may be written back."""
        self.drop(self.records, (tenant, memory_id))
        self.drop(self.dirty_memories, (tenant, memory_id))
        for key in [k for k in self.heads if k[0] == tenant and k[1] == memory_id]:
            self.drop(self.heads, key)
            self.drop(self.dirty_heads, key)


class MemoryStatements(SqlTxBase):
    def __init__(self, conn: Connection, dialect: Dialect, tenant: str, write: bool,
                 share: BatchShare | None = None) -> None:
        super().__init__(conn, dialect, tenant, write)
        # Whether reading a memory locks its row (writes, where the database needs row locks).
        self._lock_reads = write and bool(dialect.row_lock)
        # Memories whose row this transaction has locked (or created): lock once, not per read.
        self._locked: set[str] = set()
        # List heads read or written in this transaction; saves re-reading them.
        self._heads: dict[tuple[str, str], tuple[int, int]] = {}
        # Memories this transaction created, changed (a version bump) or deleted.
        self._changed: set[str] = set()
        self._share = share

    # -- memories ---------------------------------------------------------------------------

    def get_memory(self, memory_id: str) -> MemoryRecord | None:
        share = self._share
        if share is not None:
            known = share.records.get((self.tenant, memory_id))
            if known is not None:
                return known
        lock = self._lock_reads and memory_id not in self._locked
        row = self._one(_GET_MEMORY_LOCKED if lock else _GET_MEMORY, (self.tenant, memory_id))
        if row is None:
            return None
        if lock:
            self._locked.add(memory_id)
        record = _memory_record(row)
        if share is not None:
            share.put(share.records, (self.tenant, memory_id), record)
        return record

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
        share = self._share
        if share is not None:
            key = (self.tenant, memory_id)
            known = share.records.get(key)
            if known is not None:
                version = known.version + 1
                share.put(share.records, key, MemoryRecord(
                    known.memory_id, known.kind, known.config_json, known.labels, known.create_time,
                    time.time(), version))
                share.put(share.dirty_memories, key, True)
                self._changed.add(memory_id)
                return version
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
        if self._share is not None:
            self._share.forget(self.tenant, memory_id)
        for table in _MEMORY_TABLES:
            self._execute(
                f"DELETE FROM {{{table}}} WHERE tenant = ? AND memory_id = ?", (self.tenant, memory_id)
            )
        self._heads = {k: v for k, v in self._heads.items() if k[0] != memory_id}
        self._changed.add(memory_id)

    def changed_memories(self) -> set[str]:
        return set(self._changed)

    def list_memories(self, after_id: str, limit: int) -> list[MemoryRecord]:
        if self._share is not None:
            self.write_back()
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
        share = self._share
        if share is not None:
            shared = share.heads.get((self.tenant, memory_id, list_name))
            if shared is not None:
                self._heads[(memory_id, list_name)] = shared
                return shared
        row = self._one(
            "SELECT next_seq, length FROM {list_heads}"
            " WHERE tenant = ? AND memory_id = ? AND list_name = ?",
            (self.tenant, memory_id, list_name),
        )
        head = (int(row[0]), int(row[1])) if row else (1, 0)
        if share is not None:
            share.put(share.heads, (self.tenant, memory_id, list_name), head)
        # Kept when no other transaction can change it before this one ends: a snapshot, SQLite's
        # one writer, or a locked memory row (every change here goes through `_set_head`).
        if not self._lock_reads or memory_id in self._locked:
            self._heads[(memory_id, list_name)] = head
        return head

    def _set_head(self, memory_id: str, list_name: str, next_seq: int, length: int) -> None:
        share = self._share
        if share is not None:
            key = (self.tenant, memory_id, list_name)
            share.put(share.heads, key, (next_seq, length))
            share.put(share.dirty_heads, key, True)
            self._heads[(memory_id, list_name)] = (next_seq, length)
            return
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
        rows = self._dialect.item_params(self.tenant, memory_id, list_name, next_seq, items)
        sql = "INSERT INTO {items} (tenant, memory_id, list_name, seq, {item_columns}) VALUES (?, ?, ?, ?, {item_values})"
        # One item (an agent's add) needs no cursor of its own.
        if len(rows) == 1:
            self._execute(sql, rows[0])
        else:
            self._many(sql, rows)
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

    def write_back(self) -> None:
        """Write what the batch's writes changed and kept (`BatchShare`): every tenant's, since
        one batch holds writes of many. Runs before the batch commits, and before any statement
        that reads those rows past the share."""
        share = self._share
        if share is None:
            return
        if share.dirty_memories:
            self._many(
                "UPDATE {memories} SET version = ?, update_time = ? WHERE tenant = ? AND memory_id = ?",
                [(r.version, r.update_time, key[0], key[1])
                 for key in share.dirty_memories for r in (share.records[key],)],
            )
            # Journaled, as everything here: a write undone after this statement undoes it too.
            for memory_key in list(share.dirty_memories):
                share.drop(share.dirty_memories, memory_key)
        if share.dirty_heads:
            self._many(
                "INSERT INTO {list_heads} (tenant, memory_id, list_name, next_seq, length)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, memory_id, list_name)"
                " DO UPDATE SET next_seq = excluded.next_seq, length = excluded.length",
                [(*head_key, *share.heads[head_key]) for head_key in share.dirty_heads],
            )
            for head_key in list(share.dirty_heads):
                share.drop(share.dirty_heads, head_key)

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

    def kv_array_lengths(self, memory_id: str, prefix: str, after_key: str, limit: int) -> list[tuple[str, int]]:
        rows = self._all(
            "SELECT key, {value_array_length} FROM {kv} WHERE tenant = ? AND memory_id = ? AND substr(key, 1, ?) = ?"
            " AND key{bytewise} > ? ORDER BY key{bytewise} LIMIT ?",
            (self.tenant, memory_id, len(prefix), prefix, after_key, limit),
        )
        return [(r[0], int(r[1])) for r in rows]

    def kv_count(self, memory_id: str, prefix: str = "") -> int:
        row = self._one(
            "SELECT COUNT(*) FROM {kv} WHERE tenant = ? AND memory_id = ? AND substr(key, 1, ?) = ?",
            (self.tenant, memory_id, len(prefix), prefix),
        )
        return int(row[0])

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
