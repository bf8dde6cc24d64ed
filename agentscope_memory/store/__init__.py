"""Durable backends behind one protocol: sqlite (default), postgres (several replicas), memory
(tests, throwaway use). All three run the same SQL (`store/sql/`)."""

from __future__ import annotations

from pathlib import Path

from agentscope_memory.store.base import (
    NO_TENANT,
    JobRecord,
    KvEntry,
    MemoryRecord,
    RequestRecord,
    Row,
    Store,
    Tx,
)

__all__ = [
    "NO_TENANT",
    "JobRecord",
    "KvEntry",
    "MemoryRecord",
    "RequestRecord",
    "Row",
    "Store",
    "Tx",
    "SQLITE_FILE_NAME",
    "open_store",
]

# The sqlite store's file in its data dir.
SQLITE_FILE_NAME = "agentscope-memory.sqlite3"


def open_store(
    kind: str, data_dir: Path, *, sqlite_synchronous: str = "NORMAL", postgres_dsn: str | None = None
) -> Store:
    """Open the configured backend: `sqlite`, `postgres` (needs `postgres_dsn`) or `memory`."""
    if kind == "sqlite":
        from agentscope_memory.store.sqlite import SqliteStore

        return SqliteStore(Path(data_dir) / SQLITE_FILE_NAME, synchronous=sqlite_synchronous)
    if kind == "postgres":
        if not postgres_dsn:
            raise ValueError("the postgres store needs a DSN (postgres_dsn)")
        from agentscope_memory.store.postgres import PostgresStore

        return PostgresStore(postgres_dsn)
    if kind == "memory":
        from agentscope_memory.store.in_process import InProcessStore

        return InProcessStore()
    raise ValueError(f"unknown store {kind!r} (sqlite, postgres or memory)")
