"""TIERED memories' items (`agentscope_memory.short_term.tiered`): one row per item of L1-L3.

- `tiered_items`: the item's tier, kind (message, summary, marker), importance, token count,
  creation time, how often queries returned it, and its body (JSON: the message or summary text
  and the L1 sequence numbers it stands for). Sequence numbers come from the memory's counter
  and are never reused, so they order a tier by age. Every tier is bounded by its token budget,
  so reading a whole tier costs what the budget allows, never what the history holds.
"""

from __future__ import annotations

from typing import Any, Sequence

from agentscope_memory.store.base import TieredRow
from agentscope_memory.store.sql.base import SqlTxBase
from agentscope_memory.store.sql.dialect import placeholders

TIERED_SCHEMA = """
CREATE TABLE IF NOT EXISTS {tiered_items} (
    tenant TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    tier INTEGER NOT NULL,
    kind TEXT NOT NULL,
    importance DOUBLE PRECISION NOT NULL,
    tokens BIGINT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    hits BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, memory_id, seq)
);
CREATE INDEX IF NOT EXISTS {tiered_items}_by_tier ON {tiered_items} (tenant, memory_id, tier, seq);
"""

_COLUMNS = "seq, tier, kind, importance, tokens, created, hits, body"


def _row(r: Sequence[Any]) -> TieredRow:
    return TieredRow(int(r[0]), int(r[1]), str(r[2]), float(r[3]), int(r[4]), float(r[5]), int(r[6]), str(r[7]))


class TieredStatements(SqlTxBase):
    def tiered_insert(self, memory_id: str, rows: Sequence[TieredRow]) -> None:
        self._many(
            f"INSERT INTO {{tiered_items}} (tenant, memory_id, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(self.tenant, memory_id, r.seq, r.tier, r.kind, r.importance, r.tokens, r.created, r.hits, r.body)
             for r in rows],
        )

    def tiered_rows(self, memory_id: str, tier: int, after_seq: int = 0, limit: int | None = None) -> list[TieredRow]:
        sql = (f"SELECT {_COLUMNS} FROM {{tiered_items}} WHERE tenant = ? AND memory_id = ? AND tier = ? AND seq > ?"
               " ORDER BY seq")
        params: list[object] = [self.tenant, memory_id, tier, after_seq]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_row(r) for r in self._all(sql, params)]

    def tiered_totals(self, memory_id: str) -> dict[int, tuple[int, int]]:
        """Per tier: (items, tokens)."""
        rows = self._all(
            "SELECT tier, COUNT(*), COALESCE(SUM(tokens), 0) FROM {tiered_items}"
            " WHERE tenant = ? AND memory_id = ? GROUP BY tier",
            (self.tenant, memory_id),
        )
        return {int(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def tiered_count(self, memory_id: str, tier: int) -> int:
        row = self._one(
            "SELECT COUNT(*) FROM {tiered_items} WHERE tenant = ? AND memory_id = ? AND tier = ?",
            (self.tenant, memory_id, tier),
        )
        return int(row[0])

    def tiered_seq_at(self, memory_id: str, tier: int, index: int) -> int | None:
        row = self._one(
            "SELECT seq FROM {tiered_items} WHERE tenant = ? AND memory_id = ? AND tier = ?"
            " ORDER BY seq LIMIT 1 OFFSET ?",
            (self.tenant, memory_id, tier, index),
        )
        return None if row is None else int(row[0])

    def tiered_present(self, memory_id: str, seqs: Sequence[int]) -> dict[int, int]:
        """seq -> tier of those of `seqs` still stored."""
        if not seqs:
            return {}
        rows = self._all(
            f"SELECT seq, tier FROM {{tiered_items}} WHERE tenant = ? AND memory_id = ? AND seq IN ({placeholders(len(seqs))})",
            (self.tenant, memory_id, *seqs),
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def tiered_delete(self, memory_id: str, seqs: Sequence[int]) -> int:
        if not seqs:
            return 0
        cursor = self._execute(
            f"DELETE FROM {{tiered_items}} WHERE tenant = ? AND memory_id = ? AND seq IN ({placeholders(len(seqs))})",
            (self.tenant, memory_id, *seqs),
        )
        return int(cursor.rowcount)

    def tiered_set_body(self, memory_id: str, seq: int, body: str) -> None:
        self._execute(
            "UPDATE {tiered_items} SET body = ? WHERE tenant = ? AND memory_id = ? AND seq = ?",
            (body, self.tenant, memory_id, seq),
        )

    def tiered_hit(self, memory_id: str, seqs: Sequence[int]) -> None:
        if seqs:
            self._execute(
                f"UPDATE {{tiered_items}} SET hits = hits + 1 WHERE tenant = ? AND memory_id = ?"
                f" AND seq IN ({placeholders(len(seqs))})",
                (self.tenant, memory_id, *seqs),
            )

    def tiered_clear(self, memory_id: str) -> None:
        self._execute("DELETE FROM {tiered_items} WHERE tenant = ? AND memory_id = ?", (self.tenant, memory_id))
