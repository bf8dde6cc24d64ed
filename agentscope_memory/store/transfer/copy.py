"""Copy every table of one store into an empty other, then compare them.

The source is read in one snapshot (a read transaction held for the whole copy), so a copy of a
PostgreSQL database that replicas still write is still one consistent state; an SQLite source is
guarded by its server lock besides (the command's job). The target is written table by table in
key order, in batches, each batch a transaction. A marker in the target's `meta` names the source
and the row counts it had: a copy that was interrupted is resumed by running it again (rows
already there are skipped, finished tables not read again), and the marker says it is complete
once every table's count matched. Anything that cannot be copied as it is (a column one side
lacks, embeddings of other dimensions than the target's long-term table holds, a target that
already holds other data) is refused before the first row is written.
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from agentscope_memory.store.base import NO_TENANT, StoreOpenError
from agentscope_memory.store.sql import SqlTx
from agentscope_memory.store.sql.schema import check_schema_version
from agentscope_memory.store.transfer.endpoints import (
    CopyRefused,
    Endpoint,
    table_columns,
    vector_dimensions,
)
from agentscope_memory.store.transfer.tables import (
    DERIVED,
    TABLES,
    Reader,
    column_reader,
    insert_mark,
    select_expression,
)

# The target's record of the copy it holds (a JSON object: source, counts, tables_done, finished).
COPY_MARKER = "migration.store_copy"
# The PostgreSQL advisory lock a copy holds on its target (the store's own are 727372 and 727373).
COPY_LOCK = 727374
# When no embedding is there to keep, the long-term table's dimensions do not matter: the first
# server on the target gives the column its embedder's (`sql/long_term.py`).
_ANY_DIMENSIONS = 384

# `progress(table, total_rows)`: a context whose value is called with each batch's row count.
Progress = Callable[[str, int], AbstractContextManager[Callable[[int], None]]]


@dataclass(frozen=True)
class TableCopied:
    table: str
    rows: int


def copy_store(source: Endpoint, target: Endpoint, *, progress: Progress | None = None,
               batch_rows: int = 500) -> list[TableCopied]:
    """Copy `source` into `target` (empty, or holding an interrupted copy of `source`); the rows
    per table, every count checked equal on both sides. Raises `CopyRefused`."""
    if source.describe() == target.describe():
        raise CopyRefused(f"the source and the target are the same store ({source.describe()})")
    if not source.exists():
        raise CopyRefused(f"there is no store at {source.describe()}")
    src = source.connect(read_only=True)
    try:
        _begin_snapshot(source, src)
        return _Copy(source, src, target, progress, batch_rows).run()
    finally:
        src.close()


def _begin_snapshot(endpoint: Endpoint, conn: Any) -> None:
    if endpoint.kind == "sqlite":
        conn.execute("BEGIN")
    else:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")


class _Copy:
    def __init__(self, source: Endpoint, src: Any, target: Endpoint, progress: Progress | None, batch_rows: int) -> None:
        self.source, self.src, self.target = source, src, target
        self.src_dialect, self.dst_dialect = source.dialect(), target.dialect()
        self.progress = progress
        self.batch_rows = batch_rows

    def run(self) -> list[TableCopied]:
        guard = self._exclusive()
        try:
            return self._run()
        finally:
            if guard is not None:
                guard.close()

    def _exclusive(self) -> Any:
        """On PostgreSQL, a session lock held for the whole copy: two copies into one database
        would both find it empty and mix their rows. (An SQLite target has its data dir's lock.)"""
        if self.target.kind != "postgres":
            return None
        conn = self.target.connect(read_only=False)
        if not conn.execute(f"SELECT pg_try_advisory_lock({COPY_LOCK})").fetchone()[0]:
            conn.close()
            raise CopyRefused(f"another copy into {self.target.describe()} is running")
        return conn

    def _run(self) -> list[TableCopied]:
        self._check_source_version()
        src_columns = {t: table_columns(self.source, self.src, self.src_dialect.table(t)) for t, _ in TABLES}
        counts = {t: self._count(self.source, self.src, t) if src_columns[t] else 0 for t, _ in TABLES}
        dimensions = self._dimensions(counts)
        resumed = self._check_target(counts)
        self.target.create_schema(dimensions)
        dst = self.target.connect(read_only=False)
        try:
            plans = {t: self._plan(t, src_columns[t], dst) for t, _ in TABLES if counts[t]}
            marker = resumed or {"source": self.source.describe(), "counts": counts, "tables_done": [],
                                 "finished": False, "started": time.time()}
            self._mark(dst, marker)
            for table, keys in TABLES:
                if table in marker["tables_done"]:
                    continue
                if counts[table]:
                    self._copy_table(dst, table, keys, plans[table], counts[table])
                marker["tables_done"].append(table)
                self._mark(dst, marker)
            meta_rows = self._copy_meta(dst)
            self._verify(dst, counts)
            marker.update(finished=True, completed=time.time())
            self._mark(dst, marker)
        finally:
            dst.close()
        return [TableCopied(t, counts[t]) for t, _ in TABLES] + [TableCopied("meta", meta_rows)]

    # -- checks, all before the first write -------------------------------------------------

    def _check_source_version(self) -> None:
        if not table_columns(self.source, self.src, self.src_dialect.table("meta")):
            return
        try:
            check_schema_version(self._meta(self.source, self.src, "schema_version"), self.source.describe())
        except StoreOpenError as exc:
            raise CopyRefused(str(exc)) from None

    def _dimensions(self, counts: dict[str, int]) -> int | None:
        """The dimensions to create the target's long-term table with (None: no long-term rows
        to copy, the table is left to the target's first server)."""
        if not (counts["ltm"] or counts["ltm_scopes"] or counts["ltm_history"]):
            return None
        found = self._source_dimensions() if counts["ltm"] else {}
        expected: int | None = None
        if self.target.kind == "postgres":
            conn = self.target.connect(read_only=True)
            try:
                expected = vector_dimensions(self.target, conn)
            finally:
                conn.close()
        else:
            # SQLite keeps each embedding as bytes: any dimensions, as the source has them.
            return _ANY_DIMENSIONS
        if expected is None:
            if len(found) > 1:
                raise CopyRefused(
                    f"the source's long-term memories have embeddings of {_list(found)}; a PostgreSQL column"
                    " holds one size: start a server on the source with its embedder and search each scope"
                    " once (it embeds old rows again), or copy to SQLite")
            return next(iter(found), _ANY_DIMENSIONS)
        other = {d: n for d, n in found.items() if d != expected}
        if other:
            raise CopyRefused(
                f"the target's long-term table holds {expected}-dimensional embeddings, the source has"
                f" {_list(other)}: copy into a database whose long-term table has none yet")
        return expected

    def _source_dimensions(self) -> dict[int, int]:
        """Embedding dimensions in the source: {dimensions: rows}."""
        if self.source.kind == "postgres":
            dims = vector_dimensions(self.source, self.src)
            table = self.src_dialect.table("ltm")
            n = self.src.execute(f"SELECT count(*) FROM {table} WHERE embedding IS NOT NULL").fetchone()[0]
            return {dims: int(n)} if dims and n else {}
        rows = self.src.execute("SELECT length(embedding), count(*) FROM ltm WHERE embedding IS NOT NULL"
                                " GROUP BY 1 ORDER BY 1").fetchall()
        for size, _ in rows:
            if size % 4:
                raise CopyRefused(f"the source's long-term table holds an embedding of {size} bytes, not float32 values")
        return {size // 4: int(n) for size, n in rows}

    def _check_target(self, counts: dict[str, int]) -> dict[str, Any] | None:
        """The marker of the interrupted copy to resume, None for an empty target; refuses one
        that holds anything else."""
        if not self.target.exists():
            return None
        dst = self.target.connect(read_only=True)
        try:
            marker_text = None
            if table_columns(self.target, dst, self.dst_dialect.table("meta")):
                try:
                    check_schema_version(self._meta(self.target, dst, "schema_version"), self.target.describe())
                except StoreOpenError as exc:
                    raise CopyRefused(str(exc)) from None
                marker_text = self._meta(self.target, dst, COPY_MARKER)
            holding = [t for t, _ in TABLES if table_columns(self.target, dst, self.dst_dialect.table(t))
                       and dst.execute(f"SELECT 1 FROM {self.dst_dialect.table(t)} LIMIT 1").fetchone()]
        finally:
            dst.close()
        marker = json.loads(marker_text) if marker_text else None
        if marker and marker.get("source") == self.source.describe():
            if marker.get("finished"):
                raise CopyRefused(f"{self.target.describe()} already holds a finished copy of {self.source.describe()}")
            if marker.get("counts") != counts:
                changed = next(t for t in counts if marker["counts"].get(t) != counts[t])
                raise CopyRefused(
                    f"the source changed since the interrupted copy ({changed}: {marker['counts'].get(changed)} rows"
                    f" then, {counts[changed]} now); empty {self.target.describe()} and copy again")
            return dict(marker)
        if holding:
            name = self.dst_dialect.table(holding[0])
            origin = f" (a copy of {marker['source']})" if marker else ""
            raise CopyRefused(f"{self.target.describe()} already holds data{origin}: table {name} is not empty;"
                              " copy into an empty database")
        return None

    def _plan(self, table: str, src_columns: list[str] | None, dst: Any) -> tuple[list[str], list[tuple[str, Reader]]]:
        """The source columns to read and, for each target column written, how it is filled."""
        assert src_columns is not None
        dst_columns = table_columns(self.target, dst, self.dst_dialect.table(table)) or []
        for column in src_columns:
            if column not in dst_columns and (table, column) not in DERIVED:
                raise CopyRefused(f"table {table}: the source has a column {column} the target lacks; it cannot be"
                                  " copied faithfully (is the target's server older than the source's?)")
        writes: list[tuple[str, Reader]] = []
        for column in dst_columns:
            reader = column_reader(self.source.kind, self.target.kind, table, column, src_columns)
            if reader is not None:
                writes.append((column, reader))
            elif (table, column) not in DERIVED:
                raise CopyRefused(f"table {table}: the target has a column {column} the source lacks; it cannot be"
                                  " copied faithfully (is the source's server older than the target's?)")
        return src_columns, writes

    # -- copying --------------------------------------------------------------------------

    def _copy_table(self, dst: Any, table: str, keys: tuple[str, ...],
                    plan: tuple[list[str], list[tuple[str, Reader]]], total: int) -> None:
        read, writes = plan
        select = (f"SELECT {', '.join(select_expression(self.source.kind, table, c) for c in read)}"
                  f" FROM {self.src_dialect.table(table)} ORDER BY {', '.join(keys)}")
        marks = ", ".join(insert_mark(self.target.kind, table, c) for c, _ in writes)
        insert = (f"INSERT INTO {self.dst_dialect.table(table)} ({', '.join(c for c, _ in writes)})"
                  f" VALUES ({marks}) ON CONFLICT DO NOTHING")
        if self.dst_dialect.placeholder != "?":
            insert = insert.replace("?", self.dst_dialect.placeholder)
        bar = self.progress(table, total) if self.progress else nullcontext(_ignore)
        cursor = self.src.cursor(name=f"copy_{table}") if self.source.kind == "postgres" else self.src.cursor()
        try:
            cursor.execute(select)
            with bar as advance:
                while True:
                    batch = cursor.fetchmany(self.batch_rows)
                    if not batch:
                        break
                    rows = [dict(zip(read, r, strict=True)) for r in batch]
                    params = [tuple(reader(row) for _, reader in writes) for row in rows]
                    with self._transaction(dst):
                        _insert(dst, insert, params)
                    advance(len(batch))
        finally:
            cursor.close()

    def _copy_meta(self, dst: Any) -> int:
        if not table_columns(self.source, self.src, self.src_dialect.table("meta")):
            return 0
        rows = [(k, v) for k, v in self.src.execute(f"SELECT key, value FROM {self.src_dialect.table('meta')}"
                                                    " ORDER BY key").fetchall() if k != COPY_MARKER]

        with self._transaction(dst) as tx:
            for key, value in rows:
                tx.meta_put(key, value)
        return len(rows)

    def _verify(self, dst: Any, counts: dict[str, int]) -> None:
        for table, _ in TABLES:
            if not counts[table]:
                continue
            copied = self._count(self.target, dst, table)
            if copied != counts[table]:
                raise CopyRefused(f"table {table}: the source holds {counts[table]} rows, the target {copied} after"
                                  " the copy; the target is incomplete")
        source_meta = dict(self.src.execute(f"SELECT key, value FROM {self.src_dialect.table('meta')}").fetchall()) \
            if table_columns(self.source, self.src, self.src_dialect.table("meta")) else {}
        for key, value in source_meta.items():
            if key != COPY_MARKER and self._meta(self.target, dst, key) != value:
                raise CopyRefused(f"table meta: {key} differs between the source and the target after the copy")

    # -- helpers ----------------------------------------------------------------------------

    def _count(self, endpoint: Endpoint, conn: Any, table: str) -> int:
        return int(conn.execute(f"SELECT count(*) FROM {endpoint.dialect().table(table)}").fetchone()[0])

    def _meta(self, endpoint: Endpoint, conn: Any, key: str) -> str | None:
        mark = endpoint.dialect().placeholder
        row = conn.execute(f"SELECT value FROM {endpoint.dialect().table('meta')} WHERE key = {mark}", (key,)).fetchone()
        return row[0] if row else None

    @contextmanager
    def _transaction(self, dst: Any) -> Iterator[SqlTx]:
        """One write transaction on the target."""
        tx = SqlTx(dst, self.dst_dialect, NO_TENANT, True)
        if self.target.kind == "postgres":
            with dst.transaction():
                yield tx
            return
        dst.execute("BEGIN IMMEDIATE")
        try:
            yield tx
        except BaseException:
            dst.execute("ROLLBACK")
            raise
        dst.execute("COMMIT")

    def _mark(self, dst: Any, marker: dict[str, Any]) -> None:
        with self._transaction(dst) as tx:
            tx.meta_put(COPY_MARKER, json.dumps(marker))


def _ignore(rows: int) -> None:
    pass


def _insert(dst: Any, insert: str, params: list[tuple[Any, ...]]) -> None:
    cursor = dst.cursor()
    try:
        cursor.executemany(insert, params)
    finally:
        cursor.close()


def _list(found: dict[int, int]) -> str:
    return ", ".join(f"{d} dimensions ({n} rows)" for d, n in sorted(found.items()))
