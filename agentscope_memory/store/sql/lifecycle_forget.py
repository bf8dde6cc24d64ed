"""What forgetting, restore, purge and the lifecycle scheduler read and write."""

from __future__ import annotations

from typing import Any, Sequence

from agentscope_memory.store.base import LongTermRow
from agentscope_memory.store.sql.dialect import placeholders
from agentscope_memory.store.sql.long_term import LongTermStatements

LIFECYCLE_SCHEMA = """
CREATE TABLE IF NOT EXISTS {lifecycle_runs} (
    tenant TEXT NOT NULL,
    job TEXT NOT NULL,
    slot BIGINT NOT NULL,
    job_id TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, job, slot)
);
"""


class LifecycleForgetStatements(LongTermStatements):
    def ltm_scope_page(self, scope_key: str, after: tuple[float, str] | None, limit: int) -> list[LongTermRow]:
        """Live memories of one exact scope in (created, memory_id) order, after `after`."""
        sql = "SELECT {columns} FROM {ltm} WHERE tenant = ? AND scope_key = ? AND deleted = 0"
        params: list[Any] = [self.tenant, scope_key]
        if after is not None:
            sql += " AND (created > ? OR (created = ? AND memory_id{bytewise} > ?))"
            params += [after[0], after[0], after[1]]
        return self._rows(sql + " ORDER BY created, memory_id{bytewise} LIMIT ?", [*params, int(limit)])

    def ltm_tenant_scope_keys(self, after: str, limit: int) -> list[str]:
        """This tenant's exact scopes, in key order, after `after`."""
        rows = self._all("SELECT scope_key FROM {ltm_scopes} WHERE tenant = ? AND scope_key{bytewise} > ?"
                         " ORDER BY scope_key{bytewise} LIMIT ?",
                         (self.tenant, after, int(limit)))
        return [str(r[0]) for r in rows]

    def ltm_tenant_scopes(self, after: str, limit: int) -> list[tuple[str, str, str, str]]:
        """This tenant's exact scopes as (key, agent, user, run), in key order, after `after`."""
        rows = self._all("SELECT scope_key, agent_name, user_id, run_name FROM {ltm_scopes} WHERE tenant = ?"
                         " AND scope_key{bytewise} > ? ORDER BY scope_key{bytewise} LIMIT ?", (self.tenant, after, int(limit)))
        return [(str(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]

    def ltm_tenants(self) -> list[str]:
        """Every tenant that has long-term memories (a NO_TENANT transaction: the scheduler's)."""
        # A new store has no long-term tables until long-term memory first opens (its embedder
        # loading at start, or not preloaded): no tenant has memories yet. The scheduler's ticks
        # failed meanwhile, each logging an error with a traceback.
        if not self._ltm_tables_exist():
            return []
        return [str(r[0]) for r in self._all("SELECT DISTINCT tenant{bytewise} FROM {ltm_scopes} ORDER BY tenant{bytewise}")]

    def _ltm_tables_exist(self) -> bool:
        if self._pg:
            found = self._conn.execute(self._dialect.ddl("SELECT to_regclass('{ltm_scopes}')")).fetchone()
            return found is not None and found[0] is not None
        return self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                  (self._dialect.table("ltm_scopes"),)).fetchone() is not None

    def ltm_deleted_before(self, before: float, limit: int) -> list[LongTermRow]:
        """Soft-deleted memories of this tenant whose deletion is older than `before`."""
        return self._rows(
            "SELECT {columns} FROM {ltm} WHERE tenant = ? AND deleted = 1 AND updated < ? ORDER BY updated, memory_id{bytewise} LIMIT ?",
            (self.tenant, before, int(limit)))

    def ltm_purge(self, memory_ids: Sequence[str]) -> list[str]:
        """Deletes for good those of `memory_ids` that are soft-deleted; returns their ids.
        Their history stays (the audit trail outlives the memory)."""
        if not memory_ids:
            return []
        marks = placeholders(len(memory_ids))
        rows = self._all(f"SELECT memory_id FROM {{ltm}} WHERE tenant = ? AND deleted = 1 AND memory_id IN ({marks})",
                         (self.tenant, *memory_ids))
        gone = [str(r[0]) for r in rows]
        if gone:
            self._execute(f"DELETE FROM {{ltm}} WHERE tenant = ? AND memory_id IN ({placeholders(len(gone))})",
                          (self.tenant, *gone))
        return gone

    def lifecycle_claim_run(self, job: str, slot: int, job_id: str, now: float) -> bool:
        """Records the scheduled run (`job`, `slot`) of this tenant unless it is recorded already:
        the replica whose insert lands queues the job, the others see False."""
        cursor = self._execute(
            "INSERT INTO {lifecycle_runs} (tenant, job, slot, job_id, created) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (tenant, job, slot) DO NOTHING", (self.tenant, job, int(slot), job_id, now))
        return bool(cursor.rowcount)

    def lifecycle_prune_runs(self, job: str, before_slot: int) -> int:
        """Deletes this tenant's records of `job`'s runs in slots before `before_slot`; returns how many."""
        cursor = self._execute("DELETE FROM {lifecycle_runs} WHERE tenant = ? AND job = ? AND slot < ?",
                               (self.tenant, job, int(before_slot)))
        return int(cursor.rowcount)

    def lifecycle_runs(self, job: str, limit: int) -> list[tuple[int, str, float]]:
        """The newest scheduled runs of `job` for this tenant: (slot, job id, when)."""
        rows = self._all("SELECT slot, job_id, created FROM {lifecycle_runs} WHERE tenant = ? AND job = ?"
                         " ORDER BY slot DESC LIMIT ?", (self.tenant, job, int(limit)))
        return [(int(r[0]), str(r[1]), float(r[2])) for r in rows]
