"""`HybridEngine`: long-term memory in the server's own store, recalled by dense + lexical
candidates and ranked by the seed formula (`ranking.py`).

Records: each recordable message (AgentScope-Java's rules, `records.py`) becomes a row of
memory_type `message`, stored once per exact scope (by content hash, enforced by the database),
embedded in one batch per call, indexed lexically with the two messages before it in the same
recorded conversation. A background job (durable, `agentscope_memory/jobs`) then scores the
round (importance, domain and, when the score reaches the threshold, a `fact` memory).

Search: the scopes the request covers (a scope naming fewer ids covers its narrower scopes, as
mem0's filters did), their dense and lexical candidates (embedded: `ScopeIndex` per exact scope;
PostgreSQL: pgvector HNSW and tsvector in the database), fused into S_semantic, the semantic top
k re-ranked by S_final, and the chosen memories touched (last access, access count) after the
answer is on its way.

Concurrency: reads take no lock; writes to one exact scope take that scope's lock (other scopes
proceed); PostgreSQL replicas are kept consistent by the database (unique live text per scope,
row locks on update).
"""

from __future__ import annotations

import asyncio
import builtins  # `list` is also a method name below
import logging
import math
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence, TypeVar, cast

import numpy as np

from agentscope_memory.errors import (
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
)
from agentscope_memory.long_term.domains import GENERAL_CHAT
from agentscope_memory.long_term.engine import (
    DEFAULT_TOP_K,
    HistoryEntry,
    LongTermHistoryPage,
    LongTermItem,
    LongTermListPage,
    Scope,
    all_history,
    history_entry_size,
    retrieve_by_search,
)
from agentscope_memory.long_term.hybrid.embedders import Embedder
from agentscope_memory.long_term.hybrid.extraction import Mem0Extractor
from agentscope_memory.long_term.hybrid.index_cache import IndexCache
from agentscope_memory.long_term.hybrid.memory_index import ScopeIndex
from agentscope_memory.long_term.hybrid.ranking import (
    MAX_TOP_K,
    MEMORY_TYPES,
    RankOptions,
    Scores,
    final_scores,
    merge_legs,
    semantic_scores,
)
from agentscope_memory.long_term.hybrid.records import MAX_TEXT_CHARS, content_hash, recordable, scope_key
from agentscope_memory.long_term.importance import ImportanceScorer
from agentscope_memory.long_term.router import QueryRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.scopes.long_term import LongTermScopes, visibility_of_key, visible_key
from agentscope_memory.message import Msg
from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.messages import check_json_value
from agentscope_memory.validation.long_term import check_metadata_size, check_record, check_update_text
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, read_within_budget
from agentscope_memory.store.base import NO_TENANT, LongTermFilter, LongTermHistoryRow, LongTermRow, Store, Tx
from agentscope_memory.tracing import TracedEmbedder

log = logging.getLogger("agentscope_memory.long_term")

SCORE_JOB = "long_term.score_round"
# Reserved metadata key of the old engine; still refused so stored data cannot be confused.
RESERVED_METADATA = ("asm_tenant",)
# A recorded message is indexed lexically with this many messages before it.
CONTEXT_MESSAGES = 2


@dataclass(frozen=True)
class EngineSettings:
    defaults: RankOptions = field(default_factory=RankOptions)
    # A round's fact is stored when its importance reaches this.
    fact_threshold: float = 0.7
    # Score every recorded round in the background (importance, domain, fact).
    scoring: bool = True
    # Route queries by intent on the AgentScope-parity calls (Retrieve, the tools, BeginTurn).
    route_parity_calls: bool = False
    # BLAS threads for the process's matmuls (None leaves them alone). The embedder's matrices
    # are small: on a loaded 2-core machine OpenBLAS's default threads made a query embedding's
    # p50 633 ms and p95 2977 ms; with one thread 76 ms and 93 ms (measured in one run).
    blas_threads: int | None = 1
    # Rows the in-memory scope indexes of this process may hold in all (a 384-dimension row
    # costs about 1.6 KB): beyond it the least recently searched scopes are dropped.
    index_max_vectors: int = 2_000_000


def pin_blas_threads(threads: int) -> None:
    """Limit BLAS (OpenBLAS, MKL) to `threads` for the whole process, now and later: the
    threadpoolctl call sets the libraries' global thread count (kept after the call returns)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


def iso(ts: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ts, timezone.utc).isoformat() if ts else ""


def item_of(row: LongTermRow, scores: Scores | None = None) -> LongTermItem:
    return LongTermItem(
        id=row.memory_id,
        text=row.text,
        scope=Scope(row.agent_name, row.user_id, row.run_name),
        metadata=dict(row.metadata),
        score=scores.final if scores is not None else None,
        created_at=iso(row.created),
        updated_at=iso(row.updated) if row.updated != row.created else "",
        memory_type=row.memory_type,
        domain=row.domain,
        importance=row.importance,
        importance_method=row.importance_method,
        last_accessed_at=iso(row.last_accessed),
        access_count=row.access_count,
        source=dict(row.source),
        scores=scores,
        visibility=visibility_of_key(row.scope_key),
        pinned=row.pinned,
    )


def _check_metadata(metadata: dict[str, Any] | None, field_name: str) -> None:
    for key in RESERVED_METADATA:
        if metadata and key in metadata:
            raise InvalidArgumentError(field_name, f"{key!r} is reserved")


T = TypeVar("T")


async def _acquire_by(lock: asyncio.Lock, by: float | None) -> None:
    """`lock`, waited for until `by` (a `time.monotonic()` instant; None: for ever)."""
    if by is None or not lock.locked():
        await lock.acquire()
        return
    try:
        await asyncio.wait_for(lock.acquire(), max(by - time.monotonic(), 0.0))
    except TimeoutError:
        raise DeadlineExceededError("another writer of the scope held it past the write's deadline; nothing was "
                                    "written") from None


async def _by(work: Awaitable[T], by: float | None, what: str = "embedding its texts") -> T:
    """`work`'s result if it comes before `by` (None: whenever it comes). Work on a thread
    (embedding, a read waiting for the database) runs on unwatched; only its result is dropped.
    `work` must write nothing: cut short, it must leave nothing half done."""
    if by is None:
        return await work
    left = by - time.monotonic()
    if left <= 0:
        # Not even started: a call whose answer would come too late is not made.
        if asyncio.iscoroutine(work):
            work.close()
        raise DeadlineExceededError(f"no time was left before the write's deadline for {what}; nothing was written")
    try:
        return await asyncio.wait_for(work, left)
    except TimeoutError:
        raise DeadlineExceededError(f"{what} outlasted the write's deadline; nothing was written") from None


def _history_entry(row: LongTermHistoryRow) -> HistoryEntry:
    return HistoryEntry(memory_id=row.memory_id, event=row.event, old_text=row.old_text, new_text=row.new_text,
                        created_at=iso(row.created), updated_at=iso(row.created), detail=row.detail)


class HybridEngine:
    """The `LongTermEngine` of the server's own store."""

    def __init__(
        self,
        store: Store,
        embedder: Callable[[], Embedder],
        *,
        scorer: ImportanceScorer,
        router: QueryRouter,
        settings: EngineSettings | None = None,
        in_database: bool = False,
        migrations: Sequence[Callable[[HybridEngine], Any]] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._make_embedder = embedder
        self._embedder: Embedder | None = None
        self.scorer = scorer
        self.router = router
        self.settings = settings or EngineSettings()
        # PostgreSQL: a scope over the index budget is searched in the database (pgvector,
        # tsvector). Scope indexes follow other processes' writes by generation on both SQL
        # stores (replicas; a local-mode program beside a server on SQLite).
        self._in_database = in_database
        self._migrations = list(migrations)
        self._clock = clock
        self._open_lock = asyncio.Lock()
        self._opened = False
        # An opening a write under a deadline started and stopped waiting for (`_ready_by`).
        self._opening: asyncio.Task[None] | None = None
        self._cache = IndexCache(self.settings.index_max_vectors)
        self._locks: weakref.WeakValueDictionary[tuple[str, str], asyncio.Lock] = weakref.WeakValueDictionary()
        self._background: set[asyncio.Task[Any]] = set()
        self._jobs: Any = None
        # Job kinds queued (payload {"scope": [agent, user, run]}) in the transaction that
        # stores new facts of a scope: the lifecycle's background checks (reflection).
        self.fact_jobs: list[str] = []
        # Parent/child scopes: adds inherited keys to searches and marks inherited results.
        self.scopes: LongTermScopes | None = LongTermScopes()
        # mem0's fact extraction for scored rounds (an LLM is configured); None: the scorer's fact.
        self.extractor: Mem0Extractor | None = None

    # -- life cycle ---------------------------------------------------------------------------

    def attach_jobs(self, jobs: Any) -> None:
        """Use `jobs` (a `JobRunner`) for background scoring; registers the handler."""
        from agentscope_memory.long_term.hybrid.scoring import RoundScorer

        self._jobs = jobs
        jobs.register(SCORE_JOB, RoundScorer(self).run)

    @property
    def rank_defaults(self) -> RankOptions:
        return self.settings.defaults

    @property
    def embedding_model(self) -> str:
        embedder = self._embedder
        return getattr(embedder, "model_id", "sentence-transformers/all-MiniLM-L6-v2") if embedder else ""

    async def open(self) -> None:
        async with self._open_lock:
            if self._opened:
                return
            if self.settings.blas_threads is not None:
                pin_blas_threads(self.settings.blas_threads)
            embedder = cast(Embedder, TracedEmbedder(await asyncio.to_thread(self._make_embedder)))
            await self._store.run(NO_TENANT, lambda tx: tx.ltm_ensure_schema(embedder.dimensions))
            self._embedder = embedder
            for migrate in self._migrations:
                await migrate(self)
            self._opened = True

    async def _ready(self) -> Embedder:
        if not self._opened:
            await self.open()
        assert self._embedder is not None
        return self._embedder

    async def _ready_by(self, by: float | None) -> Embedder:
        """`_ready()`, waited for until `by` (a `time.monotonic()` instant; None: for ever). The
        first opening without preload loads the embedding model (seconds to minutes): a write
        under a deadline stops waiting for it, and the opening goes on in the background, so
        that a later write finds the model loaded instead of starting over."""
        if self._opened or by is None:
            return await self._ready()
        opening = self._opening
        if opening is None or opening.done():
            opening = self._opening = asyncio.ensure_future(self.open())
            self._background.add(opening)
            opening.add_done_callback(self._background.discard)
            # Seen here, so a failure nobody waited for is not reported as never retrieved; the
            # next call opens again and hears of it.
            opening.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            await asyncio.wait_for(asyncio.shield(opening), max(by - time.monotonic(), 0.0))
        except TimeoutError:
            raise DeadlineExceededError("long-term memory was still loading its embedding model at the write's "
                                        "deadline; nothing was written") from None
        assert self._embedder is not None
        return self._embedder

    async def close(self) -> None:
        tasks = list(self._background)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._cache.clear()

    def _lock(self, tenant: str, key: str) -> asyncio.Lock:
        lock = self._locks.get((tenant, key))
        if lock is None:
            lock = self._locks[(tenant, key)] = asyncio.Lock()
        return lock

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        embedder = await self._ready()
        return await asyncio.to_thread(embedder.embed, list(texts))

    async def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Texts embedded as search queries (a model with a query form uses it), to score
        against stored vectors."""
        embedder = await self._ready()
        return await asyncio.to_thread(getattr(embedder, "embed_query", embedder.embed), list(texts))

    async def comparable(self, vectors: np.ndarray) -> np.ndarray:
        """Stored vectors as rows whose dot products compare texts with one another (clustering,
        fidelity). Most models store such vectors already; one whose stored layout is made for
        queries (`embedders.MiniLmE5`) converts them."""
        convert = getattr(await self._ready(), "comparable", None)
        return vectors if convert is None else np.asarray(convert(vectors), dtype=np.float32)

    # -- record -------------------------------------------------------------------------------

    async def record(
        self, tenant: str, scope: Scope, msgs: Sequence[Msg | None], metadata: dict[str, Any] | None = None,
        visibility: str = "LOCAL", *, pinned: bool = False,
    ) -> list[LongTermItem]:
        """Store each new recordable message verbatim, once per exact scope (and visibility:
        see `scopes/long_term.py`); returns what was stored and, with `pinned`, the memories
        already holding a text that this call pinned, in the messages' order. `pinned` pins
        what is stored and what is held (a user's "remember this for ever" about what the scope
        knows); without it a held memory keeps its own pin."""
        scope.validate()
        _check_metadata(metadata, "metadata_json")
        check_record(msgs, metadata)
        recorded = recordable(msgs)
        if not recorded:
            return []
        texts = [r.text for r in recorded]
        lex = [" ".join(tokenize(" ".join(texts[max(0, i - CONTEXT_MESSAGES) : i + 1]))) for i in range(len(texts))]
        rows = []
        now = self._clock()
        key = visible_key(scope, visibility)
        seen: set[str] = set()
        for r, terms in zip(recorded, lex, strict=True):
            digest = content_hash(r.text)
            if digest in seen:
                continue
            seen.add(digest)
            rows.append(LongTermRow(
                memory_id=str(uuid.uuid4()), scope_key=key, agent_name=scope.agent_name, user_id=scope.user_id,
                run_name=scope.run_name, text=r.text, lex_terms=terms, metadata=dict(metadata or {}),
                memory_type="message", created=now, updated=now, last_accessed=now, content_hash=digest,
                source={"role": r.role, **({"message_ids": [r.message_id]} if r.message_id else {})},
                pinned=pinned,
            ))
        stored, pinned_held = await self._insert(tenant, scope, rows, score_round=self.settings.scoring, key=key,
                                                 pin_held=pinned)
        by_hash = {r.content_hash: r for r in [*stored, *pinned_held]}
        return [item_of(by_hash[r.content_hash]) for r in rows if r.content_hash in by_hash]

    async def insert(self, tenant: str, scope: Scope, rows: list[LongTermRow], *, score_round: bool = False,
                     history_detail: dict[str, Any] | None = None, key: str | None = None,
                     write_by: float | None = None) -> list[LongTermRow]:
        """Insert `rows` of one exact scope that it does not hold yet (embedding them in one
        batch); returns those inserted. With `score_round`, queue the round's scoring job in the
        same transaction. `key` is the rows' scope key when not the scope's own (a visibility).
        `write_by`: a `time.monotonic()` instant; when the engine's first opening (the embedding
        model's loading), the scope's lock, the lookup of held texts or the embedding is not had
        by then, `DeadlineExceededError` with nothing written. The write itself (one short
        transaction) is not timed: cut short, it could commit with the scope's index never told."""
        stored, _ = await self._insert(tenant, scope, rows, score_round=score_round, history_detail=history_detail,
                                       key=key, write_by=write_by)
        return stored

    async def _insert(self, tenant: str, scope: Scope, rows: list[LongTermRow], *, score_round: bool = False,
                      history_detail: dict[str, Any] | None = None, key: str | None = None,
                      pin_held: bool = False, write_by: float | None = None
                      ) -> tuple[list[LongTermRow], list[LongTermRow]]:
        """`insert`, returning (rows inserted, memories pinned). With `pin_held`, the live
        memories of the scope already holding one of the texts are pinned in the same
        transaction (under the scope's lock: a concurrent delete or unpin is seen), each an
        UPDATE with `pinned` {old, new} as `update` writes; one pinned already is left as it is."""
        embedder = await self._ready_by(write_by)
        key = key or scope_key(scope)
        lock = self._lock(tenant, key)
        await _acquire_by(lock, write_by)
        try:
            hashes = [r.content_hash for r in rows]
            known = await _by(self._store.run(tenant, lambda tx: tx.ltm_existing_hashes(key, hashes), write=False),
                              write_by, "looking up the texts the scope holds")
            fresh = [r for r in rows if r.content_hash not in known]
            if not fresh and not (pin_held and known):
                return [], []
            vectors = (await _by(asyncio.to_thread(embedder.embed, [r.text for r in fresh]), write_by) if fresh
                       else np.zeros((0, 0), dtype=np.float32))
            for row, vector in zip(fresh, vectors, strict=True):
                row.embedding = np.asarray(vector, dtype=np.float32).tobytes()
                row.embedding_model = self.embedding_model
            pinned: list[LongTermRow] = []

            def write(tx: Tx) -> list[str]:
                tx.ltm_register_scope(key, scope.agent_name, scope.user_id, scope.run_name, self._clock())
                inserted = tx.ltm_insert(fresh) if fresh else []
                stored_now = set(inserted)
                pinned.clear()  # a retried transaction starts again
                if pin_held:
                    pinned.extend(self._pin_held(tx, key, [r.content_hash for r in rows
                                                           if r.memory_id not in stored_now]))
                tx.ltm_history_add_first([(r.memory_id, "ADD", None, r.text,
                                           {**(history_detail or {}), **({"pinned": True} if r.pinned else {})},
                                           r.created)
                                          for r in fresh if r.memory_id in stored_now])
                if inserted and score_round and self._jobs is not None:
                    self._jobs.enqueue_in(tx, SCORE_JOB, {"memory_ids": inserted})
                if self._jobs is not None and any(r.memory_type == "fact" and r.memory_id in inserted for r in fresh):
                    for kind in self.fact_jobs:
                        self._jobs.enqueue_in(tx, kind, {"scope": [scope.agent_name, scope.user_id, scope.run_name]})
                return inserted

            inserted = set(await self._store.run(tenant, write))
            stored = [r for r in fresh if r.memory_id in inserted]
            index = self._cache.get((tenant, key))
            if index is not None:
                index.add(stored)
                for row in pinned:
                    index.set_metadata(row)
        finally:
            lock.release()
        if stored and (score_round or self.fact_jobs) and self._jobs is not None:
            self._jobs.wake()
        return stored, pinned

    def _pin_held(self, tx: Tx, key: str, hashes: Sequence[str]) -> builtins.list[LongTermRow]:
        """Pin the live memories of scope `key` holding these texts, those not pinned yet."""
        held = tx.ltm_live_ids_by_hash(key, list(dict.fromkeys(hashes)))
        changed = []
        now = self._clock()
        for row in tx.ltm_get_many(list(held.values()), lock=True):
            if row.deleted or row.pinned:
                continue
            row.pinned, row.updated, row.version = True, now, row.version + 1
            tx.ltm_update(row)
            # As an update's pin: a user's restating it is a use (forgetting measures from now
            # should it be unpinned later).
            tx.ltm_touch([row.memory_id], now)
            row.last_accessed, row.access_count = now, row.access_count + 1
            tx.ltm_history_add(row.memory_id, "UPDATE", row.text, row.text, {"pinned": {"old": False, "new": True}}, now)
            changed.append(row)
        return changed

    async def replace(self, tenant: str, scope: Scope, add: builtins.list[LongTermRow], retire: Sequence[str], *,
                      event: str, detail: dict[str, Any],
                      read_as: Mapping[str, str] | None = None) -> builtins.list[LongTermRow] | None:
        """In one transaction: soft-delete the live memories `retire` of `scope` (history event
        `event`, linked to the new rows) and insert `add` (already embedded). Nothing changes
        and None is returned when one of `retire` is no longer live, its text is no longer the
        one whose content hash `read_as` gives (the new rows say what it said before an
        update), one is pinned, or a new text is already held live by the scope (a concurrent
        writer got there first): a rerun decides again."""
        key = scope_key(scope)
        new_ids = [r.memory_id for r in add]

        class _Changed(Exception):
            pass

        async with self._lock(tenant, key):

            def write(tx: Tx) -> builtins.list[LongTermRow]:
                now = self._clock()
                for memory_id in retire:
                    row = tx.ltm_get(memory_id, lock=True)
                    if row is None or row.deleted or row.scope_key != key:
                        raise _Changed()
                    if read_as is not None and row.content_hash != read_as.get(memory_id):
                        raise _Changed()
                    # Pinned since the caller read it: a pin is never merged or reflected away.
                    if row.pinned:
                        raise _Changed()
                    row.deleted, row.updated = True, now
                    row.version += 1
                    row.metadata = {**row.metadata, "retired_into": new_ids}
                    tx.ltm_update(row)
                    tx.ltm_history_add(memory_id, event, row.text, None, {**detail, "into": new_ids}, now)
                tx.ltm_register_scope(key, scope.agent_name, scope.user_id, scope.run_name, now)
                inserted = tx.ltm_insert(add)
                if len(inserted) != len(add):
                    raise _Changed()
                for row in add:
                    tx.ltm_history_add(row.memory_id, event, None, row.text, {**detail, "from": list(retire)}, now)
                return add

            try:
                stored = await self._store.run(tenant, write)
            except _Changed:
                return None
            index = self._cache.get((tenant, key))
            if index is not None:
                for memory_id in retire:
                    index.remove(memory_id)
                index.add(stored)
        return stored

    # -- search -------------------------------------------------------------------------------

    async def search(self, tenant: str, scope: Scope, query: str, limit: int = DEFAULT_TOP_K, *,
                     touch: bool = True, metadata: Mapping[str, Any] | None = None) -> list[LongTermItem]:
        """The AgentScope-parity search: the server's default ranking, top `limit`, of the
        memories whose metadata holds `metadata`'s keys with equal values."""
        defaults = self.settings.defaults
        limit = limit or DEFAULT_TOP_K
        # The legs keep at least `limit` candidates each, or a limit above them would be cut to them.
        options = defaults.with_overrides(top_k=limit,
                                          top_k_semantic=max(defaults.top_k_semantic, min(limit, MAX_TOP_K)),
                                          where=LongTermFilter(metadata=dict(metadata or {})))
        items, _ = await self.search_ranked(tenant, scope, query, options, route=self.settings.route_parity_calls,
                                            touch=touch)
        return items

    async def retrieve(
        self, tenant: str, scope: Scope, msg: Msg | None, limit: int = DEFAULT_TOP_K, *, touch: bool = True
    ) -> tuple[str, list[LongTermItem]]:
        return await retrieve_by_search(self, tenant, scope, msg, limit, touch=touch)

    async def search_ranked(
        self, tenant: str, scope: Scope, query: str, options: RankOptions | None = None, *, route: bool = False,
        touch: bool = True,
    ) -> tuple[list[LongTermItem], str]:
        """Ranked search with every score component. Returns (items best first, the routed
        domain or "" when routing is off). A query routed to general_chat recalls nothing.
        `touch=False`: the server's own lookups (extraction) are not recalls, and a caller that
        cuts the results (a threshold, a budget) `touch`es only what it shows."""
        scope.validate()
        options = (options or self.settings.defaults).validate()
        if len(query) > MAX_TEXT_CHARS:
            raise ResourceExhaustedError("query", f"has {len(query)} characters; at most {MAX_TEXT_CHARS}")
        if not query.strip():
            return [], ""
        domain = ""
        where = options.where
        if route:
            domain = await self.router.route(query)
            if domain == GENERAL_CHAT:
                return [], domain
            # Memories not assessed yet have no domain: a routed query still sees them.
            domains = tuple(d for d in where.domains if d == domain) if where.domains else (domain, "")
            where = LongTermFilter(where.memory_types, domains, where.created_after, where.created_before, where.metadata)
        embedder = await self._ready()
        keys, generations = await self._store.run(tenant, lambda tx: self._search_keys(tx, scope), write=False,
                                                  small=True)
        if not keys:
            return [], domain
        need_dense = options.ranking != "lexical"
        need_lexical = options.ranking != "dense"
        # Some models embed a query differently from a passage (e5's "query: " prefix).
        embed_query = getattr(embedder, "embed_query", embedder.embed)
        terms = tokenize(query) if need_lexical else []
        k = options.top_k_semantic
        # The query embedding (a worker thread) is most of a search's time: the lexical leg
        # needs no vector, so it runs meanwhile, and only the dense leg waits for the vector.
        embedding = asyncio.ensure_future(asyncio.to_thread(embed_query, [query])) if need_dense else None
        try:
            dense, lexical = await self._candidates(tenant, keys, generations, embedding, terms, k, where)
        finally:
            if embedding is not None and not embedding.done():
                embedding.cancel()
        merged = merge_legs(dense, lexical)
        semantic = semantic_scores(merged, options)
        chosen = sorted(semantic, key=lambda m: -semantic[m].semantic)[:k]
        # At most top_k_semantic rows by primary key: short enough to read without a thread hop.
        rows = {r.memory_id: r for r in await self._store.run(
            tenant, lambda tx: tx.ltm_get_many_unembedded(chosen), write=False, small=len(chosen) <= 100)}
        rows = {m: r for m, r in rows.items() if not r.deleted}
        scores = {m: semantic[m] for m in chosen if m in rows}
        now = self._clock()
        final_scores(scores, {m: (rows[m].importance, rows[m].last_accessed, rows[m].access_count) for m in scores},
                     options, now, {m for m in scores if rows[m].pinned})
        best = sorted(scores, key=lambda m: (-scores[m].final, m))[: options.top_k]
        if best and touch:
            self._touch_later(tenant, best, now)
        items = [item_of(rows[m], scores[m]) for m in best]
        if self.scopes is not None:
            self.scopes.tag(scope, items)
        return items, domain

    def _search_keys(self, tx: Tx, scope: Scope) -> tuple[builtins.list[str], dict[str, int]]:
        """The scope keys a search of `scope` reads and their generations."""
        keys = tx.ltm_scope_keys(scope.agent_name, scope.user_id, scope.run_name)
        if self.scopes is not None:
            keys = self.scopes.search_keys(tx, scope, keys)
        return keys, tx.ltm_scope_generations(keys)

    async def _candidates(
        self, tenant: str, keys: Sequence[str], generations: dict[str, int],
        embedding: asyncio.Future[np.ndarray] | None, terms: Sequence[str], k: int, where: LongTermFilter,
    ) -> tuple[builtins.list[tuple[str, float]], builtins.list[tuple[str, float]]]:
        """The (dense, lexical) candidates of `keys`, best first, at most k each; the lexical
        leg is computed before waiting for the query vector `embedding`."""
        dense: builtins.list[tuple[str, float]] = []
        lexical: builtins.list[tuple[str, float]] = []
        indexes = [await self._index(tenant, key, generations.get(key)) for key in keys]
        if any(index is None for index in indexes):
            # Two read transactions: the lexical query runs in the database while the query is embedded.
            lexical_task = (asyncio.ensure_future(self._store.run(
                tenant, lambda tx: tx.ltm_lexical(keys, terms, k, where), write=False)) if terms else None)
            try:
                if embedding is not None:
                    vector_bytes = (await embedding)[0].astype(np.float32).tobytes()
                    dense = await self._store.run(tenant, lambda tx: tx.ltm_dense(keys, vector_bytes, k, where),
                                                  write=False)
            finally:
                if lexical_task is not None:
                    lexical = await lexical_task
            return dense, lexical
        held = [index for index in indexes if index is not None]
        for index in held:
            lexical += index.lexical(terms, k, where)
        if embedding is not None:
            q = (await embedding)[0]
            for index in held:
                dense += index.dense(q, k, where)
        if len(keys) > 1:
            dense = sorted(dense, key=lambda c: -c[1])[:k]
            lexical = sorted(lexical, key=lambda c: -c[1])[:k]
        return dense, lexical

    def touch(self, tenant: str, memory_ids: Sequence[str]) -> None:
        """Mark memories recalled now (last access, access count; what decay and forgetting
        read), in the background as a search does."""
        if memory_ids:
            self._touch_later(tenant, list(memory_ids), self._clock())

    def _touch_later(self, tenant: str, memory_ids: list[str], now: float) -> None:
        async def touch() -> None:
            try:
                await self._store.run(tenant, lambda tx: tx.ltm_touch(memory_ids, now), small=True)
            except Exception:
                log.warning("touching recalled memories failed", exc_info=True)

        task = asyncio.get_running_loop().create_task(touch())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _index(self, tenant: str, key: str, generation: int | None = None) -> ScopeIndex | None:
        """The index of one exact scope, current to `generation` (None: as kept). None: the
        scope is over the index budget and searched in the database (PostgreSQL)."""
        index = self._cache.use((tenant, key))
        if index is not None and (generation is None or index.generation >= generation):
            return index
        embedder = await self._ready()
        async with self._lock(tenant, key):
            index = self._cache.get((tenant, key))
            if index is None:
                return await self._load(tenant, key, embedder.dimensions)
            if generation is not None and index.generation < generation:
                after = index.generation
                rows, newest = await self._store.run(tenant, lambda tx: tx.ltm_scope_changes(key, after), write=False)
                live = await self._embedded(tenant, [r for r in rows if not r.deleted])
                index.apply([*live, *(r for r in rows if r.deleted)], newest)
        return index

    async def _load(self, tenant: str, key: str, dimensions: int) -> ScopeIndex | None:
        in_database = self._in_database
        budget = self._cache

        def read(tx: Tx) -> tuple[builtins.list[LongTermRow] | None, int]:
            # One snapshot: the rows are exactly those of the generation read with them.
            if in_database and not budget.fits(tx.ltm_scope_live_count(key)):
                return None, 0
            return tx.ltm_scope_rows(key), tx.ltm_scope_generations([key]).get(key, 0)

        rows, generation = await self._store.run(tenant, read, write=False)
        if rows is None:
            return None
        index = ScopeIndex(dimensions)
        index.add(await self._embedded(tenant, rows))
        index.generation = generation
        # A scope over the whole budget is indexed for this search only (SQLite).
        if budget.fits(index.slots):
            budget.put((tenant, key), index)
        return index

    async def _embedded(self, tenant: str, rows: list[LongTermRow]) -> list[LongTermRow]:
        """`rows` with embeddings from the current model: rows of another model (or none) are
        embedded again, in one batch, and written back."""
        model = self.embedding_model
        stale = [r for r in rows if r.embedding is None or r.embedding_model != model]
        if stale:
            vectors = await self.embed([r.text for r in stale])
            for row, vector in zip(stale, vectors, strict=True):
                row.embedding, row.embedding_model = np.asarray(vector, dtype=np.float32).tobytes(), model

            def write(tx: Tx) -> None:
                # Only the vector, and only while the text is the one embedded: a concurrent
                # edit or delete (another replica) is not overwritten.
                for row in stale:
                    assert row.embedding is not None
                    tx.ltm_set_embedding(row.memory_id, row.content_hash, row.embedding, model)

            await self._store.run(tenant, write)
        return rows

    # -- single memories --------------------------------------------------------------------

    async def list(self, tenant: str, scope: Scope, limit: int = 100, *,
                   metadata: Mapping[str, Any] | None = None, offset: int = 0) -> builtins.list[LongTermItem]:
        self._check_listing(scope, metadata)
        await self._ready()

        def read(tx: Tx) -> builtins.list[LongTermRow]:
            return tx.ltm_list(tx.ltm_scope_keys(scope.agent_name, scope.user_id, scope.run_name), limit,
                               metadata=metadata, offset=offset)

        return [item_of(r) for r in await self._store.run(tenant, read, write=False)]

    async def count(self, tenant: str, scope: Scope, *, metadata: Mapping[str, Any] | None = None) -> int:
        self._check_listing(scope, metadata)
        await self._ready()

        def read(tx: Tx) -> int:
            return tx.ltm_count(tx.ltm_scope_keys(scope.agent_name, scope.user_id, scope.run_name), metadata)

        return await self._store.run(tenant, read, write=False)

    @staticmethod
    def _check_listing(scope: Scope, metadata: Mapping[str, Any] | None) -> None:
        scope.validate()
        if metadata:
            # As a search's filter: PostgreSQL, which filters a list itself, cannot read a NUL.
            check_json_value(dict(metadata), "metadata_filter_json", allow_nul=False)

    async def list_page(self, tenant: str, scope: Scope, limit: int, cursor: str = "") -> LongTermListPage:
        """Oldest first, by (created, id); a cursor names the last item of the page before."""
        scope.validate()
        await self._ready()
        after: tuple[float, str] | None = None
        if cursor:
            created, _, memory_id = cursor.partition("|")
            try:
                after = (float(created), memory_id)
            except ValueError:
                raise InvalidArgumentError("page_token", "invalid or expired") from None

        def read(tx: Tx) -> builtins.list[LongTermRow]:
            return tx.ltm_list(tx.ltm_scope_keys(scope.agent_name, scope.user_id, scope.run_name), limit + 1, after)

        rows = await self._store.run(tenant, read, write=False)
        more = len(rows) > limit
        rows = rows[:limit]
        return LongTermListPage([item_of(r) for r in rows], [f"{r.created!r}|{r.memory_id}" for r in rows], more)

    async def _row(self, tenant: str, memory_id: str) -> LongTermRow:
        check_id(memory_id, "id")
        await self._ready()
        row = await self._store.run(tenant, lambda tx: tx.ltm_get(memory_id), write=False, small=True)
        # Another tenant's memory is reported exactly like a missing one.
        if row is None or row.deleted:
            raise NotFoundError(f"long-term memory {memory_id!r} does not exist")
        return row

    async def get(self, tenant: str, memory_id: str) -> LongTermItem:
        return item_of(await self._row(tenant, memory_id))

    async def update(
        self,
        tenant: str,
        memory_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        pinned: bool | None = None,
    ) -> LongTermItem:
        """Change text, merge metadata, set importance, pin or unpin; the change goes to the
        history (a pin's as `pinned` {old, new} in the UPDATE's detail)."""
        if text is None and metadata is None and importance is None and pinned is None:
            raise InvalidArgumentError("text", "is required when neither metadata, importance nor pinned is given")
        if text is not None and not text.strip():
            raise InvalidArgumentError("text", "must not be empty")
        if text is not None and len(text) > MAX_TEXT_CHARS:
            raise ResourceExhaustedError("text", f"has {len(text)} characters; at most {MAX_TEXT_CHARS}")
        if importance is not None and not (math.isfinite(importance) and 0.0 <= importance <= 1.0):
            raise InvalidArgumentError("importance", f"must be between 0 and 1, not {importance}")
        _check_metadata(metadata, "metadata_json")
        if text is not None:
            # Record's rules (at most MAX_TEXT_CHARS characters, no NUL), under this field's name:
            # an update may give any text a Record could have stored.
            check_update_text(text)
        if metadata:
            check_json_value(metadata, "metadata_json", allow_nul=False)
        current = await self._row(tenant, memory_id)
        key = current.scope_key
        vector: bytes | None = None
        if text is not None and text != current.text:
            vector = np.asarray((await self.embed([text]))[0], dtype=np.float32).tobytes()
        async with self._lock(tenant, key):

            def write(tx: Tx) -> LongTermRow:
                row = tx.ltm_get(memory_id, lock=True)
                if row is None or row.deleted:
                    raise NotFoundError(f"long-term memory {memory_id!r} does not exist")
                old_text = row.text
                detail: dict[str, Any] = {}
                if text is not None and text != row.text:
                    digest = content_hash(text)
                    if tx.ltm_existing_hashes(row.scope_key, [digest]):
                        raise AlreadyExistsError(f"text: this scope already holds a memory with this text ({memory_id!r} unchanged)")
                    row.text, row.content_hash = text, digest
                    row.lex_terms = " ".join(tokenize(text))
                    row.embedding, row.embedding_model = vector, self.embedding_model
                if metadata is not None:
                    merged = {**row.metadata, **metadata}
                    # Record's limit holds for the merge too: merges cannot grow a memory past it.
                    check_metadata_size(merged)
                    detail["metadata"] = {"old": row.metadata, "new": merged}
                    row.metadata = merged
                if importance is not None:
                    detail["importance"] = {"old": row.importance, "new": importance}
                    row.importance, row.importance_method = float(importance), "user"
                if pinned is not None and bool(pinned) != row.pinned:
                    detail["pinned"] = {"old": row.pinned, "new": bool(pinned)}
                    row.pinned = bool(pinned)
                row.updated = self._clock()
                row.version += 1
                tx.ltm_update(row)
                # A user's edit is a use, as a recall is: forgetting measures its fade from now
                # (it took a memory corrected a moment ago when its last recall was months old).
                tx.ltm_touch([memory_id], row.updated)
                row.last_accessed, row.access_count = row.updated, row.access_count + 1
                tx.ltm_history_add(memory_id, "UPDATE", old_text, row.text, detail, row.updated)
                return row

            row = await self._store.run(tenant, write)
            index = self._cache.get((tenant, key))
            if index is not None:
                if vector is not None:
                    index.add([row])
                else:
                    index.set_metadata(row)
        return item_of(row)

    async def apply_assessment(self, tenant: str, importances: Mapping[str, float], domain: str,
                               method: str) -> builtins.list[LongTermRow]:
        """Set the scored importance (per memory id) and the domain of a round's memories (not
        ones a user set)."""

        def write(tx: Tx) -> builtins.list[LongTermRow]:
            changed = []
            for row in tx.ltm_get_many(list(importances), lock=True):
                if row.deleted or row.importance_method == "user":
                    continue
                importance = importances[row.memory_id]
                detail = {"importance": {"old": row.importance, "new": importance}, "domain": {"old": row.domain, "new": domain},
                          "method": method}
                row.importance, row.domain, row.importance_method = importance, domain, method
                tx.ltm_update(row)
                tx.ltm_history_add(row.memory_id, "ASSESS", None, None, detail, self._clock())
                changed.append(row)
            return changed

        changed = await self._store.run(tenant, write)
        for row in changed:
            index = self._cache.get((tenant, row.scope_key))
            if index is not None:
                index.set_metadata(row)
        return changed

    async def rows(self, tenant: str, memory_ids: Sequence[str]) -> builtins.list[LongTermRow]:
        return await self._store.run(tenant, lambda tx: tx.ltm_get_many(list(memory_ids)), write=False)

    async def history(self, tenant: str, memory_id: str) -> builtins.list[HistoryEntry]:
        """Every change of a memory, soft-deleted ones included (reflected, merged, deleted:
        their history says where they went), read a page at a time."""
        return await all_history(self, tenant, memory_id)

    async def history_page(self, tenant: str, memory_id: str, limit: int, after: int = 0,
                           budget: int = DEFAULT_PAGE_BYTES) -> LongTermHistoryPage:
        """Changes after the one numbered `after` (a history's entries are numbered 1, 2, ...
        and never change), in batches that stop soon after `budget` bytes, in one read."""
        check_id(memory_id, "id")
        await self._ready()

        def read(tx: Tx) -> tuple[builtins.list[LongTermHistoryRow], bool, bool]:
            rows = read_within_budget(lambda n, count: tx.ltm_history(memory_id, n, count), lambda r: r.n,
                                      lambda r: history_entry_size(_history_entry(r)), after, limit + 1, budget)
            more = len(rows) > limit
            rows = rows[:limit]
            if not more and rows:
                # The read stopped at the budget, or at the end: one more row tells which.
                more = bool(tx.ltm_history(memory_id, rows[-1].n, 1))
            # A purged memory's history outlives it (the audit trail of what was forgotten).
            exists = bool(rows) or after > 0 or tx.ltm_get(memory_id) is not None
            return rows, more, exists

        rows, more, exists = await self._store.run(tenant, read, write=False)
        if not exists:
            raise NotFoundError(f"long-term memory {memory_id!r} does not exist")
        return LongTermHistoryPage([_history_entry(r) for r in rows], [r.n for r in rows], more)

    async def delete(self, tenant: str, memory_id: str) -> None:
        row = await self._row(tenant, memory_id)
        await self._soft_delete(tenant, row.scope_key, [memory_id])

    async def _soft_delete(self, tenant: str, key: str, memory_ids: Sequence[str]) -> int:
        async with self._lock(tenant, key):

            def write(tx: Tx) -> int:
                count = 0
                now = self._clock()
                for row in tx.ltm_get_many(list(memory_ids), lock=True):
                    if row.deleted:
                        continue
                    row.deleted, row.updated = True, now
                    row.version += 1
                    tx.ltm_update(row)
                    tx.ltm_history_add(row.memory_id, "DELETE", row.text, None, {}, now)
                    count += 1
                return count

            count = await self._store.run(tenant, write)
            index = self._cache.get((tenant, key))
            if index is not None:
                for memory_id in memory_ids:
                    index.remove(memory_id)
        return count

    async def retire_where(self, tenant: str, key: str, memory_ids: Sequence[str], event: str,
                           decide: Callable[[LongTermRow, float], dict[str, Any] | None]) -> builtins.list[LongTermRow]:
        """Soft-deletes those of `memory_ids` (live, unpinned, of exact scope `key`) for which `decide(row,
        now)`, asked again under the scope's lock on the current row, returns a history detail
        (None keeps the memory: it changed since the caller looked). Returns the rows retired."""
        async with self._lock(tenant, key):

            def write(tx: Tx) -> builtins.list[LongTermRow]:
                now = self._clock()
                retired = []
                for row in tx.ltm_get_many(list(memory_ids), lock=True):
                    # A pinned memory is never retired by a job (only an explicit delete removes it).
                    if row.deleted or row.scope_key != key or row.pinned:
                        continue
                    detail = decide(row, now)
                    if detail is None:
                        continue
                    row.deleted, row.updated = True, now
                    row.version += 1
                    tx.ltm_update(row)
                    tx.ltm_history_add(row.memory_id, event, row.text, None, detail, now)
                    retired.append(row)
                return retired

            retired = await self._store.run(tenant, write)
            index = self._cache.get((tenant, key))
            if index is not None:
                for row in retired:
                    index.remove(row.memory_id)
        return retired

    async def restore(self, tenant: str, memory_id: str, detail: dict[str, Any]) -> LongTermItem:
        """Brings a soft-deleted memory back into recall and listing (history event RESTORE);
        restoring counts as an access, so it is not forgotten again at once."""
        check_id(memory_id, "id")
        await self._ready()
        found = await self._store.run(tenant, lambda tx: tx.ltm_get(memory_id), write=False, small=True)
        if found is None:
            raise NotFoundError(f"long-term memory {memory_id!r} does not exist (or was purged)")
        key = found.scope_key
        async with self._lock(tenant, key):

            def write(tx: Tx) -> LongTermRow:
                row = tx.ltm_get(memory_id, lock=True)
                if row is None:
                    raise NotFoundError(f"long-term memory {memory_id!r} does not exist (or was purged)")
                if not row.deleted:
                    raise FailedPreconditionError(f"id: long-term memory {memory_id!r} is not deleted")
                if tx.ltm_existing_hashes(key, [row.content_hash]):
                    raise FailedPreconditionError(
                        f"id: the scope holds a live memory with the same text as {memory_id!r}; delete it first")
                now = self._clock()
                row.deleted, row.updated, row.last_accessed = False, now, now
                row.version += 1
                row.metadata = {k: v for k, v in row.metadata.items() if k != "retired_into"}
                tx.ltm_update(row)
                tx.ltm_touch([memory_id], now)
                row.access_count += 1
                tx.ltm_history_add(memory_id, "RESTORE", None, row.text, detail, now)
                return row

            row = await self._store.run(tenant, write)
            index = self._cache.get((tenant, key))
            if index is not None:
                index.add([row])
        return item_of(row)

    async def purge(self, tenant: str, memory_ids: Sequence[str], detail: dict[str, Any]) -> builtins.list[str]:
        """Deletes for good those of `memory_ids` that are soft-deleted (history event PURGE,
        which stays); live ones are left alone. Returns the ids purged."""
        await self._ready()

        def write(tx: Tx) -> builtins.list[str]:
            gone = tx.ltm_purge(list(memory_ids))
            now = self._clock()
            for memory_id in gone:
                tx.ltm_history_add(memory_id, "PURGE", None, None, detail, now)
            return gone

        return await self._store.run(tenant, write)

    async def delete_scope(self, tenant: str, scope: Scope) -> int:
        """Forget every memory the scope covers (soft delete, kept in history)."""
        scope.validate()
        await self._ready()
        deleted = 0
        keys = await self._store.run(
            tenant, lambda tx: tx.ltm_scope_keys(scope.agent_name, scope.user_id, scope.run_name), write=False
        )
        for key in keys:
            def batch(tx: Tx, key: str = key) -> builtins.list[LongTermRow]:
                return tx.ltm_list([key], 1000)

            while True:
                ids = [r.memory_id for r in await self._store.run(tenant, batch, write=False)]
                if not ids:
                    break
                deleted += await self._soft_delete(tenant, key, ids)
        return deleted


__all__ = ["EngineSettings", "HybridEngine", "MEMORY_TYPES", "SCORE_JOB", "item_of"]
