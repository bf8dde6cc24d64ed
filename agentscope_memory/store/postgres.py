"""PostgreSQL backend: several server replicas share one database, any replica serves any memory.

Each `run` is one transaction on a pooled connection, executed on a worker thread. Write
transactions lock the memory's row (`SELECT ... FOR UPDATE`) the first time they read it, so
writes to one memory are serialised across replicas and never lost; different memories proceed
in parallel. Read transactions are REPEATABLE READ snapshots. Appends are O(1): a head row per
list holds the next sequence number and the length.
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool

from agentscope_memory.errors import AlreadyExistsError
from agentscope_memory.store.base import MemoryRecord, RequestRecord, Row

T = TypeVar("T")

REQUEST_TTL_S = 24 * 3600

_SCHEMA = """
CREATE TABLE IF NOT EXISTS asm_memories (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    config_json TEXT NOT NULL,
    labels_json TEXT NOT NULL,
    create_time DOUBLE PRECISION NOT NULL,
    update_time DOUBLE PRECISION NOT NULL,
    version BIGINT NOT NULL,
    PRIMARY KEY (tenant, memory_id)
);
CREATE TABLE IF NOT EXISTS asm_list_heads (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    list_name TEXT NOT NULL,
    next_seq BIGINT NOT NULL,
    length BIGINT NOT NULL,
    PRIMARY KEY (tenant, memory_id, list_name)
);
CREATE TABLE IF NOT EXISTS asm_items (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    list_name TEXT NOT NULL,
    seq BIGINT NOT NULL,
    is_text BOOLEAN NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (tenant, memory_id, list_name, seq)
);
CREATE TABLE IF NOT EXISTS asm_kv (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id, key)
);
CREATE TABLE IF NOT EXISTS asm_requests (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result_json TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, memory_id, request_id)
);
CREATE INDEX IF NOT EXISTS asm_requests_by_age ON asm_requests (created);
"""


def _encode(item: str | bytes) -> tuple[bool, bytes]:
    return (True, item.encode("utf-8")) if isinstance(item, str) else (False, bytes(item))


def _decode(is_text: bool, data: bytes) -> str | bytes:
    data = bytes(data)
    return data.decode("utf-8") if is_text else data


class PostgresTx:
    def __init__(self, conn: psycopg.Connection, tenant: str, write: bool) -> None:
        self._conn = conn
        self.tenant = tenant
        self._write = write
        self._locked: set[str] = set()
        self._heads: dict[tuple[str, str], tuple[int, int]] = {}

    def _one(self, sql: str, params: tuple) -> tuple | None:
        return self._conn.execute(sql, params).fetchone()

    # -- memories ---------------------------------------------------------------------------

    def get_memory(self, memory_id: str) -> MemoryRecord | None:
        lock = " FOR UPDATE" if self._write and memory_id not in self._locked else ""
        row = self._one(
            "SELECT memory_id, kind, config_json, labels_json, create_time, update_time, version"
            f" FROM asm_memories WHERE tenant = %s AND memory_id = %s{lock}",
            (self.tenant, memory_id),
        )
        if row is None:
            return None
        if lock:
            self._locked.add(memory_id)
        return _record(row)

    def insert_memory(self, record: MemoryRecord) -> None:
        try:
            with self._conn.transaction():
                self._conn.execute(
                    "INSERT INTO asm_memories VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (self.tenant, record.memory_id, record.kind, record.config_json,
                     json.dumps(record.labels, ensure_ascii=False), record.create_time,
                     record.update_time, record.version),
                )
        except pg_errors.UniqueViolation:
            # Another replica created it between our check and our insert.
            raise AlreadyExistsError(f"memory {record.memory_id!r} already exists") from None
        self._locked.add(record.memory_id)

    def touch_memory(self, memory_id: str) -> int:
        row = self._one(
            "UPDATE asm_memories SET version = version + 1, update_time = %s"
            " WHERE tenant = %s AND memory_id = %s RETURNING version",
            (time.time(), self.tenant, memory_id),
        )
        if row is None:
            raise KeyError(memory_id)
        return int(row[0])

    def delete_memory(self, memory_id: str) -> None:
        for table in ("asm_memories", "asm_list_heads", "asm_items", "asm_kv", "asm_requests"):
            self._conn.execute(
                f"DELETE FROM {table} WHERE tenant = %s AND memory_id = %s", (self.tenant, memory_id)
            )
        self._heads = {k: v for k, v in self._heads.items() if k[0] != memory_id}

    def list_memories(self, after_id: str, limit: int) -> list[MemoryRecord]:
        rows = self._conn.execute(
            "SELECT memory_id, kind, config_json, labels_json, create_time, update_time, version"
            " FROM asm_memories WHERE tenant = %s AND memory_id > %s ORDER BY memory_id LIMIT %s",
            (self.tenant, after_id, limit),
        ).fetchall()
        return [_record(r) for r in rows]

    # -- lists ------------------------------------------------------------------------------

    def _head(self, memory_id: str, list_name: str) -> tuple[int, int]:
        cached = self._heads.get((memory_id, list_name))
        if cached is not None:
            return cached
        row = self._one(
            "SELECT next_seq, length FROM asm_list_heads"
            " WHERE tenant = %s AND memory_id = %s AND list_name = %s",
            (self.tenant, memory_id, list_name),
        )
        return (int(row[0]), int(row[1])) if row else (1, 0)

    def _set_head(self, memory_id: str, list_name: str, next_seq: int, length: int) -> None:
        self._conn.execute(
            "INSERT INTO asm_list_heads VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant, memory_id, list_name)"
            " DO UPDATE SET next_seq = excluded.next_seq, length = excluded.length",
            (self.tenant, memory_id, list_name, next_seq, length),
        )
        self._heads[(memory_id, list_name)] = (next_seq, length)

    def append(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None:
        if not items:
            return
        next_seq, length = self._head(memory_id, list_name)
        with self._conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO asm_items VALUES (%s, %s, %s, %s, %s, %s)",
                [(self.tenant, memory_id, list_name, next_seq + i, *_encode(item))
                 for i, item in enumerate(items)],
            )
        self._set_head(memory_id, list_name, next_seq + len(items), length + len(items))

    def read(
        self, memory_id: str, list_name: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Row]:
        rows = self._conn.execute(
            "SELECT seq, is_text, data FROM asm_items WHERE tenant = %s AND memory_id = %s"
            " AND list_name = %s AND seq > %s ORDER BY seq LIMIT %s",
            (self.tenant, memory_id, list_name, after_seq, limit),
        ).fetchall()
        return [Row(int(seq), _decode(is_text, data)) for seq, is_text, data in rows]

    def length(self, memory_id: str, list_name: str) -> int:
        return self._head(memory_id, list_name)[1]

    def delete_at(self, memory_id: str, list_name: str, index: int) -> bool:
        if index < 0:
            return False
        row = self._one(
            "DELETE FROM asm_items WHERE (tenant, memory_id, list_name, seq) = ("
            " SELECT tenant, memory_id, list_name, seq FROM asm_items"
            " WHERE tenant = %s AND memory_id = %s AND list_name = %s ORDER BY seq LIMIT 1 OFFSET %s"
            ") RETURNING seq",
            (self.tenant, memory_id, list_name, index),
        )
        if row is None:
            return False
        next_seq, length = self._head(memory_id, list_name)
        self._set_head(memory_id, list_name, next_seq, length - 1)
        return True

    def clear(self, memory_id: str, list_name: str) -> None:
        self._conn.execute(
            "DELETE FROM asm_items WHERE tenant = %s AND memory_id = %s AND list_name = %s",
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
            "SELECT value FROM asm_kv WHERE tenant = %s AND memory_id = %s AND key = %s",
            (self.tenant, memory_id, key),
        )
        return row[0] if row else None

    def kv_put(self, memory_id: str, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO asm_kv VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (tenant, memory_id, key) DO UPDATE SET value = excluded.value",
            (self.tenant, memory_id, key, value),
        )

    def kv_delete(self, memory_id: str, key: str) -> None:
        self._conn.execute(
            "DELETE FROM asm_kv WHERE tenant = %s AND memory_id = %s AND key = %s",
            (self.tenant, memory_id, key),
        )

    def kv_keys(self, memory_id: str, prefix: str = "") -> list[str]:
        rows = self._conn.execute(
            "SELECT key FROM asm_kv WHERE tenant = %s AND memory_id = %s"
            " AND left(key, %s) = %s ORDER BY key",
            (self.tenant, memory_id, len(prefix), prefix),
        ).fetchall()
        return [r[0] for r in rows]

    # -- idempotency ------------------------------------------------------------------------

    def request_get(self, memory_id: str, request_id: str) -> RequestRecord | None:
        row = self._one(
            "SELECT fingerprint, result_json FROM asm_requests"
            " WHERE tenant = %s AND memory_id = %s AND request_id = %s AND created > %s",
            (self.tenant, memory_id, request_id, time.time() - REQUEST_TTL_S),
        )
        return RequestRecord(row[0], row[1]) if row else None

    def request_put(self, memory_id: str, request_id: str, record: RequestRecord) -> None:
        self._conn.execute(
            "INSERT INTO asm_requests VALUES (%s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant, memory_id, request_id) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, result_json = excluded.result_json,"
            " created = excluded.created",
            (self.tenant, memory_id, request_id, record.fingerprint, record.result_json, time.time()),
        )


def _record(row: tuple) -> MemoryRecord:
    memory_id, kind, config_json, labels_json, create_time, update_time, version = row
    return MemoryRecord(memory_id, kind, config_json, json.loads(labels_json),
                        float(create_time), float(update_time), int(version))


class PostgresStore:
    """Shared, durable storage for several replicas."""

    def __init__(self, dsn: str, *, pool_size: int = 8) -> None:
        self._pool = ConnectionPool(dsn, min_size=1, max_size=pool_size, open=True,
                                    kwargs={"autocommit": True})
        self._executor = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="postgres")
        self._closed = False
        with self._pool.connection() as conn:
            # Serialise schema creation between replicas starting at the same time.
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(727372)")
                conn.execute(_SCHEMA)

    def _in_transaction(self, tenant: str, fn: Callable[[PostgresTx], T], write: bool) -> T:
        with self._pool.connection() as conn:
            isolation = "READ COMMITTED" if write else "REPEATABLE READ, READ ONLY"
            with conn.transaction():
                conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}")
                return fn(PostgresTx(conn, tenant, write))

    async def run(
        self, tenant: str, fn: Callable[[PostgresTx], T], *, write: bool = True, small: bool = False
    ) -> T:
        if self._closed:
            raise RuntimeError("store is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._in_transaction, tenant, fn, write)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._executor.shutdown)
        await loop.run_in_executor(None, self._pool.close)
