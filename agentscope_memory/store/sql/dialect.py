"""What differs between the SQL databases behind the store, and nothing else.

Statements are written once, in this package's modules, with `?` parameters and table
names in braces (`{memories}`); a `Dialect` renders them for its database. Everything else is
common SQL both SQLite (3.35+) and PostgreSQL understand, upserts included
(`INSERT ... ON CONFLICT (...) DO UPDATE SET col = excluded.col`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from agentscope_memory.store.base import Row

# Every table of the store, by its logical name. A database's table is `prefix + name`.
TABLES = (
    "memories", "list_heads", "items", "kv", "requests", "meta", "jobs", "agent_states",
    "agent_state_items",
    # long-term memory (`long_term.py`)
    "ltm", "ltm_scopes", "ltm_history",
    # parent/child scopes (`scopes.py`)
    "scope_links", "scope_locks", "scope_marks", "scope_ltm_keys",
    # lifecycle scheduler: one row per scheduled run, so replicas run each once
    "lifecycle_runs",
    # shared memory pools (`pool.py`)
    "pools", "pool_entries", "pool_events",
    # TIERED memories' items (`tiered.py`)
    "tiered_items",
)


@dataclass(frozen=True)
class Dialect:
    name: str
    # PostgreSQL's tables share a database with other software, hence a prefix (`asm_`).
    table_prefix: str
    # The driver's parameter marker: `?` (sqlite3) or `%s` (psycopg).
    placeholder: str
    # How the items of a list are stored: the columns after `seq` in `items`, the parameter rows
    # that insert a batch, `(tenant, memory_id, list_name, seq, *item_columns)`, and the rows
    # read back, `(seq, *item_columns)`, as `Row`s. Whole batches, not an item at a time: a
    # function call per item shows in the time a 100-message read takes.
    item_columns: tuple[str, ...]
    item_params: Callable[[str, str, str, int, Sequence[str | bytes]], list[tuple[Any, ...]]]
    decode_rows: Callable[[list[Sequence[Any]]], list[Row]]
    # Appended to the first read of a memory in a write transaction, so that concurrent writers
    # of one memory queue up behind each other ("" where writers are serialised anyway).
    row_lock: str
    # Appended to the query that picks jobs to claim, so that concurrent claimers skip each
    # other's rows instead of waiting for them or taking them twice.
    claim_lock: str
    is_unique_violation: Callable[[BaseException], bool]
    # Put after a text column (`{bytewise}`) that is compared or ordered, for code point (UTF-8
    # byte) order on every database: SQLite's own, and what the Python side and the other
    # store give; PostgreSQL follows the database's collation otherwise (`en_US.UTF-8` puts
    # `a` before `B` before `_x`), so a list's order would depend on how the database was made.
    bytewise: str = ""
    # How many items the JSON array in a key/value's `value` column holds, counted by the
    # database (`{value_array_length}`), so a listing of large values never reads them.
    value_array_length: str = "json_array_length(value)"
    # Rendered statements, by source text. Per store instance, filled on first use (from any of
    # the store's threads: a racing first use renders the same text twice, harmlessly).
    _rendered: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def table(self, name: str) -> str:
        return self.table_prefix + name

    def ddl(self, text: str) -> str:
        """`text` with its `{table}` names filled in (no parameters: DDL runs as a script)."""
        return text.format_map({name: self.table(name) for name in TABLES})

    def sql(self, text: str) -> str:
        """A statement ready for the driver: table names, item columns and locking clauses
        (`{row_lock}`, `{claim_lock}`) filled in, `?` replaced by the driver's placeholder."""
        try:
            return self._rendered[text]
        except KeyError:
            rendered = self._rendered[text] = self._render(text)
            return rendered

    def _render(self, text: str) -> str:
        names: dict[str, str] = {name: self.table(name) for name in TABLES}
        names["item_columns"] = ", ".join(self.item_columns)
        names["item_values"] = ", ".join("?" * len(self.item_columns))
        names["row_lock"] = self.row_lock
        names["claim_lock"] = self.claim_lock
        names["bytewise"] = self.bytewise
        names["value_array_length"] = self.value_array_length
        rendered = text.format_map(names)
        if self.placeholder != "?":
            # psycopg reads `%` as the start of a placeholder; a literal one is `%%`.
            rendered = rendered.replace("%", "%%").replace("?", self.placeholder)
        return rendered


def placeholders(count: int) -> str:
    """`?, ?, ?` for an `IN (...)` list of `count` values."""
    return ", ".join("?" * count)
