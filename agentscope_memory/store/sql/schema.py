"""Tables written once for every SQL database (added after the first release).

The first tables (memories, lists, key/values, requests) predate this module and keep the
per-database definitions in `sqlite.py` and `postgres.py`, so existing databases stay exactly as
they are. New tables go here, in types both databases read the same way: SQLite maps `BIGINT` to
an integer and `DOUBLE PRECISION` to a real column. Every statement is `IF NOT EXISTS` (or does
nothing when already done): the schema is applied at every start, and never destroys anything.
"""

from __future__ import annotations

from agentscope_memory.store.base import StoreOpenError

# The schema this code writes; recorded in `meta` so later versions can tell what they opened.
SCHEMA_VERSION = "1"


def check_schema_version(stored: str | None, where: str) -> None:
    """Refuses a database a newer version wrote: this code does not know its tables, and
    writing to it could lose what the newer version keeps there."""
    if stored is None or not stored.isdigit() or int(stored) <= int(SCHEMA_VERSION):
        return
    raise StoreOpenError(
        f"{where} has schema version {stored}, newer than this server's {SCHEMA_VERSION}:"
        " it was written by a newer agentscope-memory; run that version (or a newer one) on it")

SHARED_SCHEMA = """
CREATE TABLE IF NOT EXISTS {meta} (
    key TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO {meta} (key, value) VALUES ('schema_version', '%s') ON CONFLICT (key) DO NOTHING;

CREATE TABLE IF NOT EXISTS {jobs} (
    job_id TEXT NOT NULL PRIMARY KEY,
    tenant TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload_json TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    run_after DOUBLE PRECISION NOT NULL,
    lease_owner TEXT,
    lease_until DOUBLE PRECISION,
    last_error TEXT,
    created DOUBLE PRECISION NOT NULL,
    updated DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS {jobs}_pending ON {jobs} (run_after) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS {jobs}_leased ON {jobs} (lease_until) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS {jobs}_by_tenant ON {jobs} (tenant, created);

-- AgentScope-Java 2.x agent state (store/sql/agent_state.py): one head row per value or list,
-- and a list's items by index.
CREATE TABLE IF NOT EXISTS {agent_states} (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    version BIGINT NOT NULL,
    length BIGINT NOT NULL,
    size BIGINT NOT NULL,
    update_time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, user_id, session_id, kind, key)
);
-- The tombstones of deleted keys, for pruning them (agent_state.py); keyed by `kind` alone,
-- which no write changes, so PostgreSQL still updates a live row in place (HOT): an index on
-- `update_time` would cost every state write an index entry.
CREATE INDEX IF NOT EXISTS {agent_states}_tombstones ON {agent_states} (kind)
    WHERE kind IN ('deleted value', 'deleted list');
-- The slots detached from a 1.x memory, by that memory's id (the session id), so deleting the
-- memory drops them (`SqlTx.delete_memory`) without reading the tenant's other state rows.
CREATE INDEX IF NOT EXISTS {agent_states}_detached ON {agent_states} (tenant, session_id)
    WHERE kind = 'detached';
CREATE TABLE IF NOT EXISTS {agent_state_items} (
    tenant TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    key TEXT NOT NULL,
    idx BIGINT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (tenant, user_id, session_id, key, idx)
);
""" % SCHEMA_VERSION

# Parent/child scopes (store/sql/scopes.py).
from agentscope_memory.store.sql.scopes import SCOPES_SCHEMA  # noqa: E402

SHARED_SCHEMA += SCOPES_SCHEMA
from agentscope_memory.store.sql.lifecycle_forget import LIFECYCLE_SCHEMA  # noqa: E402

SHARED_SCHEMA += LIFECYCLE_SCHEMA
from agentscope_memory.store.sql.pool import POOL_SCHEMA  # noqa: E402

SHARED_SCHEMA += POOL_SCHEMA
from agentscope_memory.store.sql.tiered import TIERED_SCHEMA  # noqa: E402

SHARED_SCHEMA += TIERED_SCHEMA
