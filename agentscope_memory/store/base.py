"""The storage protocol every backend implements.

Memory logic talks to storage through `Tx`, a synchronous view of one tenant inside one
transaction: everything a callback does commits together or not at all. Callbacks run on the
backend's worker thread, so they must not await or do network I/O; slow work (an LLM call)
happens outside, followed by a second transaction that re-checks `version`.

A few `Tx` methods are not scoped to the transaction's tenant (the `meta` table, `kv_scan` and
the job queue's claiming and lease bookkeeping): they serve process-wide machinery (migrations,
the job runner) that works for every tenant at once. Their docstrings say so. A transaction that
only uses them may pass `NO_TENANT` to `Store.run`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Protocol, Sequence, TypeVar

T = TypeVar("T")

class StoreOpenError(Exception):
    """The configured store cannot be used (not a database, written by a newer version); the
    message says which store, why, and what to do. Raised when the store is opened."""


# The tenant argument of a transaction that only touches cross-tenant tables.
NO_TENANT = ""

# States of a queued job.
JOB_PENDING = "pending"
JOB_RUNNING = "running"
JOB_DEAD = "dead"
JOB_STATES = (JOB_PENDING, JOB_RUNNING, JOB_DEAD)


@dataclass
class MemoryRecord:
    """One memory's row: what it is, not what it holds."""

    memory_id: str
    kind: str
    config_json: str = "{}"
    labels: dict[str, str] = field(default_factory=dict)
    create_time: float = 0.0
    update_time: float = 0.0
    version: int = 0


@dataclass(frozen=True)
class Row:
    """One item of a stored list. `seq` grows within a (memory, list) and is never reused."""

    seq: int
    # A message is its serialized `Msg` proto (`store.codec.encode_msg`); other lists may
    # hold JSON text.
    data: str | bytes


@dataclass
class PoolEntryRow:
    """One entry of a shared memory pool (`agentscope_memory.pool`)."""

    pool_id: str
    key: str
    content_json: str
    version: int
    created_by: str
    updated_by: str
    created_at: float
    updated_at: float
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolEventRow:
    """One write or delete of a pool, by the pool's sequence number."""

    pool_id: str
    seq: int
    event_type: str
    key: str
    version: int
    writer: str
    created_at: float


@dataclass(frozen=True)
class RequestRecord:
    """The outcome of an idempotent request, kept so a retry can be answered without redoing it."""

    fingerprint: str
    result_json: str


class KvEntry(NamedTuple):
    """One key/value row found by a cross-tenant `kv_scan`."""

    tenant: str
    memory_id: str
    key: str
    value: str


@dataclass(frozen=True)
class JobRecord:
    """One row of the job queue (what `JobRunner.list_jobs` returns as `JobInfo`).

    `attempts` counts the runs started so far, including one in progress. A pending job becomes
    due at `run_after`; a running one is its `lease_owner`'s until `lease_until`, after which any
    runner may claim it again (its owner is presumed dead).
    """

    job_id: str
    tenant: str
    kind: str
    payload: dict[str, Any]
    state: str
    attempts: int
    run_after: float
    lease_owner: str | None
    lease_until: float | None
    last_error: str | None
    created: float
    updated: float


@dataclass(frozen=True)
class StateHead:
    """A stored value's or list's bookkeeping."""

    version: int
    length: int
    size: int
    update_time: float


@dataclass(frozen=True)
class StateWrite:
    """The outcome of a conditional write: when not `ok`, `version` and `length` are the stored
    ones that made the condition fail (0 when absent) and nothing changed."""

    ok: bool
    version: int
    length: int


@dataclass
class LongTermRow:
    """One long-term memory as stored (`store/sql/long_term.py`). `scope_key` names its exact
    (agent, user, run) within the tenant; `embedding` is float32 little-endian bytes (or None
    before it is embedded); `lex_terms` are the lexical leg's terms, space-separated."""

    memory_id: str
    scope_key: str
    agent_name: str
    user_id: str
    run_name: str
    text: str
    lex_terms: str
    metadata: dict[str, Any] = field(default_factory=dict)
    # message, fact, reflection or summary
    memory_type: str = "message"
    domain: str = ""
    importance: float = 0.5
    # llm, heuristic or default (not assessed yet)
    importance_method: str = "default"
    created: float = 0.0
    updated: float = 0.0
    last_accessed: float = 0.0
    access_count: int = 0
    content_hash: str = ""
    deleted: bool = False
    # Where it came from: {"memory_ids": [...], "message_ids": [...]}
    source: dict[str, Any] = field(default_factory=dict)
    embedding_model: str = ""
    embedding: bytes | None = None
    version: int = 1
    # A user's "remember this for ever": never forgotten, never decays in ranking, never merged
    # or reflected away (only an explicit delete removes it).
    pinned: bool = False


@dataclass(frozen=True)
class LongTermHistoryRow:
    """One change of a long-term memory, oldest first by `n`."""

    memory_id: str
    n: int
    event: str
    old_text: str | None
    new_text: str | None
    detail: dict[str, Any]
    created: float


@dataclass(frozen=True)
class LongTermFilter:
    """Which memories of the chosen scopes a candidate query may return (empty = any)."""

    memory_types: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    created_after: float | None = None
    created_before: float | None = None
    # Every key must be present in the memory's metadata with an equal value.
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TieredRow:
    """One item of a TIERED memory's L1-L3 (`store/sql/tiered.py`); `body` is JSON."""

    seq: int
    tier: int
    kind: str
    importance: float
    tokens: int
    created: float
    hits: int
    body: str


class Tx(Protocol):
    tenant: str

    def get_memory(self, memory_id: str) -> MemoryRecord | None: ...
    def insert_memory(self, record: MemoryRecord) -> None:
        """Raises `AlreadyExistsError` if the id is taken (the transaction stays usable)."""
        ...
    def touch_memory(self, memory_id: str) -> int:
        """Bump the memory's version (every change of what it holds does: etags name versions)."""
        ...
    def delete_memory(self, memory_id: str) -> None: ...
    def changed_memories(self) -> set[str]:
        """The memories this transaction created, touched or deleted so far."""
        ...
    def list_memories(self, after_id: str, limit: int) -> list[MemoryRecord]: ...

    def append(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None: ...
    def read(
        self, memory_id: str, list_name: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Row]: ...
    def length(self, memory_id: str, list_name: str) -> int: ...
    def next_seq(self, memory_id: str, list_name: str) -> int:
        """The seq the list's next appended item gets. It never decreases (deletes and clears keep
        it; only deleting the memory resets it), so every item with a larger seq than
        `next_seq() - 1` read earlier was appended after that read."""
        ...
    def delete_at(self, memory_id: str, list_name: str, index: int) -> bool: ...
    def delete_seqs(self, memory_id: str, list_name: str, seqs: Sequence[int]) -> int:
        """Deletes the items with these seqs (those that exist); returns how many it deleted."""
        ...
    def update_items(self, memory_id: str, list_name: str, items: Sequence[tuple[int, str | bytes]]) -> None:
        """Replaces the data of existing items (seq, data) in place: their seqs and order stay."""
        ...
    def clear(self, memory_id: str, list_name: str) -> None: ...
    def replace(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None: ...

    def kv_get(self, memory_id: str, key: str) -> str | None: ...
    def kv_put(self, memory_id: str, key: str, value: str) -> None: ...
    def kv_delete(self, memory_id: str, key: str) -> None: ...
    def kv_keys(self, memory_id: str, prefix: str = "") -> list[str]: ...
    def kv_array_lengths(self, memory_id: str, prefix: str, after_key: str, limit: int) -> list[tuple[str, int]]:
        """A page of the keys starting with `prefix` and ordered after `after_key` (code point
        order), at most `limit`, each with how many items its value holds, a JSON array: the
        database counts them, the values are never read."""
        ...
    def kv_count(self, memory_id: str, prefix: str = "") -> int:
        """How many keys start with `prefix`."""
        ...
    def kv_scan(self, prefix: str) -> list[KvEntry]:
        """Cross-tenant: every key starting with `prefix`, of every memory of every tenant,
        ordered by (tenant, memory_id, key). For one-off migrations; it reads the whole table."""
        ...

    def request_get(self, memory_id: str, request_id: str) -> RequestRecord | None: ...
    def request_put(self, memory_id: str, request_id: str, record: RequestRecord) -> None: ...

    def meta_get(self, key: str) -> str | None:
        """Cross-tenant: a value of the global `meta` table (schema version, migration markers)."""
        ...
    def meta_put(self, key: str, value: str) -> None:
        """Cross-tenant: set a value of the global `meta` table."""
        ...
    def meta_setdefault(self, key: str, value: str) -> str:
        """Cross-tenant: the `meta` value of `key`, set to `value` first if it has none."""
        ...

    # -- long-term memory (see agentscope_memory.long_term.hybrid) ---------------------------
    # Tenant-scoped, except `ltm_ensure_schema`.
    def ltm_ensure_schema(self, dimensions: int) -> None:
        """Cross-tenant: create the long-term tables (the dense column needs the embedder's
        dimensions on PostgreSQL). Idempotent."""
        ...
    def ltm_register_scope(self, scope_key: str, agent_name: str, user_id: str, run_name: str, now: float) -> None: ...
    def ltm_scope_keys(self, agent_name: str, user_id: str, run_name: str) -> list[str]:
        """The exact scopes a (possibly broader) scope covers: every non-empty field equal."""
        ...
    def ltm_existing_hashes(self, scope_key: str, hashes: Sequence[str]) -> set[str]: ...
    def ltm_live_ids_by_hash(self, scope_key: str, hashes: Sequence[str]) -> dict[str, str]:
        """The id of the live memory of the scope holding each of `hashes` (those held only)."""
        ...
    def ltm_insert(self, rows: Sequence[LongTermRow]) -> list[str]:
        """Insert rows whose text the scope does not hold yet (live); returns the ids inserted."""
        ...
    def ltm_get(self, memory_id: str, *, lock: bool = False) -> LongTermRow | None: ...
    def ltm_get_many(self, memory_ids: Sequence[str], *, lock: bool = False) -> list[LongTermRow]:
        """`lock`: for a read-modify-write (PostgreSQL: FOR UPDATE, in memory_id order)."""
        ...
    def ltm_get_many_unembedded(self, memory_ids: Sequence[str]) -> list[LongTermRow]:
        """`ltm_get_many` without the embeddings (None): a search's rows, whose vectors nobody reads."""
        ...
    def ltm_list(self, scope_keys: Sequence[str], limit: int, after: tuple[float, str] | None = None,
                 metadata: Mapping[str, Any] | None = None, offset: int = 0) -> list[LongTermRow]:
        """Live memories by (created, id), after `after`, the first `offset` skipped; with
        `metadata`, only those holding every key with an equal value (`long_term/metadata_filter.py`),
        filtered before the offset and the limit."""
        ...
    def ltm_count(self, scope_keys: Sequence[str], metadata: Mapping[str, Any] | None = None) -> int:
        """How many memories `ltm_list` would give with no limit."""
        ...
    def ltm_scope_rows(self, scope_key: str) -> list[LongTermRow]:
        """Every live memory of one exact scope, embeddings included (to build an index)."""
        ...
    def ltm_scope_generations(self, scope_keys: Sequence[str]) -> dict[str, int]:
        """Each scope's generation, stamped on every row change search reads."""
        ...
    def ltm_scope_live_count(self, scope_key: str) -> int: ...
    def ltm_scope_changes(self, scope_key: str, after: int) -> tuple[list[LongTermRow], int]:
        """Rows of one exact scope changed after generation `after` (deleted
        ones included) and the highest generation among them."""
        ...
    def ltm_update(self, row: LongTermRow) -> None:
        """Write back text, lex_terms, metadata, memory_type, domain, importance(+method),
        updated, content_hash, deleted, source, embedding(+model), version, pinned."""
        ...
    def ltm_set_embedding(self, memory_id: str, content_hash: str, embedding: bytes, model: str) -> None:
        """Store a memory's vector of `model`, unless its text changed (its hash is no longer `content_hash`)."""
        ...
    def ltm_touch(self, memory_ids: Sequence[str], now: float) -> None: ...
    def ltm_history_add(self, memory_id: str, event: str, old_text: str | None, new_text: str | None,
                        detail: dict[str, Any], now: float) -> None: ...
    def ltm_history_add_first(self, entries: Sequence[tuple[str, str, str | None, str | None, dict[str, Any], float]]) -> None:
        """The first history entry of each new memory: (memory_id, event, old_text, new_text, detail, now)."""
        ...
    def ltm_history(self, memory_id: str, after: int = 0, limit: int | None = None) -> list[LongTermHistoryRow]:
        """A memory's changes oldest first: those with `n` greater than `after`, at most `limit`
        of them (None: all)."""
        ...
    def ltm_dense(self, scope_keys: Sequence[str], vector: bytes, k: int, where: LongTermFilter) -> list[tuple[str, float]]:
        """PostgreSQL only (pgvector): the k nearest live memories, (id, cosine similarity)."""
        ...
    def ltm_lexical(self, scope_keys: Sequence[str], terms: Sequence[str], k: int, where: LongTermFilter) -> list[tuple[str, float]]:
        """PostgreSQL only (tsvector): the k best text matches, (id, rank)."""
        ...
    # Lifecycle reads (reflection, consolidation): live memories of one type in one exact scope.
    def ltm_typed_rows(self, scope_key: str, memory_type: str, limit: int, newest_first: bool = False,
                       unpinned: bool = False) -> list[LongTermRow]: ...
    def ltm_typed_count(self, scope_key: str, memory_type: str, unpinned: bool = False) -> int: ...
    # Forgetting, restore, purge and the lifecycle scheduler (store/sql/lifecycle_forget.py).
    def ltm_scope_page(self, scope_key: str, after: tuple[float, str] | None, limit: int) -> list[LongTermRow]: ...
    def ltm_tenant_scope_keys(self, after: str, limit: int) -> list[str]: ...
    def ltm_tenant_scopes(self, after: str, limit: int) -> list[tuple[str, str, str, str]]: ...
    def ltm_tenants(self) -> list[str]: ...
    def ltm_deleted_before(self, before: float, limit: int) -> list[LongTermRow]: ...
    def ltm_purge(self, memory_ids: Sequence[str]) -> list[str]: ...
    def lifecycle_claim_run(self, job: str, slot: int, job_id: str, now: float) -> bool: ...
    def lifecycle_prune_runs(self, job: str, before_slot: int) -> int: ...
    def lifecycle_runs(self, job: str, limit: int) -> list[tuple[int, str, float]]: ...

    # -- job queue (see agentscope_memory.jobs) ----------------------------------------------
    # Tenant-scoped: adding and listing jobs, and settling a claimed job. A claim is identified
    # by (job_id, owner, attempts); settling a claim that is no longer ours does nothing and
    # returns False.
    def job_add(
        self, job_id: str, kind: str, payload: dict[str, Any], run_after: float, now: float
    ) -> None: ...
    def job_list(self, state: str | None = None, kind: str | None = None) -> list[JobRecord]: ...
    def job_done(self, job_id: str, owner: str, attempts: int) -> bool: ...
    def job_retry(
        self, job_id: str, owner: str, attempts: int, run_after: float, error: str, now: float
    ) -> bool: ...
    def job_dead(self, job_id: str, owner: str, attempts: int, error: str, now: float) -> bool: ...

    # Cross-tenant: one runner serves every tenant.
    def job_claim(
        self, owner: str, kinds: Sequence[str], now: float, lease_until: float, limit: int
    ) -> list[JobRecord]:
        """Lease up to `limit` due jobs of `kinds` (pending and due, or running with an expired
        lease) to `owner`, counting an attempt each; jobs other transactions are claiming are
        skipped, not waited for."""
        ...
    def job_renew(
        self, owner: str, job_ids: Sequence[str], lease_until: float, now: float
    ) -> list[str]:
        """Extend `owner`'s leases; returns the ids still leased to it."""
        ...
    def job_release(self, owner: str, job_ids: Sequence[str], now: float) -> int:
        """Give `owner`'s unfinished jobs back, due at once; the interrupted attempt is not
        counted. Returns how many were released."""
        ...
    def job_next_due(self, kinds: Sequence[str]) -> float | None:
        """When the next job of `kinds` becomes claimable (may be in the past), or None."""
        ...

    # -- agent state (see agentscope_memory.agent_state) -------------------------------------
    # Tenant-scoped values and lists under (user_id, session_id, kind, key), kind `value` or
    # `list`. Writes take an `expected` version (None: unconditional, 0: create only) and lock
    # the head row, so the returned version is the write's own. A key's versions never repeat:
    # deleted and created again, it goes on from the version it was deleted at (ABA), or, once
    # that was pruned, from above its tenant's version floor.
    def state_head(self, user_id: str, session_id: str, kind: str, key: str) -> StateHead | None: ...
    def state_value(self, user_id: str, session_id: str, key: str) -> tuple[str, int] | None: ...
    # (value, version, size), the value None when it is larger than `max_bytes` (not read).
    def state_value_within(
        self, user_id: str, session_id: str, key: str, max_bytes: int
    ) -> tuple[str | None, int, int] | None: ...
    def state_put_value(
        self, user_id: str, session_id: str, key: str, json_text: str, size: int,
        expected: int | None, now: float,
    ) -> StateWrite: ...
    def state_put_list(
        self, user_id: str, session_id: str, key: str, items: Sequence[str], size: int,
        expected: int | None, now: float,
    ) -> StateWrite: ...
    def state_append_list(
        self, user_id: str, session_id: str, key: str, items: Sequence[str], size: int,
        expected_length: int, expected: int | None, now: float,
    ) -> StateWrite:
        """Appends when the stored list has `expected_length` items (O(appended))."""
        ...
    def state_read_list(
        self, user_id: str, session_id: str, key: str, offset: int, max_items: int, max_bytes: int
    ) -> list[str]: ...
    def state_slot_exists(self, user_id: str, session_id: str) -> bool: ...
    def state_delete_slot(self, user_id: str, session_id: str, now: float) -> int:
        """Deletes the slot's values and lists, remembering their versions; returns how many."""
        ...
    def state_detach_legacy(self, user_id: str, session_id: str, key: str, now: float) -> None:
        """From now on the slot's list `key` is never answered from a 1.x memory (it was deleted);
        the marker is not state: no listing, count or slot delete sees it."""
        ...
    def state_forget_detachments(self, session_id: str) -> None:
        """Drops every slot's detached marker against the 1.x memory `session_id` (being deleted)."""
        ...
    def state_legacy_detached(self, user_id: str, session_id: str, key: str) -> bool: ...
    def state_delete_key(self, user_id: str, session_id: str, kind: str, key: str, now: float) -> int:
        """Deletes one value or list, remembering its version; returns how many (0 or 1)."""
        ...
    def state_prune_tombstones(self, before: float, limit: int, now: float) -> int:
        """Cross-tenant: forgets at most `limit` deleted keys' versions remembered since before
        `before`, raising their tenants' version floors (a key created afresh starts above its
        tenant's floor, so no version repeats); returns how many."""
        ...
    def state_keys(
        self, user_id: str, session_id: str, after: tuple[str, str] | None = None, limit: int = 1000
    ) -> list[tuple[str, str]]: ...
    def state_session_ids(self, user_id: str, after: str | None, limit: int) -> list[str]: ...

    # -- parent/child scopes (see agentscope_memory.scopes, store/sql/scopes.py) -------------
    # Tenant-scoped. `space` is `memory` (short-term memories) or `ltm` (long-term scope keys).
    def scope_lock(self, space: str) -> None: ...
    def scope_parent(self, space: str, child: str) -> str | None: ...
    def scope_set_parent(self, space: str, child: str, parent: str | None, now: float) -> None: ...
    def scope_children(self, space: str, parent: str, after: str, limit: int) -> list[str]: ...
    def scope_child_count(self, space: str, parent: str) -> int: ...
    def scope_detach_children(self, space: str, parent: str) -> int: ...
    def scope_mark_last(self, memory_id: str, list_name: str, count: int, visibility: str) -> None: ...
    def scope_marked(self, memory_id: str, list_name: str, visibilities: Sequence[str], after_seq: int,
                     limit: int) -> tuple[list[tuple[Row, str]], int | None]: ...
    def scope_global_memories(self, after: str, limit: int) -> list[str]: ...
    def scope_forget_memory(self, memory_id: str) -> None: ...
    def scope_ltm_register(self, scope_key: str, base_key: str, visibility: str) -> None: ...
    def scope_ltm_visible_keys(self, base_keys: Sequence[str]) -> list[str]: ...
    def scope_ltm_global_keys(self) -> list[str]: ...
    # Shared memory pools (store/sql/pool.py).
    def pool_lock(self, pool_id: str, now: float) -> int:
        """Lock a pool for a change (creating it when new); its last event sequence number."""
        ...
    def pool_get(self, pool_id: str, key: str) -> PoolEntryRow | None: ...
    def pool_last_version(self, pool_id: str, key: str) -> int:
        """The highest version the key ever had, deleted or not (0: never written)."""
        ...
    def pool_put(self, entry: PoolEntryRow) -> None: ...
    def pool_remove(self, pool_id: str, key: str) -> None: ...
    def pool_add_event(self, event: PoolEventRow) -> None:
        """Record an event and make its sequence number the pool's last."""
        ...
    def pool_list(self, pool_id: str, prefix: str, after_key: str | None, limit: int) -> list[PoolEntryRow]: ...
    def pool_newest(self, pool_id: str, before: tuple[float, str] | None, limit: int) -> list[PoolEntryRow]: ...
    def pool_events(self, pool_id: str, after_seq: int, limit: int) -> list[PoolEventRow]: ...

    # -- TIERED memories (see agentscope_memory.short_term.tiered, store/sql/tiered.py) -------
    # Tenant-scoped. Rows of one tier come oldest first (by `seq`).
    def tiered_insert(self, memory_id: str, rows: Sequence[TieredRow]) -> None: ...
    def tiered_rows(self, memory_id: str, tier: int, after_seq: int = 0, limit: int | None = None) -> list[TieredRow]: ...
    def tiered_totals(self, memory_id: str) -> dict[int, tuple[int, int]]:
        """Per tier: (items, tokens)."""
        ...
    def tiered_count(self, memory_id: str, tier: int) -> int: ...
    def tiered_seq_at(self, memory_id: str, tier: int, index: int) -> int | None: ...
    def tiered_present(self, memory_id: str, seqs: Sequence[int]) -> dict[int, int]:
        """seq -> tier of those of `seqs` still stored."""
        ...
    def tiered_delete(self, memory_id: str, seqs: Sequence[int]) -> int: ...
    def tiered_set_body(self, memory_id: str, seq: int, body: str) -> None: ...
    def tiered_hit(self, memory_id: str, seqs: Sequence[int]) -> None: ...
    def tiered_clear(self, memory_id: str) -> None: ...


class Store(Protocol):
    async def run(
        self, tenant: str, fn: Callable[[Tx], T], *, write: bool = True, small: bool = False
    ) -> T:
        """Run `fn` in one transaction. `small` promises a short, bounded transaction (a few
        rows), which a backend may run without a thread hop."""
        ...

    async def close(self) -> None: ...

