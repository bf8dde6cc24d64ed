"""The two ends of a store copy: an SQLite file (given by its data dir, as the server takes it, or
by the file itself) or a PostgreSQL database (given by its URL, as `postgres_dsn`)."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentscope_memory.store import SQLITE_FILE_NAME
from agentscope_memory.store.base import NO_TENANT
from agentscope_memory.store.sql import Dialect


class CopyRefused(Exception):
    """The copy cannot be made (or cannot be made faithfully); the message says why, in one line."""


@dataclass(frozen=True)
class Endpoint:
    kind: Literal["sqlite", "postgres"]
    # sqlite: the database file; postgres: the DSN (which may hold a password: never shown).
    path: Path | None = None
    dsn: str | None = None

    @property
    def data_dir(self) -> Path:
        """The directory whose server lock guards the file (sqlite only)."""
        assert self.path is not None
        return self.path.parent

    def describe(self) -> str:
        """Where this is, for messages: the file, or the database's URL without its password."""
        if self.kind == "sqlite":
            return str(self.path)
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        try:
            parts = conninfo_to_dict(self.dsn or "")
        except psycopg.Error:  # an unparsable DSN: psycopg's own error follows when it is used
            return "postgresql://(unparsable URL)"
        user = f"{parts['user']}@" if parts.get("user") else ""
        port = f":{parts['port']}" if parts.get("port") else ""
        return f"postgresql://{user}{parts.get('host') or 'localhost'}{port}/{parts.get('dbname') or ''}"

    def dialect(self) -> Dialect:
        if self.kind == "sqlite":
            from agentscope_memory.store.sqlite import sqlite_dialect

            return sqlite_dialect()
        from agentscope_memory.store.postgres import postgres_dialect

        return postgres_dialect()

    def exists(self) -> bool:
        return self.kind == "postgres" or (self.path is not None and self.path.is_file())

    def connect(self, *, read_only: bool) -> Any:
        """A connection with no transaction open (the caller begins and ends its own)."""
        if self.kind == "sqlite":
            assert self.path is not None
            target = f"{self.path.resolve().as_uri()}?mode={'ro' if read_only else 'rw'}"
            try:
                conn = sqlite3.connect(target, uri=True, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA busy_timeout=10000")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as exc:
                raise CopyRefused(f"{self.describe()} cannot be opened as an SQLite database ({exc})") from None
            return conn
        import psycopg

        from agentscope_memory.store.postgres import first_line, with_connection_defaults

        try:
            # The server's timeouts and keepalives: a dead path fails the copy, not hangs it. Text
            # in UTF-8, as the server's, whatever PGCLIENTENCODING says.
            return psycopg.connect(with_connection_defaults(self.dsn or ""), autocommit=True, client_encoding="UTF8")
        except psycopg.Error as exc:
            raise CopyRefused(f"cannot connect to {self.describe()}: {first_line(exc)}") from None

    def create_schema(self, vector_dimensions: int | None) -> None:
        """Every table a server of this version keeps, created as the server creates them (by
        opening its store); the long-term tables too when `vector_dimensions` is given."""
        from agentscope_memory.store.base import StoreOpenError
        from agentscope_memory.errors import UnavailableError

        try:
            if self.kind == "sqlite":
                from agentscope_memory.store.sqlite import SqliteStore

                assert self.path is not None
                store: Any = SqliteStore(self.path)
            else:
                from agentscope_memory.store.postgres import PostgresStore

                store = PostgresStore(self.dsn or "", pool_size=1)
        except (StoreOpenError, UnavailableError, OSError) as exc:
            raise CopyRefused(str(exc)) from None

        async def finish() -> None:
            try:
                if vector_dimensions is not None:
                    await store.run(NO_TENANT, lambda tx: tx.ltm_ensure_schema(vector_dimensions))
            finally:
                await store.close()

        asyncio.run(finish())


def parse_endpoint(text: str) -> Endpoint:
    """`postgresql://...` (or `postgres://...`): a PostgreSQL database; anything else a path: the
    data dir a server was given (its store is `<dir>/agentscope-memory.sqlite3`) or the file."""
    text = text.strip()
    if not text:
        raise CopyRefused("a store must be a data dir, an SQLite file or a postgresql:// URL, not empty")
    if text.lower().startswith(("postgresql://", "postgres://")):
        return Endpoint("postgres", dsn=text)
    path = Path(text).expanduser()
    if path.is_file() or path.suffix in (".sqlite3", ".sqlite", ".db"):
        return Endpoint("sqlite", path=path.absolute())
    return Endpoint("sqlite", path=(path / SQLITE_FILE_NAME).absolute())


def table_columns(endpoint: Endpoint, conn: Any, table: str) -> list[str] | None:
    """The columns of `table` (its name in this database) in order, or None when it is absent."""
    if endpoint.kind == "sqlite":
        rows = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
        return [r[1] for r in rows] or None
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " AND table_name = %s ORDER BY ordinal_position", (table,)).fetchall()
    return [r[0] for r in rows] or None


def vector_dimensions(endpoint: Endpoint, conn: Any) -> int | None:
    """PostgreSQL: the dimensions of the long-term embedding column, None without one."""
    if endpoint.kind != "postgres":
        return None
    found = conn.execute(endpoint.dialect().ddl(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = to_regclass('{ltm}') AND attname = 'embedding'")).fetchone()
    if found is None or not str(found[0]).startswith("vector("):
        return None
    return int(str(found[0])[len("vector("):-1])
