"""SQLite backend: one file under the data dir, WAL, one writer thread, reader threads.

Durability: every `run(write=True)` is one transaction committed before the call returns. In WAL
mode with `synchronous=NORMAL` a committed transaction survives the process being killed at any
moment (it is in the WAL, handed to the OS); `FULL` also survives power loss at the cost of an
fsync per commit.

The statements are the shared SQL layer's (`store/sql/`); this module holds connections, threads,
transactions and the schema.

Checkpoints (copying the WAL back into the database file, with an fsync of each) run on a thread
of their own: SQLite's automatic checkpoint would run them in whichever commit crossed its
threshold, which for a small write is the event loop, holding it for hundreds of microseconds
every hundred or so appends. SQLite's own stays on, at ten times its default, as a safety net
for a stream of writes so steady that a background checkpoint never catches up with it.

A transaction run inline on the event loop never waits for the file's lock: its connection has no
busy timeout, so while another program (a local-mode client, a `sqlite3` shell) holds the lock it
fails at once with SQLITE_BUSY, before the transaction did anything, and runs again on a worker
thread, which waits for the lock as long as any transaction does. Health checks and every other
call go on meanwhile.

Small writes from concurrent callers share transactions (`group_commit.py`): each runs in a
savepoint of its own inside one BEGIN ... COMMIT, and none is acknowledged before that commit.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from agentscope_memory.errors import FailedPreconditionError, ResourceExhaustedError, UnavailableError
from agentscope_memory.store.base import Row, StoreOpenError
from agentscope_memory.store.group_commit import GroupCommit, PendingWrite
from agentscope_memory.store.sql import SHARED_SCHEMA, Dialect, SqlTx
from agentscope_memory.store.sql.memories import BatchShare
from agentscope_memory.store.sql.schema import check_schema_version
from agentscope_memory.tracing import current_tracer, span

T = TypeVar("T")

log = logging.getLogger("agentscope_memory.store.sqlite")

# The first tables, as every existing database has them. Tables added later are in
# `sql/schema.py`, shared with PostgreSQL.
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

# Expired idempotency records are pruned once every this many write transactions.
_PRUNE_EVERY = 1000
# A checkpoint follows this many small write transactions (an append changes about eight pages,
# so about SQLite's own default of 1000 pages), or any large one.
_CHECKPOINT_EVERY = 128
# SQLite's own checkpoint, inside a commit, past this many WAL pages (its default is 1000).
_AUTOCHECKPOINT_PAGES = 10000
# Between two checkpoint rounds while writes keep coming (SQLite's own came about every 40 ms
# under a stream of appends).
_CHECKPOINT_PAUSE_S = 0.02
# How long a transaction waits for the file's lock held by another program before giving up.
_BUSY_TIMEOUT_MS = 10_000
# What an operator does about a store that cannot be written.
_READ_ONLY_HELP = ("the store file, its -wal and -shm files and the data dir holding them must be writable"
                   " by the server (not read-only, not immutable, not on a read-only mount)")


def _roll_back(conn: sqlite3.Connection) -> None:
    # SQLite may have rolled back itself (a full disk does): a second ROLLBACK would raise "no
    # transaction is active" in place of the reason.
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def _settle(pending: PendingWrite[Any], result: Any, error: BaseException | None) -> None:
    # A caller cancelled once its write was taken has cancelled its future: the write ran, and
    # its caller hears of its cancellation instead.
    if pending.future.done():
        return
    if error is not None:
        pending.future.set_exception(error)
    else:
        pending.future.set_result(result)


class _LockBusy(Exception):
    """An inline transaction found the file locked by another program; nothing of it ran."""


def _is_busy(exc: BaseException) -> bool:
    # The primary code: SQLITE_BUSY_RECOVERY and the like are busy too.
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY


def _is_read_only(exc: BaseException) -> bool:
    # SQLITE_READONLY and its extended codes: the file (or the data dir holding its WAL) cannot
    # be written, which SQLite found when it opened the file (and fell back to reading it only).
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_READONLY


def _is_unique_violation(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.IntegrityError) and getattr(exc, "sqlite_errorcode", None) in (
        sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY,
        sqlite3.SQLITE_CONSTRAINT_UNIQUE,
    )


def sqlite_dialect() -> Dialect:
    # SQLite's columns take str and bytes as they are (`items.data` is TEXT by affinity only).
    def encode(
        tenant: str, memory_id: str, list_name: str, first_seq: int, items: Sequence[str | bytes]
    ) -> list[tuple[Any, ...]]:
        return [(tenant, memory_id, list_name, first_seq + i, item) for i, item in enumerate(items)]

    def decode(rows: list[Sequence[Any]]) -> list[Row]:
        return [Row(seq, data) for seq, data in rows]

    return Dialect(
        name="sqlite",
        table_prefix="",
        placeholder="?",
        item_columns=("data",),
        item_params=encode,
        decode_rows=decode,
        # The one writer (and BEGIN IMMEDIATE) already serialises every write transaction.
        row_lock="",
        claim_lock="",
        is_unique_violation=_is_unique_violation,
    )


class SqliteStore:
    """The default, embedded store."""

    # A small write runs on the caller's event loop and does not suspend between its commit and
    # its return: the caller's next line runs right after the commit, whatever cancels it later
    # (`WatchedStore` relies on that to announce the write without a task of its own). When it
    # is gathered with others (group commit), or another program holds the file's lock and it
    # runs on the writer thread instead, a cancellation reaches its caller only once the
    # transaction is over, or before it began (then nothing of it was written).
    inline_small_writes = True

    def __init__(self, path: Path, *, synchronous: str = "NORMAL", readers: int = 2) -> None:
        # OFF is for the throwaway `memory` store only (the settings offer the other three).
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"sqlite synchronous must be NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._synchronous = synchronous.upper()
        self._dialect = sqlite_dialect()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        # One writer serialises every write transaction; readers see committed snapshots.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        self._readers = ThreadPoolExecutor(max_workers=readers, thread_name_prefix="sqlite-reader")
        self._checkpointer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-checkpoint")
        self._since_checkpoint = 0
        self._checkpoint_queued = False
        self._write_lock: asyncio.Lock | None = None
        self.group_commit = GroupCommit(self._commit_batch)
        self._writes = 0
        self._closed = False
        # Create the schema now so a bad path fails at start-up, not on the first request.
        try:
            self._writer.submit(self._init_schema).result()
        except sqlite3.OperationalError as exc:
            self._shutdown()
            if _is_busy(exc):
                # Healthy, only held: "cannot be opened ... restore it from a backup" sent
                # operators to replace a good database.
                raise StoreOpenError(
                    f"{self.path} is locked by another program, which held its write lock for more than"
                    f" {_BUSY_TIMEOUT_MS // 1000} s while the server started ({exc}); nothing is wrong with the"
                    " database: stop the other program (a local-mode client, a sqlite3 shell, a backup tool)"
                    " or wait until it lets go, then start the server again") from None
            if not _is_read_only(exc) and exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_CANTOPEN:
                raise StoreOpenError(f"{self.path} cannot be opened as an SQLite database ({exc}); restore it from a"
                                     " backup, or move it away to start with an empty store") from None
            raise StoreOpenError(f"{self.path} cannot be written ({exc}): {_READ_ONLY_HELP}") from None
        except sqlite3.DatabaseError as exc:
            self._shutdown()
            # Corrupted, not SQLite at all, unreadable: the one line an operator needs.
            raise StoreOpenError(
                f"{self.path} cannot be opened as an SQLite database ({exc}); restore it from a"
                " backup, or move it away to start with an empty store") from None
        except BaseException:
            self._shutdown()
            raise

    def _connection(self, inline: bool = False) -> tuple[sqlite3.Connection, bool]:
        """The thread's connection, and whether it is kept for the thread's next transaction.
        One opened while the file cannot be written is SQLite's read-only fallback, read-only
        for as long as it is open: it serves one transaction and is closed, so once the file is
        writable again the next one writes, without a restart."""
        # An event loop's thread has a connection of its own that never waits for the lock
        # (see the module docstring); a worker thread's waits up to the busy timeout.
        attribute = "inline_conn" if inline else "conn"
        conn = getattr(self._local, attribute, None)
        if conn is None:
            keep = not self.path.exists() or os.access(self.path, os.W_OK)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute(f"PRAGMA busy_timeout={0 if inline else _BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys=OFF")
            # A safety net only: the background checkpoints keep the WAL far below it, unless
            # writes come so fast and so steadily that none of them can finish.
            conn.execute(f"PRAGMA wal_autocheckpoint={_AUTOCHECKPOINT_PAGES}")
            if not keep:
                return conn, False
            setattr(self._local, attribute, conn)
            with self._connections_lock:
                self._connections.append(conn)
        return conn, True

    def _init_schema(self) -> None:
        conn, kept = self._connection()
        try:
            self._create_schema(conn)
        finally:
            if not kept:
                conn.close()

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        # Before any DDL: a database from a newer version is left exactly as it is.
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone():
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            check_schema_version(row[0] if row else None, str(self.path))
        conn.executescript(_SCHEMA)
        conn.executescript(self._dialect.ddl(SHARED_SCHEMA))
        # A file SQLite could open for reading only (read-only mode, immutable, a read-only mount)
        # passes everything above when its tables exist; a write statement that changes nothing
        # finds out, so such a store is refused at start instead of failing every write. It does
        # not wait for the lock: another program holding it tells nothing either way.
        conn.execute("PRAGMA busy_timeout=0")
        try:
            conn.execute("BEGIN")
            conn.execute("DELETE FROM meta WHERE 0")
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")

    def _in_transaction(
        self, tenant: str, fn: Callable[[SqlTx], T], write: bool, large: bool = False, inline: bool = False
    ) -> T:
        try:
            conn, kept = self._connection(inline)
        except sqlite3.OperationalError as exc:
            # The file (or its data dir, for the -wal and -shm files) cannot be opened at all.
            reason = self._operators_problem(exc)
            if reason is not None:
                raise reason from exc
            raise
        try:
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.OperationalError as exc:
                # A write takes the lock here, before `fn` runs: busy, nothing of it ran.
                if inline and _is_busy(exc):
                    raise _LockBusy from exc
                raise
            tx = SqlTx(conn, self._dialect, tenant, write)
            result = fn(tx)
            if write:
                self._count_writes(tx, 1)
            conn.execute("COMMIT")
        except BaseException as exc:
            _roll_back(conn)
            # A read takes its lock at its first statement, which is all it may have done.
            if inline and not write and _is_busy(exc):
                raise _LockBusy from exc
            self._raise_operators_problem(exc)
            raise
        finally:
            if not kept:
                conn.close()
        if write:
            self._committed(1, large)
        return result

    def _count_writes(self, tx: SqlTx, count: int) -> None:
        """Inside a write transaction about to commit `count` writes: the periodic housekeeping."""
        before = self._writes
        self._writes += count
        if self._writes // _PRUNE_EVERY != before // _PRUNE_EVERY:
            tx.prune_requests()

    def _committed(self, count: int, large: bool = False) -> None:
        self._since_checkpoint += count
        if (large or self._since_checkpoint >= _CHECKPOINT_EVERY) and not self._checkpoint_queued:
            self._since_checkpoint = 0
            self._checkpoint_queued = True
            try:
                self._checkpointer.submit(self._checkpoint)
            except RuntimeError:
                pass  # closing: the last connection to close checkpoints the WAL itself

    def _in_batch_transaction(self, batch: list[PendingWrite[Any]]) -> list[tuple[Any, BaseException | None]]:
        """Every write of `batch` in one transaction on the event loop, each in a savepoint: a
        write that raises is undone alone and gets its error; the others commit together. An
        error of the transaction itself (its lock, its commit, a full disk) fails them all, with
        nothing of any stored. Raises `_LockBusy` when another program holds the lock."""
        conn, kept = self._connection(inline=True)
        outcomes: list[tuple[Any, BaseException | None]] = []
        try:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if _is_busy(exc):
                    raise _LockBusy from exc
                raise
            share = BatchShare()
            for pending in batch:
                conn.execute("SAVEPOINT one_write")
                mark = share.mark()
                try:
                    outcomes.append((pending.fn(SqlTx(conn, self._dialect, pending.tenant, True, share)), None))
                except Exception as exc:
                    if not conn.in_transaction:
                        raise  # SQLite ended the whole transaction: nothing of the batch holds
                    conn.execute("ROLLBACK TO one_write")
                    share.rollback_to(mark)
                    outcomes.append((None, self._operators_problem(exc) or exc))
                conn.execute("RELEASE one_write")
            housekeeping = SqlTx(conn, self._dialect, "", True, share)
            housekeeping.write_back()
            self._count_writes(housekeeping, len(batch))
            conn.execute("COMMIT")
        except BaseException as exc:
            _roll_back(conn)
            self._raise_operators_problem(exc)
            raise
        finally:
            if not kept:
                conn.close()
        self._committed(len(batch))
        return outcomes

    async def _commit_batch(self, batch: list[PendingWrite[Any]]) -> None:
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        loop = asyncio.get_running_loop()
        async with self._write_lock:
            try:
                outcomes = self._in_batch_transaction(batch)
            except _LockBusy:
                # Another program holds the lock: each write waits for it on the writer thread,
                # in a transaction of its own, as a write run alone would.
                for pending in batch:
                    try:
                        result = await loop.run_in_executor(
                            self._writer, self._in_transaction, pending.tenant, pending.fn, True)
                    except Exception as exc:  # noqa: BLE001 - the write's own outcome, for its caller
                        _settle(pending, None, exc)
                    else:
                        _settle(pending, result, None)
                return
        for pending, (result, error) in zip(batch, outcomes, strict=True):
            _settle(pending, result, error)

    def _raise_operators_problem(self, exc: BaseException) -> None:
        reason = self._operators_problem(exc)
        if reason is not None:
            raise reason from exc

    def _operators_problem(self, exc: BaseException) -> Exception | None:
        """What the caller is told when the file, not the call, is the problem (neither the
        caller's fault nor a bug, so not INTERNAL); None for any other error."""
        code = exc.sqlite_errorcode if isinstance(exc, sqlite3.OperationalError) else None
        if code == sqlite3.SQLITE_FULL:
            return ResourceExhaustedError("", f"the store's disk is full ({exc}; data dir {self.path.parent});"
                                              " nothing of this call was stored")
        if code is not None and code & 0xFF in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN):
            return FailedPreconditionError(f"{self.path} cannot be written ({exc}): {_READ_ONLY_HELP};"
                                           " nothing of this call was stored")
        if code == sqlite3.SQLITE_BUSY:
            # Another program (a local-mode client, a sqlite3 shell) held the write lock past
            # busy_timeout: it may let go, so the call may be retried.
            return UnavailableError(f"{self.path} is locked by another program ({exc}, waited {_BUSY_TIMEOUT_MS // 1000} s);"
                                    " nothing of this call was stored; retry")
        return None

    def _checkpoint(self) -> None:
        # PASSIVE: copies what no reader still needs and waits for no one. SQLite starts the log
        # over only when a write begins after a checkpoint that left nothing behind, so while
        # writes keep coming this goes again every few milliseconds, and stops once one round
        # saw none. A failure leaves the WAL as it is (nothing committed is lost), so it is
        # logged, not raised.
        try:
            conn, _ = self._connection()
            while not self._closed:
                writes = self._writes
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                if self._writes == writes:
                    break
                time.sleep(_CHECKPOINT_PAUSE_S)
        except sqlite3.Error as exc:
            log.warning("sqlite checkpoint failed: %s", exc)
        finally:
            self._checkpoint_queued = False

    async def run(
        self, tenant: str, fn: Callable[[SqlTx], T], *, write: bool = True, small: bool = False
    ) -> T:
        if current_tracer.get() is None:
            return await self._run(tenant, fn, write, small)
        with span("store.transaction", {"db.system.name": "sqlite", "agentscope_memory.write": write}):
            return await self._run(tenant, fn, write, small)

    async def _run(self, tenant: str, fn: Callable[[SqlTx], T], write: bool, small: bool) -> T:
        if self._closed:
            raise RuntimeError("store is closed")
        # A small transaction (a few rows) costs less than the hop to a worker thread and back,
        # so it runs right here on the event loop. Writes take the lock either way, so a write on
        # the loop never waits on SQLite's own lock held by the writer thread.
        loop = asyncio.get_running_loop()
        if not write:
            if small:
                try:
                    return self._in_transaction(tenant, fn, False, inline=True)
                except _LockBusy:
                    pass
            return await loop.run_in_executor(self._readers, self._in_transaction, tenant, fn, False)
        if small and self.group_commit.wants():
            return await self.group_commit.write(tenant, fn)
        if self._write_lock is None:
            self._write_lock = asyncio.Lock()
        async with self._write_lock:
            if small:
                try:
                    return self._in_transaction(tenant, fn, True, inline=True)
                except _LockBusy:
                    return await self._wait_for_lock(loop, tenant, fn)
            return await loop.run_in_executor(self._writer, self._in_transaction, tenant, fn, True, True)

    async def _wait_for_lock(self, loop: asyncio.AbstractEventLoop, tenant: str, fn: Callable[[SqlTx], T]) -> T:
        """A small write whose file another program has locked, on the writer thread. Its caller
        hears of a cancellation only once the transaction is over, committed or not, so what it
        does after a small write (`WatchedStore` announces it) still follows the commit."""
        done = loop.run_in_executor(self._writer, self._in_transaction, tenant, fn, True)
        cancelled = False
        while not done.done():
            try:
                await asyncio.wait([done])
            except asyncio.CancelledError:
                cancelled = True
        if cancelled:
            if not done.cancelled():
                done.exception()  # seen: the caller hears of its cancellation instead
            raise asyncio.CancelledError
        return done.result()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self.group_commit.wait_idle()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        self._checkpointer.shutdown(wait=True)
        with self._connections_lock:
            for conn in self._connections:
                try:
                    conn.close()
                except sqlite3.Error:
                    pass
            self._connections.clear()
