"""PostgreSQL backend: several server replicas share one database, any replica serves any memory.

Each `run` is one transaction on a pooled connection, executed on a worker thread. Write
transactions are READ COMMITTED and lock the memory's row (`SELECT ... FOR UPDATE`) the first
time they read it, so writes to one memory are serialised across replicas and never lost;
different memories proceed in parallel. Read transactions are REPEATABLE READ snapshots.

The statements are the shared SQL layer's (`store/sql/`); this module holds the pool, threads,
transactions and the schema.

A database that cannot be reached (down, restarting, network gone) fails the call with
`UnavailableError` (gRPC UNAVAILABLE, which clients may retry) within `CONNECTION_WAIT_S`,
never with an internal error or a hang past the caller's deadline; the transaction it was in is
rolled back by PostgreSQL, so nothing is half-written. Connections the pool kept from before a
restart are dead: a transaction that fails on one before any of its statements ran is begun
again on another, so a restart the server slept through costs no call.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from agentscope_memory.errors import AbortedError, FailedPreconditionError, ResourceExhaustedError, UnavailableError
from agentscope_memory.store.base import Row, StoreOpenError
from agentscope_memory.store.sql import REQUEST_TTL_S, SHARED_SCHEMA, Dialect, SqlTx
from agentscope_memory.store.sql.schema import check_schema_version
from agentscope_memory.tracing import current_tracer, span

T = TypeVar("T")

log = logging.getLogger("agentscope_memory.store.postgres")

# Idempotency records older than their TTL are deleted after every this many write transactions
# of a replica, at most this many at a time, skipping rows another replica is deleting (as the
# sqlite store does every 1000 writes; without it every request id stayed for ever).
PRUNE_EVERY = 1000
PRUNE_ROWS = 10_000

# How long a transaction waits for a pooled connection. Under the clients' 30 s default deadline,
# so that an unreachable database is answered UNAVAILABLE (with this reason) rather than letting
# the call run out of time.
CONNECTION_WAIT_S = 10.0
# How long the pool keeps retrying a failed connection attempt (after 0, 1, 3, 7 and 10 s) before
# it gives up; the next transaction then starts a fresh series at once. As long as one wait, so a
# waiting transaction sees attempts until it gives up; psycopg_pool's default, 300 s, let the
# backoff grow to minutes, and a database back after an outage stayed unused that long.
RECONNECT_S = CONNECTION_WAIT_S
# Waits for the database at startup before giving up: a replica started together with its
# database waits 30 s for it, as it always did.
STARTUP_WAITS = 3

# How long a write waits for a row another transaction holds (as long as the sqlite store waits
# for its file's lock; twice that when it first queued behind another writer of the row, a wait
# of its own): then it answers UNAVAILABLE. Without a limit, a transaction left open by
# a replica that froze (paused, cut off) held the memory's writers until PostgreSQL noticed,
# hours later, each holding one of the few connections, and soon no call of any memory was served.
LOCK_WAIT_S = 10
# How long PostgreSQL keeps a transaction its client left idle: such a replica's locks go then.
# Our transactions never wait on anything but the database between two statements.
IDLE_IN_TRANSACTION_S = 60

# libpq's own defaults wait for a dead network path as long as the operating system does: a
# connection attempt to an address that drops packets hangs psycopg's 130 s (occupying one of
# the pool's few workers, so a database back after an outage stayed unused that long), and a
# pooled connection whose peer vanished is noticed after two hours of idle keepalive. So: an
# attempt gives up after 10 s (the pool tries again), an idle connection is probed after 30 s
# and dropped after three unanswered probes 10 s apart, and one whose sent data goes
# unacknowledged for 60 s is dropped. A value the DSN (or PGCONNECT_TIMEOUT) sets wins.
CONNECTION_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}


def with_connection_defaults(dsn: str) -> str:
    """`dsn` with `CONNECTION_DEFAULTS` for what it does not set itself."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return dsn  # malformed: the connection attempt reports it, as it always did
    missing = {k: v for k, v in CONNECTION_DEFAULTS.items() if k not in given}
    if os.environ.get("PGCONNECT_TIMEOUT"):
        missing.pop("connect_timeout", None)
    return make_conninfo(dsn, **missing) if missing else dsn


# The first tables, as every existing database has them. Tables added later are in
# `sql/schema.py`, shared with SQLite.
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

# The lists that page by a text key over what can grow large (a tenant's memories, a pool's
# entries) compare it bytewise (`Dialect.bytewise`); an index in the database's collation does
# not serve that order, so these do.
_BYTEWISE_INDEXES = """
CREATE INDEX IF NOT EXISTS asm_memories_bytewise ON asm_memories (tenant, memory_id COLLATE "C");
CREATE INDEX IF NOT EXISTS asm_pool_entries_bytewise ON asm_pool_entries (tenant, pool_id, entry_key COLLATE "C");
"""


# The tables and indexes a schema script creates.
_CREATED = re.compile(r"CREATE (?:TABLE|INDEX) IF NOT EXISTS (\w+)", re.IGNORECASE)


def postgres_dialect() -> Dialect:
    # A list item is text (JSON) or bytes (a serialized Msg); one BYTEA column holds either,
    # and `is_text` says which to give back.
    def columns(item: str | bytes) -> tuple[bool, bytes]:
        return (True, item.encode("utf-8")) if isinstance(item, str) else (False, bytes(item))

    def encode(
        tenant: str, memory_id: str, list_name: str, first_seq: int, items: Sequence[str | bytes]
    ) -> list[tuple[Any, ...]]:
        return [(tenant, memory_id, list_name, first_seq + i, *columns(item))
                for i, item in enumerate(items)]

    def decode(rows: list[Sequence[Any]]) -> list[Row]:
        return [Row(seq, bytes(data).decode("utf-8") if is_text else bytes(data))
                for seq, is_text, data in rows]

    return Dialect(
        name="postgres",
        table_prefix="asm_",
        placeholder="%s",
        item_columns=("is_text", "data"),
        item_params=encode,
        decode_rows=decode,
        row_lock=" FOR UPDATE",
        claim_lock=" FOR UPDATE SKIP LOCKED",
        bytewise=' COLLATE "C"',
        value_array_length="json_array_length(value::json)",
        is_unique_violation=lambda exc: isinstance(exc, pg_errors.UniqueViolation),
    )


class PostgresStore:
    """Shared, durable storage for several replicas."""

    def __init__(self, dsn: str, *, pool_size: int = 8) -> None:
        self._dialect = postgres_dialect()
        self._pool_size = pool_size
        self._pool = ConnectionPool(with_connection_defaults(dsn), min_size=1, max_size=pool_size, open=True, timeout=CONNECTION_WAIT_S,
                                    reconnect_timeout=RECONNECT_S,
                                    # Python's text goes over as UTF-8 whatever PGCLIENTENCODING says
                                    # (LATIN1 there made every Chinese id an internal error).
                                    kwargs={"autocommit": True, "client_encoding": "UTF8"},
                                    configure=_configure)
        self._executor = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="postgres")
        self._closed = False
        self._writes = itertools.count(1)
        for wait in range(STARTUP_WAITS):
            try:
                self._create_schema()
                return
            except (PoolTimeout, psycopg.OperationalError) as exc:
                # A wait that ran out starts the pool's next series of attempts.
                if isinstance(exc, PoolTimeout) and wait + 1 < STARTUP_WAITS:
                    continue
                self._pool.close()
                self._executor.shutdown()
                raise _unavailable(exc) from exc
            except BaseException as exc:
                self._executor.shutdown()
                self._pool.close()
                if isinstance(exc, pg_errors.InsufficientPrivilege):
                    raise StoreOpenError(
                        f"PostgreSQL refused the server's database role making the asm_ tables ({first_line(exc)}):"
                        " start a server logging in as the database's owner once to make them; other roles need"
                        " SELECT, INSERT, UPDATE and DELETE on them") from exc
                raise

    def _create_schema(self) -> None:
        with self._pool.connection() as conn:
            # Serialise schema creation between replicas starting at the same time.
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(727372)")
                self._check_encoding(conn)
                self._check_schema_version(conn)
                ddl = _SCHEMA + self._dialect.ddl(SHARED_SCHEMA) + _BYTEWISE_INDEXES
                # A schema that is complete is left alone: `CREATE INDEX IF NOT EXISTS` takes a
                # table lock before it looks (a replica starting while another wrote deadlocked
                # with it) and needs the table's owner, and `CREATE TABLE IF NOT EXISTS` the
                # schema's CREATE right (a role granted only reads and writes could not start).
                if not self._schema_complete(conn, ddl):
                    conn.execute(ddl)

    @staticmethod
    def _schema_complete(conn: Any, ddl: str) -> bool:
        names = _CREATED.findall(ddl)
        row = conn.execute("SELECT count(*) FROM unnest(%s::text[]) AS n WHERE to_regclass(n) IS NULL",
                           (names,)).fetchone()
        return row is not None and row[0] == 0

    @staticmethod
    def _check_encoding(conn: Any) -> None:
        # Ids, labels, long-term texts, pool and state values are any Unicode text, as on
        # SQLite; another encoding refuses some of them (LATIN1: every Chinese id) or gives
        # back bytes (SQL_ASCII), call by call, as internal errors.
        row = conn.execute("SELECT current_database(), pg_encoding_to_char(encoding) FROM pg_database"
                           " WHERE datname = current_database()").fetchone()
        if row is not None and row[1] != "UTF8":
            raise StoreOpenError(
                f"the PostgreSQL database {row[0]!r} has encoding {row[1]}; agentscope-memory keeps any Unicode text"
                f" and needs a UTF8 database (CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0)")

    def _check_schema_version(self, conn: Any) -> None:
        # Before any DDL: a database from a newer version is left exactly as it is.
        meta = self._dialect.table("meta")
        row = conn.execute("SELECT to_regclass(%s)", (meta,)).fetchone()
        if row is None or row[0] is None:
            return
        row = conn.execute(f"SELECT value FROM {meta} WHERE key = 'schema_version'").fetchone()
        check_schema_version(row[0] if row else None, "the PostgreSQL database")

    def _in_transaction(self, tenant: str, fn: Callable[[SqlTx], T], write: bool) -> T:
        isolation = "READ COMMITTED" if write else "REPEATABLE READ, READ ONLY"
        # Each dead connection left from before a restart costs one attempt; one more finds a
        # live one (or the pool's wait for a new one).
        for attempt in range(self._pool_size + 1):
            begun = False
            conn: psycopg.Connection[Any] | None = None
            try:
                with self._pool.connection() as conn:
                    with conn.transaction():
                        # One round trip for both.
                        conn.execute(f"SET TRANSACTION ISOLATION LEVEL {isolation}; SET LOCAL lock_timeout = '{LOCK_WAIT_S}s'")
                        begun = True
                        return fn(SqlTx(conn, self._dialect, tenant, write))
            except PoolTimeout as exc:
                raise _unavailable(exc) from exc
            except (pg_errors.TransactionRollback, pg_errors.DeadlockDetected, pg_errors.SerializationFailure) as exc:
                # A deadlock or a serialization failure: PostgreSQL chose this transaction to
                # undo whole, so a caller's retry with fresh state succeeds (gRPC ABORTED).
                raise AbortedError(f"PostgreSQL undid the transaction ({first_line(exc)}); nothing of it was stored,"
                                   " retry") from exc
            except pg_errors.LockNotAvailable as exc:
                raise UnavailableError(f"PostgreSQL: what this call needs was locked by another transaction (another"
                                       f" replica's, or one left open) for more than {LOCK_WAIT_S} s; nothing of this call was"
                                       " stored; retry") from exc
            except pg_errors.DiskFull as exc:
                # Not the caller's fault nor a bug (INTERNAL): the operator's to fix.
                raise ResourceExhaustedError("", f"PostgreSQL's disk is full ({first_line(exc)}); nothing of this"
                                                 " call was stored") from exc
            except (pg_errors.InsufficientPrivilege, pg_errors.ReadOnlySqlTransaction) as exc:
                # The server's database role may not do this (granted reads only, or a standby):
                # the operator's to fix, so not INTERNAL, and no retry helps. (A write in one of
                # our own read transactions would be a bug.)
                if isinstance(exc, pg_errors.ReadOnlySqlTransaction) and not write:
                    raise
                raise FailedPreconditionError(_refused(exc)) from exc
            except psycopg.OperationalError as exc:
                # Only a lost connection is the database's absence; a statement's own failure
                # (a deadlock, a cancelled query) on a live connection goes up unchanged.
                if conn is not None and not conn.broken and not conn.closed:
                    raise
                if begun or attempt == self._pool_size:
                    raise _unavailable(exc) from exc
        raise AssertionError("unreachable")

    async def run(
        self, tenant: str, fn: Callable[[SqlTx], T], *, write: bool = True, small: bool = False
    ) -> T:
        if current_tracer.get() is None:
            return await self._run(tenant, fn, write, small)
        with span("store.transaction", {"db.system.name": "postgresql", "agentscope_memory.write": write}):
            return await self._run(tenant, fn, write, small)

    async def _run(self, tenant: str, fn: Callable[[SqlTx], T], write: bool, small: bool) -> T:
        if self._closed:
            raise RuntimeError("store is closed")
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._executor, self._in_transaction, tenant, fn, write)
        if write and next(self._writes) % PRUNE_EVERY == 0:
            # After the caller's transaction, in a worker of its own: no call waits for it.
            try:
                self._executor.submit(self._prune_requests)
            except RuntimeError:
                pass  # closing
        return result

    def _prune_requests(self) -> None:
        try:
            with self._pool.connection() as conn:
                conn.execute(
                    "DELETE FROM asm_requests WHERE ctid IN (SELECT ctid FROM asm_requests WHERE created < %s"
                    " LIMIT %s FOR UPDATE SKIP LOCKED)", (time.time() - REQUEST_TTL_S, PRUNE_ROWS))
        except (psycopg.Error, PoolTimeout) as exc:
            # Housekeeping: the next round tries again.
            log.warning("pruning old request ids failed: %s", first_line(exc))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._executor.shutdown)
        await loop.run_in_executor(None, self._pool.close)


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_S}s'")


def _unavailable(exc: Exception) -> UnavailableError:
    if isinstance(exc, PoolTimeout):
        reason = (f"no database connection within {CONNECTION_WAIT_S:g} s (PostgreSQL is unreachable, or every"
                  " connection is busy)")
    else:
        # psycopg's own words (host, port, what failed); the DSN's password is never in them.
        reason = first_line(exc)
    return UnavailableError(f"PostgreSQL is unavailable: {reason}; retry later")


def _refused(exc: Exception) -> str:
    return (f"PostgreSQL refused the server's database role ({first_line(exc)}); a role that does not own the"
            " asm_ tables needs SELECT, INSERT, UPDATE and DELETE on them, once a server logging in as their owner"
            " has made them (long-term memory's at its start, with long_term_preload); nothing of this call was stored")


def first_line(exc: Exception) -> str:
    """The first line of psycopg's message (the rest is detail, hints and context), or the
    error's class when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
