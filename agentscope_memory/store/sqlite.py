"""SQLite backend: one file under the data dir, WAL, one writer thread, reader threads.

Durability: every `run(write=True)` is one transaction committed before the call returns. In WAL
mode with `synchronous=NORMAL` a committed transaction survives the process being killed at any
moment (it is in the WAL, handed to the OS); `FULL` also survives power loss at the cost of an
fsync per commit.

Appends are O(1) in the list length: each list has a head row holding its next sequence number
and its length, and items are rows keyed by (tenant, memory, list, seq).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from agentscope_memory.store.base import MemoryRecord, RequestRecord, Row

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    config_json TEXT NOT NULL,
    labels_json TEXT NOT NULL,
    create_time REAL NOT NULL,
    update_time REAL NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (tenant, memory_id)
);
CREATE TABLE IF NOT EXISTS list_heads (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    list_name TEXT NOT NULL,
    next_seq INTEGER NOT NULL,
    length INTEGER NOT NULL,
    PRIMARY KEY (tenant, memory_id, list_name)
);
CREATE TABLE IF NOT EXISTS items (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    list_name TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS items_by_position ON items (tenant, memory_id, list_name, seq);
CREATE TABLE IF NOT EXISTS kv (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id, key)
);
CREATE TABLE IF NOT EXISTS requests (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result_json TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (tenant, memory_id, request_id)
);
CREATE INDEX IF NOT EXISTS requests_by_age ON requests (created);
"""

# Idempotency records are kept this long; a client retrying later than this is not a retry.
REQUEST_TTL_S = 24 * 3600
_PRUNE_EVERY = 1000


class SqliteTx:
    """A tenant's view inside one SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection, tenant: str) -> None:
        self._conn = conn
        self.tenant = tenant
        # List heads read or written in this transaction; saves re-reading them.
        self._heads: dict[tuple[str, str], tuple[int, int]] = {}

    # -- memories ---------------------------------------------------------------------------

    def get_memory(self, memory_id: str) -> MemoryRecord | None:
        row = self._conn.execute(
            "SELECT memory_id, kind, config_json, labels_json, create_time, update_time, version"
            " FROM memories WHERE tenant = ? AND memory_id = ?",
            (self.tenant, memory_id),
        ).fetchone()
        return _record(row) if row else None

    def insert_memory(self, record: MemoryRecord) -> None:
        self._conn.execute(
            "INSERT INTO memories VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.tenant,
                record.memory_id,
                record.kind,
                record.config_json,
                json.dumps(record.labels, ensure_ascii=False),
                record.create_time,
                record.update_time,
                record.version,
            ),
        )

    def touch_memory(self, memory_id: str) -> int:
        row = self._conn.execute(
            "UPDATE memories SET version = version + 1, update_time = ?"
            " WHERE tenant = ? AND memory_id = ? RETURNING version",
            (time.time(), self.tenant, memory_id),
        ).fetchone()
        if row is None:
            raise KeyError(memory_id)
        return int(row[0])

    def delete_memory(self, memory_id: str) -> None:
        key = (self.tenant, memory_id)
        self._heads = {k: v for k, v in self._heads.items() if k[0] != memory_id}
        for table in ("memories", "list_heads", "items", "kv", "requests"):
            self._conn.execute(f"DELETE FROM {table} WHERE tenant = ? AND memory_id = ?", key)

    def list_memories(self, after_id: str, limit: int) -> list[MemoryRecord]:
        rows = self._conn.execute(
            "SELECT memory_id, kind, config_json, labels_json, create_time, update_time, version"
            " FROM memories WHERE tenant = ? AND memory_id > ? ORDER BY memory_id LIMIT ?",
            (self.tenant, after_id, limit),
        ).fetchall()
        return [_record(r) for r in rows]

    # -- lists ------------------------------------------------------------------------------

    def _head(self, memory_id: str, list_name: str) -> tuple[int, int]:
        cached = self._heads.get((memory_id, list_name))
        if cached is not None:
            return cached
        row = self._conn.execute(
            "SELECT next_seq, length FROM list_heads"
            " WHERE tenant = ? AND memory_id = ? AND list_name = ?",
            (self.tenant, memory_id, list_name),
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else (1, 0)

    def _set_head(self, memory_id: str, list_name: str, next_seq: int, length: int) -> None:
        self._conn.execute(
            "INSERT INTO list_heads VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (tenant, memory_id, list_name)"
            " DO UPDATE SET next_seq = excluded.next_seq, length = excluded.length",
            (self.tenant, memory_id, list_name, next_seq, length),
        )
        self._heads[(memory_id, list_name)] = (next_seq, length)

    def append(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None:
        if not items:
            return
        next_seq, length = self._head(memory_id, list_name)
        self._conn.executemany(
            "INSERT INTO items VALUES (?, ?, ?, ?, ?)",
            [
                (self.tenant, memory_id, list_name, next_seq + i, data)
                for i, data in enumerate(items)
            ],
        )
        self._set_head(memory_id, list_name, next_seq + len(items), length + len(items))

    def read(
        self, memory_id: str, list_name: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Row]:
        rows = self._conn.execute(
            "SELECT seq, data FROM items WHERE tenant = ? AND memory_id = ? AND list_name = ?"
            " AND seq > ? ORDER BY seq LIMIT ?",
            (self.tenant, memory_id, list_name, after_seq, -1 if limit is None else limit),
        ).fetchall()
        return [Row(int(seq), data) for seq, data in rows]

    def length(self, memory_id: str, list_name: str) -> int:
        return self._head(memory_id, list_name)[1]

    def delete_at(self, memory_id: str, list_name: str, index: int) -> bool:
        if index < 0:
            return False
        row = self._conn.execute(
            "SELECT rowid FROM items WHERE tenant = ? AND memory_id = ? AND list_name = ?"
            " ORDER BY seq LIMIT 1 OFFSET ?",
            (self.tenant, memory_id, list_name, index),
        ).fetchone()
        if row is None:
            return False
        self._conn.execute("DELETE FROM items WHERE rowid = ?", (row[0],))
        next_seq, length = self._head(memory_id, list_name)
        self._set_head(memory_id, list_name, next_seq, length - 1)
        return True

    def clear(self, memory_id: str, list_name: str) -> None:
        self._conn.execute(
            "DELETE FROM items WHERE tenant = ? AND memory_id = ? AND list_name = ?",
            (self.tenant, memory_id, list_name),
        )
        next_seq, _ = self._head(memory_id, list_name)
        self._set_head(memory_id, list_name, next_seq, 0)

    def replace(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None:
        self.clear(memory_id, list_name)
        self.append(memory_id, list_name, items)

    # -- key/value --------------------------------------------------------------------------

    def kv_get(self, memory_id: str, key: str) -> str | None:
        row = self._conn.execute(
            "SELECT value FROM kv WHERE tenant = ? AND memory_id = ? AND key = ?",
            (self.tenant, memory_id, key),
        ).fetchone()
        return row[0] if row else None

    def kv_put(self, memory_id: str, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO kv VALUES (?, ?, ?, ?)"
            " ON CONFLICT (tenant, memory_id, key) DO UPDATE SET value = excluded.value",
            (self.tenant, memory_id, key, value),
        )

    def kv_delete(self, memory_id: str, key: str) -> None:
        self._conn.execute(
            "DELETE FROM kv WHERE tenant = ? AND memory_id = ? AND key = ?",
            (self.tenant, memory_id, key),
        )

    def kv_keys(self, memory_id: str, prefix: str = "") -> list[str]:
        rows = self._conn.execute(
            "SELECT key FROM kv WHERE tenant = ? AND memory_id = ? AND substr(key, 1, ?) = ?"
            " ORDER BY key",
            (self.tenant, memory_id, len(prefix), prefix),
        ).fetchall()
        return [r[0] for r in rows]

    # -- idempotency ------------------------------------------------------------------------

    def request_get(self, memory_id: str, request_id: str) -> RequestRecord | None:
        row = self._conn.execute(
            "SELECT fingerprint, result_json FROM requests"
            " WHERE tenant = ? AND memory_id = ? AND request_id = ? AND created > ?",
            (self.tenant, memory_id, request_id, time.time() - REQUEST_TTL_S),
        ).fetchone()
        return RequestRecord(row[0], row[1]) if row else None

    def request_put(self, memory_id: str, request_id: str, record: RequestRecord) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?, ?, ?)",
            (self.tenant, memory_id, request_id, record.fingerprint, record.result_json, time.time()),
        )


def _record(row: tuple) -> MemoryRecord:
    memory_id, kind, config_json, labels_json, create_time, update_time, version = row
    return MemoryRecord(
        memory_id=memory_id,
        kind=kind,
        config_json=config_json,
        labels=json.loads(labels_json),
        create_time=float(create_time),
        update_time=float(update_time),
        version=int(version),
    )


class SqliteStore:
    """The default, embedded store."""

    def __init__(self, path: Path, *, synchronous: str = "NORMAL", readers: int = 2) -> None:
        if synchronous.upper() not in ("NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"sqlite synchronous must be NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._synchronous = synchronous.upper()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        # One writer serialises every write transaction; readers see committed snapshots.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="sqlite-reader")
        self._write_lock: asyncio.Lock | None = None
        self._writes = 0
        self._closed = False
        # Create the schema now so a bad path fails at start-up, not on the first request.
        self._writer.submit(self._init_schema).result()

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute("PRAGMA foreign_keys=OFF")
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def _init_schema(self) -> None:
        self._connection().executescript(_SCHEMA)

    def _in_transaction(self, tenant: str, fn: Callable[[SqliteTx], T], write: bool) -> T:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            result = fn(SqliteTx(conn, tenant))
            if write:
                self._writes += 1
                if self._writes % _PRUNE_EVERY == 0:
                    conn.execute(
                        "DELETE FROM requests WHERE created < ?", (time.time() - REQUEST_TTL_S,)
                    )
            conn.execute("COMMIT")
            return result
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def run(
        self, tenant: str, fn: Callable[[SqliteTx], T], *, write: bool = True, small: bool = False
    ) -> T:
        if self._closed:
            raise RuntimeError("store is closed")
        # A small transaction (a few rows) costs less than the hop to a worker thread and back,
        # so it runs right here on the event loop. Writes take the lock either way, so a write on
        # the loop never waits on SQLite's own lock held by the writer thread.
        loop = asyncio.get_running_loop()
        if not write:
            if small:
                return self._in_transaction(tenant, fn, False)
            return await loop.run_in_executor(self._readers, self._in_transaction, tenant, fn, False)
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            if small:
                return self._in_transaction(tenant, fn, True)
            return await loop.run_in_executor(self._writer, self._in_transaction, tenant, fn, True)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        with self._connections_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
