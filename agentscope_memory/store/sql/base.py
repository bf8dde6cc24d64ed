"""What every group of statements shares: the connection, the dialect, the tenant."""

from __future__ import annotations

from typing import Any, Sequence

from agentscope_memory.store.sql.dialect import Dialect


# A DB-API connection, sqlite3's or psycopg's: the statements use `execute(sql, params)` (whose
# cursor has `fetchone`, `fetchall` and `rowcount`) and `cursor().executemany`. The two drivers'
# type stubs differ in overloads and optional arguments too much for one Protocol to fit both.
Connection = Any
Cursor = Any


class SqlTxBase:
    """One transaction on `conn`, already begun by the store; statements only, no commit."""

    def __init__(self, conn: Connection, dialect: Dialect, tenant: str, write: bool) -> None:
        self._conn = conn
        self._dialect = dialect
        self.tenant = tenant
        self._write = write

    # Each helper calls the driver itself: these run a few times per message added or read,
    # and a Python call more per statement shows in the store's throughput.
    def _execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        return self._conn.execute(self._dialect.sql(sql), params)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.execute(self._dialect.sql(sql), params).fetchone()

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        rows: list[Any] = self._conn.execute(self._dialect.sql(sql), params).fetchall()
        return rows

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        cursor = self._conn.cursor()
        try:
            cursor.executemany(self._dialect.sql(sql), rows)
        finally:
            cursor.close()
