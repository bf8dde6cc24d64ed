"""The durable job queue (see `agentscope_memory.jobs` for the runner that drives it).

A job is `pending` until a runner claims it; the claim makes it `running`, leased to that runner
until `lease_until`, and counts an attempt. The runner then deletes it (done), sets it pending
again with a later `run_after` (retry), or marks it `dead` (kept, with its last error). A
running job whose lease ran out is claimable again: its runner is presumed dead.

A claim is identified by (job_id, lease_owner, attempts): settling checks all three, so a runner
that lost its lease cannot settle the claim of the runner that took the job over.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from agentscope_memory.store.base import JOB_DEAD, JOB_PENDING, JOB_RUNNING, JobRecord
from agentscope_memory.store.sql.base import SqlTxBase
from agentscope_memory.store.sql.dialect import placeholders

_JOB_COLUMNS = (
    "job_id, tenant, kind, payload_json, state, attempts, run_after, lease_owner, lease_until,"
    " last_error, created, updated"
)

# Claimable: pending and due, or running on a lease that ran out.
_CLAIMABLE = (
    f"((state = '{JOB_PENDING}' AND run_after <= ?) OR (state = '{JOB_RUNNING}' AND lease_until <= ?))"
)

# The claim this transaction's runner holds.
_OURS = f"job_id = ? AND state = '{JOB_RUNNING}' AND lease_owner = ? AND attempts = ?"


class JobStatements(SqlTxBase):
    # -- tenant-scoped ----------------------------------------------------------------------

    def job_add(
        self, job_id: str, kind: str, payload: dict[str, Any], run_after: float, now: float
    ) -> None:
        self._execute(
            f"INSERT INTO {{jobs}} ({_JOB_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, 0, ?, NULL, NULL, NULL, ?, ?)",
            (job_id, self.tenant, kind, json.dumps(payload, ensure_ascii=False), JOB_PENDING,
             run_after, now, now),
        )

    def job_list(self, state: str | None = None, kind: str | None = None) -> list[JobRecord]:
        where, params = "tenant = ?", [self.tenant]
        if state is not None:
            where, params = where + " AND state = ?", params + [state]
        if kind is not None:
            where, params = where + " AND kind = ?", params + [kind]
        rows = self._all(
            f"SELECT {_JOB_COLUMNS} FROM {{jobs}} WHERE {where} ORDER BY created, job_id{{bytewise}}", params
        )
        return [_job_record(r) for r in rows]

    def job_done(self, job_id: str, owner: str, attempts: int) -> bool:
        cursor = self._execute(
            f"DELETE FROM {{jobs}} WHERE tenant = ? AND {_OURS}",
            (self.tenant, job_id, owner, attempts),
        )
        return bool(cursor.rowcount > 0)

    def job_retry(
        self, job_id: str, owner: str, attempts: int, run_after: float, error: str, now: float
    ) -> bool:
        cursor = self._execute(
            "UPDATE {jobs} SET state = ?, run_after = ?, lease_owner = NULL, lease_until = NULL,"
            f" last_error = ?, updated = ? WHERE tenant = ? AND {_OURS}",
            (JOB_PENDING, run_after, error, now, self.tenant, job_id, owner, attempts),
        )
        return bool(cursor.rowcount > 0)

    def job_dead(self, job_id: str, owner: str, attempts: int, error: str, now: float) -> bool:
        cursor = self._execute(
            "UPDATE {jobs} SET state = ?, lease_owner = NULL, lease_until = NULL,"
            f" last_error = ?, updated = ? WHERE tenant = ? AND {_OURS}",
            (JOB_DEAD, error, now, self.tenant, job_id, owner, attempts),
        )
        return bool(cursor.rowcount > 0)

    # -- cross-tenant -----------------------------------------------------------------------

    def job_claim(
        self, owner: str, kinds: Sequence[str], now: float, lease_until: float, limit: int
    ) -> list[JobRecord]:
        if not kinds or limit <= 0:
            return []
        # The chosen ids are materialised first: PostgreSQL then picks and locks them exactly
        # once, however it plans the update (a re-scanned SKIP LOCKED subquery could pick more).
        rows = self._all(
            "WITH chosen AS MATERIALIZED ("
            f" SELECT job_id FROM {{jobs}} WHERE {_CLAIMABLE} AND kind IN ({placeholders(len(kinds))})"
            " ORDER BY run_after LIMIT ?{claim_lock})"
            " UPDATE {jobs} SET state = ?, attempts = attempts + 1, lease_owner = ?,"
            " lease_until = ?, updated = ? WHERE job_id IN (SELECT job_id FROM chosen)"
            f" RETURNING {_JOB_COLUMNS}",
            (now, now, *kinds, limit, JOB_RUNNING, owner, lease_until, now),
        )
        return sorted((_job_record(r) for r in rows), key=lambda j: (j.run_after, j.job_id))

    def job_renew(
        self, owner: str, job_ids: Sequence[str], lease_until: float, now: float
    ) -> list[str]:
        if not job_ids:
            return []
        rows = self._all(
            "UPDATE {jobs} SET lease_until = ?, updated = ?"
            f" WHERE state = ? AND lease_owner = ? AND job_id IN ({placeholders(len(job_ids))})"
            " RETURNING job_id",
            (lease_until, now, JOB_RUNNING, owner, *job_ids),
        )
        return [r[0] for r in rows]

    def job_release(self, owner: str, job_ids: Sequence[str], now: float) -> int:
        if not job_ids:
            return 0
        cursor = self._execute(
            "UPDATE {jobs} SET state = ?, attempts = attempts - 1, run_after = ?,"
            " lease_owner = NULL, lease_until = NULL, updated = ?"
            f" WHERE state = ? AND lease_owner = ? AND job_id IN ({placeholders(len(job_ids))})",
            (JOB_PENDING, now, now, JOB_RUNNING, owner, *job_ids),
        )
        return int(cursor.rowcount)

    def job_next_due(self, kinds: Sequence[str]) -> float | None:
        if not kinds:
            return None
        # States are literals, as in the partial indexes' conditions, so the planners use them.
        among = f"kind IN ({placeholders(len(kinds))})"
        row = self._one(
            f"SELECT (SELECT min(run_after) FROM {{jobs}} WHERE state = '{JOB_PENDING}' AND {among}),"
            f" (SELECT min(lease_until) FROM {{jobs}} WHERE state = '{JOB_RUNNING}' AND {among})",
            (*kinds, *kinds),
        )
        times = [float(t) for t in row if t is not None] if row else []
        return min(times) if times else None


def _job_record(row: Sequence[Any]) -> JobRecord:
    (job_id, tenant, kind, payload_json, state, attempts, run_after, lease_owner, lease_until,
     last_error, created, updated) = row
    return JobRecord(
        job_id=job_id,
        tenant=tenant,
        kind=kind,
        payload=json.loads(payload_json),
        state=state,
        attempts=int(attempts),
        run_after=float(run_after),
        lease_owner=lease_owner,
        lease_until=None if lease_until is None else float(lease_until),
        last_error=last_error,
        created=float(created),
        updated=float(updated),
    )
