"""Every table a store keeps, the key it is copied in order of, and the columns that differ
between SQLite and PostgreSQL (each converted here, the rest copied as they are)."""

from __future__ import annotations

import json
from typing import Any, Callable, Literal

import numpy as np

from agentscope_memory.store.sql.long_term import tsvector_terms, vector_literal

Kind = Literal["sqlite", "postgres"]

# (logical table, primary key) in copy order. `ltm_scopes` goes before `ltm`: on PostgreSQL
# inserting a long-term row stamps it from its scope's row. `meta` is copied last, apart
# (`copy.py`): it describes the database, and a fresh target already holds its schema version.
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("memories", ("tenant", "memory_id")),
    ("list_heads", ("tenant", "memory_id", "list_name")),
    ("items", ("tenant", "memory_id", "list_name", "seq")),
    ("kv", ("tenant", "memory_id", "key")),
    ("requests", ("tenant", "memory_id", "request_id")),
    ("jobs", ("job_id",)),
    ("agent_states", ("tenant", "user_id", "session_id", "kind", "key")),
    ("agent_state_items", ("tenant", "user_id", "session_id", "key", "idx")),
    ("ltm_scopes", ("tenant", "scope_key")),
    ("ltm", ("tenant", "memory_id")),
    ("ltm_history", ("tenant", "memory_id", "n")),
    ("scope_links", ("tenant", "space", "child")),
    ("scope_locks", ("tenant", "space")),
    ("scope_marks", ("tenant", "memory_id", "list_name", "seq")),
    ("scope_ltm_keys", ("tenant", "scope_key")),
    ("lifecycle_runs", ("tenant", "job", "slot")),
    ("pools", ("tenant", "pool_id")),
    ("pool_entries", ("tenant", "pool_id", "entry_key")),
    ("pool_events", ("tenant", "pool_id", "seq")),
    ("tiered_items", ("tenant", "memory_id", "seq")),
)

# Columns only one database has, derived there from the others: PostgreSQL's list items say
# whether their bytes are text, its long-term rows keep their lexical terms as a tsvector, and
# its generation stamps are set by its own trigger (`sql/long_term.py`).
DERIVED = {("items", "is_text"), ("ltm", "lex"), ("ltm", "generation"), ("ltm_scopes", "generation")}


def select_expression(kind: Kind, table: str, column: str) -> str:
    # pgvector's text form, which the driver reads without pgvector's adapter.
    if kind == "postgres" and (table, column) == ("ltm", "embedding"):
        return "embedding::text"
    return column


def insert_mark(kind: Kind, table: str, column: str) -> str:
    if kind == "postgres" and (table, column) == ("ltm", "embedding"):
        return "?::vector"
    if kind == "postgres" and (table, column) == ("ltm", "lex"):
        return "to_tsvector('simple', ?)"
    return "?"


def embedding_bytes(value: Any) -> bytes | None:
    """A stored embedding as float32 bytes, from either database's form."""
    if value is None:
        return None
    if isinstance(value, str):
        return np.asarray(json.loads(value), dtype=np.float32).tobytes()
    return bytes(value)


Reader = Callable[[dict[str, Any]], Any]


def column_reader(source: Kind, target: Kind, table: str, column: str, source_columns: list[str]) -> Reader | None:
    """How the target's `column` is filled from a source row (by column name), or None when the
    source cannot fill it."""
    if table == "items" and column == "is_text":
        return lambda row: row["is_text"] if "is_text" in row else isinstance(row["data"], str)
    if table == "items" and column == "data":
        if target == "postgres":
            return lambda row: row["data"].encode("utf-8") if isinstance(row["data"], str) else bytes(row["data"])
        if source == "postgres":
            return lambda row: bytes(row["data"]).decode("utf-8") if row["is_text"] else bytes(row["data"])
    if table == "ltm" and column == "embedding":
        if target == "postgres":
            return lambda row: _literal(embedding_bytes(row["embedding"]))
        return lambda row: embedding_bytes(row["embedding"])
    if table == "ltm" and column == "lex":
        return lambda row: tsvector_terms(row["lex_terms"])
    if column in source_columns:
        return lambda row: row[column]
    if (table, column) == ("ltm", "pinned"):
        # A source of a release before pinning: none of its memories is pinned.
        return lambda row: 0
    return None


def _literal(vector: bytes | None) -> str | None:
    return None if vector is None else vector_literal(vector)
