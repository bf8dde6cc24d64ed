"""Long-term memories: one row each, their scopes, and the history of every change.

The rows carry what ranking and the lifecycle need (memory_type, domain, importance, access
times and count, soft-delete flag, source, pinned) and what retrieval needs: the embedding and the
lexical terms. On SQLite the embedding is a float32 BLOB and candidate search runs in the
server's own per-scope index (`long_term/hybrid/memory_index.py`); on PostgreSQL it is a
pgvector column with an HNSW index and the terms a tsvector. A replica keeps the scopes it
searches in the same per-scope index as on SQLite and keeps each coherent with the other
replicas' writes through the scope's `generation`: a trigger stamps every row change that
search reads (text, terms, vector, filters, soft delete) with the scope's next generation, taken
under the scope row's lock, so generations commit in order and a search reads only the rows
changed since its index's generation. Scopes too large for a replica's index budget are searched
in the database (pgvector HNSW, tsvector).

SQLite stamps generations the same way, by triggers of its own (its writers are serialised by
the file's write lock, so its generations commit in order too): a server and a local-mode
program on one data directory each see the other's writes at their next search of the scope.
Only this freshness is shared; searching in the database stays PostgreSQL's.

A text is stored once per live exact scope: a partial unique index on (tenant, scope, content
hash) over live rows makes concurrent writers (several replicas recording the same
conversation) insert it exactly once, and lets a deleted text be recorded again.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping, Sequence

import numpy as np

from agentscope_memory.long_term.metadata_filter import metadata_matches
from agentscope_memory.store.base import LongTermFilter, LongTermHistoryRow, LongTermRow
from agentscope_memory.store.sql.base import SqlTxBase
from agentscope_memory.store.sql.dialect import placeholders

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS {ltm} (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    run_name TEXT NOT NULL,
    text TEXT NOT NULL,
    lex_terms TEXT NOT NULL,
    metadata_json TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    domain TEXT NOT NULL,
    importance DOUBLE PRECISION NOT NULL,
    importance_method TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    updated DOUBLE PRECISION NOT NULL,
    last_accessed DOUBLE PRECISION NOT NULL,
    access_count BIGINT NOT NULL,
    content_hash TEXT NOT NULL,
    deleted BIGINT NOT NULL,
    source_json TEXT NOT NULL,
    embedding_model TEXT NOT NULL,
    embedding {vector_type},
    {lex_column}
    version BIGINT NOT NULL,
    PRIMARY KEY (tenant, memory_id)
);
CREATE UNIQUE INDEX IF NOT EXISTS {ltm}_live_text ON {ltm} (tenant, scope_key, content_hash) WHERE deleted = 0;
CREATE INDEX IF NOT EXISTS {ltm}_by_scope ON {ltm} (tenant, scope_key, created);
CREATE TABLE IF NOT EXISTS {ltm_scopes} (
    tenant TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    user_id TEXT NOT NULL,
    run_name TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, scope_key)
);
CREATE INDEX IF NOT EXISTS {ltm_scopes}_by_user ON {ltm_scopes} (tenant, user_id);
CREATE INDEX IF NOT EXISTS {ltm_scopes}_by_agent ON {ltm_scopes} (tenant, agent_name);
CREATE TABLE IF NOT EXISTS {ltm_history} (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    n BIGINT NOT NULL,
    event TEXT NOT NULL,
    old_text TEXT,
    new_text TEXT,
    detail_json TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, memory_id, n)
);
"""

# PostgreSQL: pgvector's HNSW index for the dense leg; a GIN index over (scope, terms) for the
# lexical leg (btree_gin lets the scope be a GIN column, so a query reads only its scope's
# postings: its cost does not grow with other scopes).
_POSTGRES_EXTRA = """
CREATE INDEX IF NOT EXISTS {ltm}_hnsw ON {ltm} USING hnsw (embedding vector_cosine_ops);
CREATE INDEX IF NOT EXISTS {ltm}_lex ON {ltm} USING gin (scope_key, lex);
ALTER TABLE {ltm} ADD COLUMN IF NOT EXISTS generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {ltm_scopes} ADD COLUMN IF NOT EXISTS generation BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS {ltm}_by_generation ON {ltm} (tenant, scope_key, generation);
ALTER TABLE {ltm} ADD COLUMN IF NOT EXISTS pinned BIGINT NOT NULL DEFAULT 0;
"""

# Columns added after the first release: (name, type and default). A database written before
# them gets them at open (`ltm_ensure_schema`), every existing row with the default; they come
# after `_SCHEMA`'s columns on new databases too, so both have one column order.
_ADDED_COLUMNS = (("pinned", "BIGINT NOT NULL DEFAULT 0"),)

# One statement each (a function body holds semicolons). Access bookkeeping (last_accessed,
# access_count) and importance are read fresh by every search, so they do not stamp a row.
_POSTGRES_GENERATION = (
    """CREATE OR REPLACE FUNCTION {ltm}_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {ltm_scopes} SET generation = generation + 1
        WHERE tenant = NEW.tenant AND scope_key = NEW.scope_key
        RETURNING generation INTO NEW.generation;
    NEW.generation := COALESCE(NEW.generation, 0);
    RETURN NEW;
END $$""",
    """CREATE OR REPLACE TRIGGER {ltm}_stamp BEFORE INSERT OR UPDATE OF
    scope_key, text, lex_terms, metadata_json, memory_type, domain, created, deleted, embedding_model, embedding
    ON {ltm} FOR EACH ROW EXECUTE FUNCTION {ltm}_stamp()""",
)

# SQLite: the generation columns and their triggers, added to a store of any earlier release
# at open (`_sqlite_generation`). Its rows and scopes all start at generation 0, which an index
# built from them reads as current. The triggers live in the file, so a program of an older
# release writing to it stamps its changes as well. AFTER triggers (SQLite's BEFORE triggers
# cannot set NEW's columns); the stamp's own UPDATE of `generation` is not among the columns
# they watch, so it fires neither again.
_SQLITE_GENERATION_COLUMNS = (("ltm", "generation"), ("ltm_scopes", "generation"))
_SQLITE_STAMP = """UPDATE {ltm_scopes} SET generation = generation + 1
        WHERE tenant = NEW.tenant AND scope_key = NEW.scope_key;
    UPDATE {ltm} SET generation = COALESCE((SELECT generation FROM {ltm_scopes}
        WHERE tenant = NEW.tenant AND scope_key = NEW.scope_key), 0)
        WHERE tenant = NEW.tenant AND memory_id = NEW.memory_id;"""
_SQLITE_GENERATION = (
    "CREATE INDEX IF NOT EXISTS {ltm}_by_generation ON {ltm} (tenant, scope_key, generation)",
    "CREATE TRIGGER IF NOT EXISTS {ltm}_stamp_insert AFTER INSERT ON {ltm} FOR EACH ROW BEGIN\n    "
    + _SQLITE_STAMP + "\nEND",
    """CREATE TRIGGER IF NOT EXISTS {ltm}_stamp_update AFTER UPDATE OF
    scope_key, text, lex_terms, metadata_json, memory_type, domain, created, deleted, embedding_model, embedding
    ON {ltm} FOR EACH ROW BEGIN\n    """ + _SQLITE_STAMP + "\nEND",
)

_COLUMNS = (
    "memory_id, scope_key, agent_name, user_id, run_name, text, lex_terms, metadata_json, memory_type,"
    " domain, importance, importance_method, created, updated, last_accessed, access_count,"
    " content_hash, deleted, source_json, embedding_model, embedding, version, pinned"
)
_COUNT = len(_COLUMNS.split(","))
# Rows of ids and metadata SQLite reads at a time while looking for a metadata filter's matches.
_SCAN_BATCH = 1000


def vector_literal(vector: bytes) -> str:
    """pgvector's text form of a float32 vector."""
    return "[" + ",".join(repr(float(x)) for x in np.frombuffer(vector, dtype=np.float32)) + "]"


# PostgreSQL's tsvector holds at most 1 MiB of distinct lexemes ("string is too long for
# tsvector"); its parser may split a term into more lexemes (`a-b` also gives `a` and `b`), at most
# doubling their bytes. Long texts of many distinct words (a pasted Chinese document: thousands of
# distinct bigrams per page, three messages' worth in each memory's terms) went beyond it.
_TSVECTOR_TERM_BYTES = 500_000


def tsvector_terms(lex_terms: str) -> str:
    """`lex_terms` as PostgreSQL's tsvector can hold them: unchanged unless its distinct terms
    are too many, then only the occurrences of the latest distinct terms that fit (a memory's own
    text comes after the messages before it). The stored `lex_terms` stays whole."""
    terms = lex_terms.split()
    distinct = set(terms)
    if sum(len(t.encode("utf-8")) for t in distinct) <= _TSVECTOR_TERM_BYTES:
        return lex_terms
    kept: set[str] = set()
    size = 0
    for term in reversed(terms):
        if term in kept:
            continue
        size += len(term.encode("utf-8"))
        if size > _TSVECTOR_TERM_BYTES:
            break
        kept.add(term)
    return " ".join(t for t in terms if t in kept)


def tsquery_text(terms: Sequence[str]) -> str:
    """An OR query of `terms`, each quoted (PostgreSQL's parser then splits it as it split the
    indexed text, so both sides agree)."""
    quoted = ["'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in dict.fromkeys(terms) if t]
    return " | ".join(quoted)


def _metadata_clause(metadata: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """PostgreSQL: every key of `metadata` with an equal value in a row's metadata."""
    sql = ""
    params: list[Any] = []
    for key, value in metadata.items():
        # Equal values (long_term/metadata_filter.py), not jsonb containment (`@>`), by
        # which [1] matched [1, 2] here and not in the in-memory index.
        sql += " AND CAST(metadata_json AS jsonb) -> CAST(? AS text) = CAST(? AS jsonb)"
        params += [key, json.dumps(value, ensure_ascii=False)]
    return sql, params


class LongTermStatements(SqlTxBase):
    @property
    def _pg(self) -> bool:
        return self._dialect.name == "postgres"

    def ltm_ensure_schema(self, dimensions: int) -> None:
        if self._pg:
            # Replicas starting together would race on CREATE ... IF NOT EXISTS. Another's DDL
            # (an index rebuilt for new dimensions) may take longer than a write's lock wait.
            self._conn.execute("SET LOCAL lock_timeout = 0")
            self._conn.execute("SELECT pg_advisory_xact_lock(727373)")
            # A schema that is current is left alone: DDL takes table locks, and a replica
            # opening while another writes would deadlock with it.
            if self._pg_schema_current(int(dimensions)):
                return
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
            vector_type, lex = f"vector({int(dimensions)})", "lex tsvector,"
        else:
            vector_type, lex = "BLOB", ""
        ddl = self._dialect.ddl(_SCHEMA.replace("{vector_type}", vector_type).replace("{lex_column}", lex))
        if self._pg:
            ddl += self._dialect.ddl(_POSTGRES_EXTRA)
        for statement in ddl.split(";"):
            if statement.strip():
                self._conn.execute(statement)
        if self._pg:
            self._pg_vector_dimensions(int(dimensions))
            for statement in _POSTGRES_GENERATION:
                self._conn.execute(self._dialect.ddl(statement))
        else:
            # SQLite has no ADD COLUMN IF NOT EXISTS: the table says which it lacks.
            table = self._dialect.table("ltm")
            have = {r[1] for r in self._conn.execute(f'PRAGMA table_info("{table}")').fetchall()}
            for column, definition in _ADDED_COLUMNS:
                if column not in have:
                    self._conn.execute(f'ALTER TABLE "{table}" ADD COLUMN {column} {definition}')
            self._sqlite_generation()

    def _sqlite_generation(self) -> None:
        """SQLite: the generation columns, index and triggers, where the store lacks them."""
        for logical, column in _SQLITE_GENERATION_COLUMNS:
            table = self._dialect.table(logical)
            have = {r[1] for r in self._conn.execute(f'PRAGMA table_info("{table}")').fetchall()}
            if column not in have:
                self._conn.execute(f'ALTER TABLE "{table}" ADD COLUMN {column} BIGINT NOT NULL DEFAULT 0')
        for statement in _SQLITE_GENERATION:
            self._conn.execute(self._dialect.ddl(statement))

    def _pg_schema_current(self, dimensions: int) -> bool:
        found = self._conn.execute(self._dialect.ddl(
            "SELECT format_type(a.atttypid, a.atttypmod),"
            " EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = a.attrelid AND t.tgname = '{ltm}_stamp'),"
            " (SELECT COUNT(*) FROM pg_attribute c WHERE c.attrelid = a.attrelid AND NOT c.attisdropped"
            f" AND c.attname IN ({', '.join(repr(c) for c, _ in _ADDED_COLUMNS)}))"
            " FROM pg_attribute a WHERE a.attrelid = to_regclass('{ltm}') AND a.attname = 'embedding'")).fetchone()
        # A database of an older release lacks a column added since: not current, so it is added.
        return (found is not None and found[0] == f"vector({dimensions})" and bool(found[1])
                and int(found[2]) == len(_ADDED_COLUMNS))

    def _pg_vector_dimensions(self, dimensions: int) -> None:
        """A database written with an embedder of other dimensions takes the new ones: the old
        vectors are of no use to the new model, so they are cleared (the HNSW index is rebuilt
        with the column) and each scope's rows are embedded again by its first search, as rows of
        another model are on SQLite."""
        found = self._conn.execute(self._dialect.ddl(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = to_regclass('{ltm}') AND attname = 'embedding'")).fetchone()
        wanted = f"vector({dimensions})"
        if found is None or found[0] == wanted:
            return
        log.warning("long-term embeddings change dimensions; clearing the stored vectors to embed them again",
                    extra={"fields": {"from": found[0], "to": wanted}})
        # The generation trigger names the column; it is created again right after.
        self._conn.execute(self._dialect.ddl("DROP TRIGGER IF EXISTS {ltm}_stamp ON {ltm}"))
        self._conn.execute(self._dialect.ddl(f"ALTER TABLE {{ltm}} ALTER COLUMN embedding TYPE {wanted} USING NULL"))

    def ltm_register_scope(self, scope_key: str, agent_name: str, user_id: str, run_name: str, now: float) -> None:
        self._execute(
            "INSERT INTO {ltm_scopes} (tenant, scope_key, agent_name, user_id, run_name, created)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, scope_key) DO NOTHING",
            (self.tenant, scope_key, agent_name, user_id, run_name, now),
        )

    def ltm_scope_keys(self, agent_name: str, user_id: str, run_name: str) -> list[str]:
        sql = "SELECT scope_key FROM {ltm_scopes} WHERE tenant = ?"
        params: list[Any] = [self.tenant]
        for column, value in (("agent_name", agent_name), ("user_id", user_id), ("run_name", run_name)):
            if value:
                sql += f" AND {column} = ?"
                params.append(value)
        return [r[0] for r in self._all(sql + " ORDER BY scope_key{bytewise}", params)]

    def ltm_existing_hashes(self, scope_key: str, hashes: Sequence[str]) -> set[str]:
        if not hashes:
            return set()
        rows = self._all(
            "SELECT content_hash FROM {ltm} WHERE tenant = ? AND scope_key = ? AND deleted = 0"
            f" AND content_hash IN ({placeholders(len(hashes))})",
            (self.tenant, scope_key, *hashes),
        )
        return {r[0] for r in rows}

    def ltm_live_ids_by_hash(self, scope_key: str, hashes: Sequence[str]) -> dict[str, str]:
        if not hashes:
            return {}
        rows = self._all(
            "SELECT content_hash, memory_id FROM {ltm} WHERE tenant = ? AND scope_key = ? AND deleted = 0"
            f" AND content_hash IN ({placeholders(len(hashes))}) ORDER BY memory_id",
            (self.tenant, scope_key, *hashes),
        )
        return {h: m for h, m in reversed(rows)}

    def _values(self, row: LongTermRow) -> tuple[Any, ...]:
        embedding: Any = row.embedding
        if self._pg and embedding is not None:
            embedding = vector_literal(embedding)
        return (
            row.memory_id, row.scope_key, row.agent_name, row.user_id, row.run_name, row.text,
            row.lex_terms, json.dumps(row.metadata, ensure_ascii=False), row.memory_type, row.domain,
            float(row.importance), row.importance_method, row.created, row.updated, row.last_accessed,
            int(row.access_count), row.content_hash, 1 if row.deleted else 0,
            json.dumps(row.source, ensure_ascii=False), row.embedding_model, embedding, int(row.version),
            1 if row.pinned else 0,
        )

    def ltm_insert(self, rows: Sequence[LongTermRow]) -> list[str]:
        # tenant, then the row's own values; PostgreSQL casts the embedding (the 21st of them)
        # and derives the tsvector from the terms. Up to 100 rows per statement: one round
        # trip for a recorded batch instead of one per row.
        marks = ["?"] * (_COUNT + 1)
        names = f"tenant, {_COLUMNS}"
        if self._pg:
            marks[21] = "?::vector"
            marks.append("to_tsvector('simple', ?)")
            names += ", lex"
        one = "(" + ", ".join(marks) + ")"
        inserted: list[str] = []
        for start in range(0, len(rows), 100):
            chunk = rows[start : start + 100]
            params: list[Any] = []
            for row in chunk:
                params += [self.tenant, *self._values(row)]
                if self._pg:
                    params.append(tsvector_terms(row.lex_terms))
            found = self._all(
                f"INSERT INTO {{ltm}} ({names}) VALUES {', '.join([one] * len(chunk))}"
                " ON CONFLICT (tenant, scope_key, content_hash) WHERE deleted = 0 DO NOTHING"
                " RETURNING memory_id",
                params,
            )
            stored = {r[0] for r in found}
            inserted += [row.memory_id for row in chunk if row.memory_id in stored]
        return inserted

    def _rows(self, sql: str, params: Sequence[Any]) -> list[LongTermRow]:
        embedding = "embedding::text" if self._pg else "embedding"
        columns = _COLUMNS.replace("embedding,", f"{embedding},")
        return [self._row(r) for r in self._all(sql.replace("{columns}", columns), params)]

    def _row(self, r: Sequence[Any]) -> LongTermRow:
        embedding = r[20]
        if isinstance(embedding, str):
            embedding = np.asarray(json.loads(embedding), dtype=np.float32).tobytes()
        elif embedding is not None:
            embedding = bytes(embedding)
        return LongTermRow(
            memory_id=r[0], scope_key=r[1], agent_name=r[2], user_id=r[3], run_name=r[4], text=r[5],
            lex_terms=r[6], metadata=json.loads(r[7]), memory_type=r[8], domain=r[9],
            importance=float(r[10]), importance_method=r[11], created=float(r[12]), updated=float(r[13]),
            last_accessed=float(r[14]), access_count=int(r[15]), content_hash=r[16], deleted=bool(r[17]),
            source=json.loads(r[18]), embedding_model=r[19], embedding=embedding, version=int(r[21]),
            pinned=bool(r[22]),
        )

    def ltm_get(self, memory_id: str, *, lock: bool = False) -> LongTermRow | None:
        rows = self._rows(
            "SELECT {columns} FROM {ltm} WHERE tenant = ? AND memory_id = ?" + ("{row_lock}" if lock else ""),
            (self.tenant, memory_id),
        )
        return rows[0] if rows else None

    def ltm_get_many(self, memory_ids: Sequence[str], *, lock: bool = False) -> list[LongTermRow]:
        if not memory_ids:
            return []
        # Locked rows are taken in one order, so writers locking overlapping sets cannot deadlock.
        return self._rows(
            f"SELECT {{columns}} FROM {{ltm}} WHERE tenant = ? AND memory_id IN ({placeholders(len(memory_ids))})"
            + (" ORDER BY memory_id{row_lock}" if lock else ""),
            (self.tenant, *memory_ids),
        )

    def ltm_get_many_unembedded(self, memory_ids: Sequence[str]) -> list[LongTermRow]:
        # PostgreSQL sends a vector as text: parsing 50 of them cost more than the rest of a search.
        if not memory_ids:
            return []
        columns = _COLUMNS.replace(" embedding,", " NULL,")
        rows = self._all(
            f"SELECT {columns} FROM {{ltm}} WHERE tenant = ? AND memory_id IN ({placeholders(len(memory_ids))})",
            (self.tenant, *memory_ids),
        )
        return [self._row(r) for r in rows]

    def ltm_list(self, scope_keys: Sequence[str], limit: int, after: tuple[float, str] | None = None,
                 metadata: Mapping[str, Any] | None = None, offset: int = 0) -> list[LongTermRow]:
        if not scope_keys:
            return []
        if metadata and not self._pg:
            found = self._matching_ids(scope_keys, after, metadata, offset + limit)[offset:]
            rows = {r.memory_id: r for r in self.ltm_get_many(found)}
            return [rows[m] for m in found if m in rows]
        sql, params = self._list_where(scope_keys, after, metadata)
        return self._rows(f"SELECT {{columns}} FROM {{ltm}}{sql} ORDER BY created, memory_id{{bytewise}} LIMIT ? OFFSET ?",
                          [*params, limit, offset])

    def ltm_count(self, scope_keys: Sequence[str], metadata: Mapping[str, Any] | None = None) -> int:
        if not scope_keys:
            return 0
        if metadata and not self._pg:
            return len(self._matching_ids(scope_keys, None, metadata, None))
        sql, params = self._list_where(scope_keys, None, metadata)
        row = self._one(f"SELECT COUNT(*) FROM {{ltm}}{sql}", params)
        return int(row[0]) if row else 0

    def _list_where(self, scope_keys: Sequence[str], after: tuple[float, str] | None,
                    metadata: Mapping[str, Any] | None = None) -> tuple[str, list[Any]]:
        sql = f" WHERE tenant = ? AND scope_key IN ({placeholders(len(scope_keys))}) AND deleted = 0"
        params: list[Any] = [self.tenant, *scope_keys]
        if after is not None:
            sql += " AND (created > ? OR (created = ? AND memory_id{bytewise} > ?))"
            params += [after[0], after[0], after[1]]
        if metadata:
            clause, values = _metadata_clause(metadata)
            sql, params = sql + clause, [*params, *values]
        return sql, params

    def _matching_ids(self, scope_keys: Sequence[str], after: tuple[float, str] | None,
                      metadata: Mapping[str, Any], enough: int | None) -> list[str]:
        """SQLite: the ids, in `ltm_list`'s order, of the memories whose metadata matches (the
        first `enough`, or all). SQLite's JSON functions do not compare as `metadata_matches`
        does (true is 1 there, an object is its text), so the scope is scanned in batches of ids
        and metadata only; the caller reads just the matching rows whole."""
        found: list[str] = []
        while enough is None or len(found) < enough:
            sql, params = self._list_where(scope_keys, after)
            batch = self._all(f"SELECT memory_id, created, metadata_json FROM {{ltm}}{sql}"
                              " ORDER BY created, memory_id{bytewise} LIMIT ?", [*params, _SCAN_BATCH])
            found += [r[0] for r in batch if metadata_matches(json.loads(r[2]), metadata)]
            if len(batch) < _SCAN_BATCH:
                break
            after = (float(batch[-1][1]), batch[-1][0])
        return found if enough is None else found[:enough]

    def ltm_scope_rows(self, scope_key: str) -> list[LongTermRow]:
        return self._rows(
            "SELECT {columns} FROM {ltm} WHERE tenant = ? AND scope_key = ? AND deleted = 0 ORDER BY created, memory_id{bytewise}",
            (self.tenant, scope_key),
        )

    def ltm_scope_generations(self, scope_keys: Sequence[str]) -> dict[str, int]:
        """Each scope's generation (the last row change search reads)."""
        if not scope_keys:
            return {}
        rows = self._all(
            f"SELECT scope_key, generation FROM {{ltm_scopes}} WHERE tenant = ? AND scope_key IN ({placeholders(len(scope_keys))})",
            (self.tenant, *scope_keys),
        )
        return {r[0]: int(r[1]) for r in rows}

    def ltm_scope_live_count(self, scope_key: str) -> int:
        row = self._one("SELECT COUNT(*) FROM {ltm} WHERE tenant = ? AND scope_key = ? AND deleted = 0",
                        (self.tenant, scope_key))
        return int(row[0]) if row else 0

    def ltm_scope_changes(self, scope_key: str, after: int) -> tuple[list[LongTermRow], int]:
        """The rows of one exact scope changed after generation `after`, soft-deleted
        ones included, and the highest generation among them (`after` when none)."""
        embedding = "embedding::text" if self._pg else "embedding"
        columns = _COLUMNS.replace("embedding,", f"{embedding},")
        rows = self._all(
            f"SELECT {columns}, generation FROM {{ltm}} WHERE tenant = ? AND scope_key = ? AND generation > ?"
            " ORDER BY generation",
            (self.tenant, scope_key, after),
        )
        return [self._row(r) for r in rows], max([after, *(int(r[-1]) for r in rows)])

    def ltm_update(self, row: LongTermRow) -> None:
        v = self._values(row)
        embedding_mark = "?::vector" if self._pg else "?"
        lex = ", lex = to_tsvector('simple', ?)" if self._pg else ""
        params: list[Any] = [v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[13], v[16], v[17], v[18], v[19], v[20], v[21],
                             v[22]]
        if self._pg:
            params.append(tsvector_terms(row.lex_terms))
        self._execute(
            "UPDATE {ltm} SET text = ?, lex_terms = ?, metadata_json = ?, memory_type = ?, domain = ?,"
            " importance = ?, importance_method = ?, updated = ?, content_hash = ?, deleted = ?, source_json = ?,"
            f" embedding_model = ?, embedding = {embedding_mark}, version = ?, pinned = ?{lex}"
            " WHERE tenant = ? AND memory_id = ?",
            (*params, self.tenant, row.memory_id),
        )

    def ltm_set_embedding(self, memory_id: str, content_hash: str, embedding: bytes, model: str) -> None:
        mark = "?::vector" if self._pg else "?"
        self._execute(
            f"UPDATE {{ltm}} SET embedding = {mark}, embedding_model = ? WHERE tenant = ? AND memory_id = ? AND content_hash = ?",
            (vector_literal(embedding) if self._pg else embedding, model, self.tenant, memory_id, content_hash),
        )

    def ltm_touch(self, memory_ids: Sequence[str], now: float) -> None:
        if memory_ids:
            self._execute(
                "UPDATE {ltm} SET last_accessed = ?, access_count = access_count + 1"
                f" WHERE tenant = ? AND memory_id IN ({placeholders(len(memory_ids))})",
                (now, self.tenant, *memory_ids),
            )

    def ltm_history_add(self, memory_id: str, event: str, old_text: str | None, new_text: str | None,
                        detail: dict[str, Any], now: float) -> None:
        row = self._one("SELECT MAX(n) FROM {ltm_history} WHERE tenant = ? AND memory_id = ?", (self.tenant, memory_id))
        n = (row[0] or 0) + 1 if row else 1
        self._execute(
            "INSERT INTO {ltm_history} (tenant, memory_id, n, event, old_text, new_text, detail_json, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (self.tenant, memory_id, n, event, old_text, new_text, json.dumps(detail, ensure_ascii=False), now),
        )

    def ltm_history_add_first(self, entries: Sequence[tuple[str, str, str | None, str | None, dict[str, Any], float]]) -> None:
        """The first history entry (n = 1) of each new memory: (memory_id, event, old_text,
        new_text, detail, now). One batch, no lookup of the previous entry."""
        self._many(
            "INSERT INTO {ltm_history} (tenant, memory_id, n, event, old_text, new_text, detail_json, created)"
            " VALUES (?, ?, 1, ?, ?, ?, ?, ?)",
            [(self.tenant, m, event, old, new, json.dumps(detail, ensure_ascii=False), now)
             for m, event, old, new, detail, now in entries],
        )

    def ltm_history(self, memory_id: str, after: int = 0, limit: int | None = None) -> list[LongTermHistoryRow]:
        # The primary key (tenant, memory_id, n) serves the range: a page reads just its rows.
        sql = ("SELECT memory_id, n, event, old_text, new_text, detail_json, created FROM {ltm_history}"
               " WHERE tenant = ? AND memory_id = ? AND n > ? ORDER BY n")
        params: list[Any] = [self.tenant, memory_id, after]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self._all(sql, params)
        return [LongTermHistoryRow(r[0], int(r[1]), r[2], r[3], r[4], json.loads(r[5]), float(r[6])) for r in rows]

    # -- PostgreSQL candidate search ----------------------------------------------------------

    def _where(self, scope_keys: Sequence[str], where: LongTermFilter) -> tuple[str, list[Any]]:
        sql = f" WHERE tenant = ? AND scope_key IN ({placeholders(len(scope_keys))}) AND deleted = 0"
        params: list[Any] = [self.tenant, *scope_keys]
        if where.memory_types:
            sql += f" AND memory_type IN ({placeholders(len(where.memory_types))})"
            params += list(where.memory_types)
        if where.domains:
            sql += f" AND domain IN ({placeholders(len(where.domains))})"
            params += list(where.domains)
        if where.created_after is not None:
            sql += " AND created >= ?"
            params.append(where.created_after)
        if where.created_before is not None:
            sql += " AND created < ?"
            params.append(where.created_before)
        clause, values = _metadata_clause(where.metadata)
        return sql + clause, params + values

    def ltm_dense(self, scope_keys: Sequence[str], vector: bytes, k: int, where: LongTermFilter) -> list[tuple[str, float]]:
        if not scope_keys:
            return []
        # Iterative scans keep reading the HNSW graph until k rows pass the scope filter.
        self._conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        self._conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, int(k) * 2)}")
        literal = vector_literal(vector)
        clause, params = self._where(scope_keys, where)
        rows = self._all(
            f"SELECT memory_id, 1 - (embedding <=> ?::vector) FROM {{ltm}}{clause}"
            " ORDER BY embedding <=> ?::vector LIMIT ?",
            (literal, *params, literal, k),
        )
        return [(r[0], float(r[1])) for r in rows]

    def ltm_lexical(self, scope_keys: Sequence[str], terms: Sequence[str], k: int, where: LongTermFilter) -> list[tuple[str, float]]:
        query = tsquery_text(terms)
        if not scope_keys or not query:
            return []
        clause, params = self._where(scope_keys, where)
        rows = self._all(
            f"SELECT memory_id, ts_rank(lex, q, 1) AS r FROM {{ltm}}, to_tsquery('simple', ?) AS q{clause}"
            " AND lex @@ q ORDER BY r DESC LIMIT ?",
            (query, *params, k),
        )
        return [(r[0], float(r[1])) for r in rows]
