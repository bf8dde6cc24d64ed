"""TIERED memory operations on stored memories: adds with importance, the compaction pass
(promotion, L1 compaction, L2 summaries, L3 vectorisation), queries across tiers, status and
the event log.

A pass reads L1-L3 in one transaction, writes summaries (LLM or offline) and long-term records
outside any transaction, then commits in a second one that first checks every item it moves is
still where it was read: items added meanwhile are new rows and stay untouched; any other
change aborts the commit (ABORTED) and the next pass decides again. Passes over one memory
never overlap in a process (a lock per memory). Writing a summary to long-term memory twice
(a crash between the write and the commit) stores it once: long-term memory keeps one copy of
a text per scope. A pass that aborts after that write records what it wrote
(`vectorize_aborted`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import contextlib
import json
import logging
import math
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Sequence, TypeVar

from agentscope_memory.errors import (
    AbortedError, DeadlineExceededError, FailedPreconditionError, InvalidArgumentError, NotFoundError,
)
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.message import Msg
from agentscope_memory.paging import cut_to_budget
from agentscope_memory.short_term.manager import AddResult, MemoryManager
from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.short_term.tiered.engine import (
    COMPACT_L1, EVICT_L3, VECTORIZE_ABORTED, VECTORIZE_L3, Selection, Tiers, ordered_l2, select_l1, select_l2, select_l3, tokens,
)
from agentscope_memory.short_term.tiered.items import (
    L1, L2, L3, L4, MARKER, MARKER_TEXT, SUMMARY, TierEvent, TierItem,
)
from agentscope_memory.short_term.tiered.kind import (
    KIND, TierStats, TieredKind, append_events, get_stats, incarnation, next_seqs, of_row, put_stats, read_events,
    read_tier, to_row,
)
from agentscope_memory.short_term.tiered.projection import MAX_SHARED_MESSAGES, Projection, ProjectionRequest, project
from agentscope_memory.short_term.tiered.summaries import EXTRACTIVE, ExtractiveTierSummarizer, TierSummarizer
from agentscope_memory.store.base import MemoryRecord, Tx
from agentscope_memory.validation.ids import check_id

if TYPE_CHECKING:
    from agentscope_memory.long_term.hybrid import HybridEngine
    from agentscope_memory.long_term.importance import Assessment, ImportanceScorer

log = logging.getLogger("agentscope_memory.tiered")

# Importance calls to the LLM in flight at once, over all adds of this service: a batch of 500
# items fired 500 requests at the LLM together (rate limits, timeouts, an overloaded server).
LLM_SCORING_CONCURRENCY = 4
# How long one add spends on LLM scoring at most (seconds); what is not scored by then, the
# heuristic scores. At four calls at a time a batch of 1000 with a one-second LLM needed 250 s,
# past every caller's deadline (the Python client's is 30 s): the add could never land.
LLM_SCORING_BUDGET_S = 10.0
# What a caller's deadline leaves after the LLM's work inside an add, for the rest of it
# (heuristic scores, the commit, the pass's commit, the answer): LLM scoring, and the pass's LLM
# summaries, end this long before the deadline; else a client with a short deadline (2 s) got
# DEADLINE_EXCEEDED while the server waited for the LLM, although its items were stored.
DEADLINE_MARGIN_S = 0.5
# How much of that margin the pass's commit may wait for the database (another program's write
# lock): a commit usually takes milliseconds, and one begun at the end of the pass's time must
# not be sent to the background for want of any; the rest is for the answer. A caller that came
# with less time than the margin gives the commit half of what it has left instead.
COMMIT_GRACE_S = 0.25
# L3 summaries a pass under a caller's deadline writes to long-term memory at once (one
# embedding call, one transaction): all at once, 50 summaries due behind a slow embedder missed
# every short deadline and none ever left L3; the deadline now wastes one batch's embedding.
VECTORIZE_BATCH = 16
DEFAULT_QUERY_LIMIT = 10
MAX_QUERY_LIMIT = 1000
MAX_QUERY_CHARS = 32 * 1024


@dataclass(frozen=True)
class TierUsage:
    tier: int
    items: int
    tokens: int
    budget: int

    @property
    def fill(self) -> float:
        return self.tokens / self.budget if self.budget else 0.0


@dataclass(frozen=True)
class TierStatus:
    """Loom's memory visualiser, as data. L4's items and tokens are the vectors this memory
    wrote to long-term memory and their tokens."""

    memory_id: str
    tiers: list[TierUsage]
    summaries: int
    l4_vectors: int
    # Tokens of what summaries replaced over tokens of the summaries (0 before any summary).
    compaction_ratio: float
    compactions: int
    compacted: bool
    evicted_summaries: int = 0


@dataclass(frozen=True)
class QueryWeights:
    """The reranker's weights of its four signals, each in [0, 1]."""

    relevance: float = 0.4
    recency: float = 0.2
    importance: float = 0.3
    frequency: float = 0.1

    def validate(self) -> QueryWeights:
        for name in ("relevance", "recency", "importance", "frequency"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and 0.0 <= value <= 1.0):
                raise InvalidArgumentError(f"weights.{name}", f"is {value!r}; must be a number from 0 to 1")
        return self


@dataclass(frozen=True)
class QueryHit:
    """One item a query found: its tier, its signals and the weighted score."""

    tier: int
    seq: int
    kind: str
    text: str
    importance: float
    relevance: float
    recency: float
    frequency: float
    score: float
    msg: Msg | None = None
    # The long-term memory's id, for L4 hits.
    long_term_id: str = ""


@dataclass
class PassOutcome:
    events: list[TierEvent] = field(default_factory=list)


# What one event's detail may carry (evicted texts, long-term ids): a pass moving thousands of
# summaries at once (a loaded L3 beyond this memory's budget) records several events, each of
# which a stock client (4 MiB) can read, list and watch.
EVENT_DETAIL_BYTES = 1024 * 1024
P = TypeVar("P")


def _parts(items: list[P], size: Callable[[P], int]) -> list[list[P]]:
    """`items` in order, cut into runs of at most `EVENT_DETAIL_BYTES` (an item larger travels alone)."""
    parts: list[list[P]] = [[]]
    used = 0
    for item in items:
        cost = size(item) + 16  # its sequence number, quotes and separators
        if parts[-1] and used + cost > EVENT_DETAIL_BYTES:
            parts.append([])
            used = 0
        parts[-1].append(item)
        used += cost
    return parts


class _LateCommit(Exception):
    """A pass's commit still under way at its caller's deadline; `commit` ends it."""

    def __init__(self, commit: asyncio.Future[list[tuple[int, TierEvent]]]) -> None:
        super().__init__("the pass's commit outlasts the caller's deadline")
        self.commit = commit


def overlap(query_terms: set[str], text: str) -> float:
    """Share of the query's terms the text holds (CJK-aware terms of the long-term engine)."""
    if not query_terms:
        return 0.0
    return len(query_terms & set(tokenize(text))) / len(query_terms)


class TieredService:
    def __init__(self, manager: MemoryManager, kind: TieredKind, summarizer: TierSummarizer | None = None,
                 long_term: HybridEngine | None = None, scorer: ImportanceScorer | None = None) -> None:
        self._manager = manager
        self.kind = kind
        # The LLM's scorer, for memories with `llm_importance` (None without an LLM).
        self._scorer = scorer
        self._scoring_slots = asyncio.Semaphore(LLM_SCORING_CONCURRENCY)
        self._summarizer = summarizer or ExtractiveTierSummarizer()
        # What a pass summarises with when its caller's deadline leaves the LLM no time: what an
        # LLM failure falls back to (`LlmTierSummarizer`), marked `extractive-fallback` alike.
        self._offline = ExtractiveTierSummarizer()
        self._long_term = long_term
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, list[int]]] = {}
        self._changed: dict[tuple[str, str], tuple[asyncio.Condition, list[int]]] = {}
        # Pass commits going on after their callers' deadlines (`_commit_later`).
        self._background: set[asyncio.Task[None]] = set()
        manager.on_added(KIND, self._after_add)
        # The memory's shared pools rendered as messages, set by the service assembly.
        self.shared_context: Callable[[str, str], Awaitable[list[Msg]]] | None = None

    @property
    def store(self):
        return self._manager.store

    @property
    def long_term(self) -> HybridEngine | None:
        return self._long_term

    # -- per-memory locks and watchers (only while in use) ---------------------------------

    @staticmethod
    @contextlib.contextmanager
    def _use(table: dict, key: tuple[str, str], make):
        entry = table.get(key)
        if entry is None:
            entry = table[key] = (make(), [0])
        entry[1][0] += 1
        try:
            yield entry[0]
        finally:
            entry[1][0] -= 1
            if entry[1][0] == 0 and table.get(key) is entry:
                del table[key]

    async def _notify(self, tenant: str, memory_id: str) -> None:
        entry = self._changed.get((tenant, memory_id))
        if entry is not None:
            async with entry[0]:
                entry[0].notify_all()

    def _record(self, tx: Tx, memory_id: str) -> MemoryRecord:
        record = tx.get_memory(memory_id)
        if record is None:
            raise NotFoundError(f"memory {memory_id!r} does not exist")
        if record.kind != KIND:
            raise FailedPreconditionError(f"memory {memory_id!r} is {record.kind}, not TIERED")
        return record

    def scope(self, memory_id: str, config: TieredConfig) -> Scope:
        if config.agent_name or config.user_id or config.run_name:
            return Scope(config.agent_name, config.user_id, config.run_name)
        return Scope(agent_name=memory_id)

    # -- adding ---------------------------------------------------------------------------

    async def add_items(self, tenant: str, memory_id: str, msgs: Sequence[Msg],
                        importances: Sequence[float | None] | None = None, request_id: str | None = None,
                        time_left_s: float | None = None) -> AddResult:
        """Add messages with their importance (None: scored, or the default), then run a pass.
        `time_left_s`: how long the caller still waits for the answer (None: no deadline); LLM
        scoring ends `DEADLINE_MARGIN_S` before that when it comes before `LLM_SCORING_BUDGET_S`,
        and so do the pass's LLM summaries (see `compact`)."""
        answer_by = None if time_left_s is None else time.monotonic() + time_left_s
        config = await self._config(tenant, memory_id)
        given: list[float | None] = list(importances) if importances is not None else [None] * len(msgs)
        methods = [""] * len(given)
        if config.score_importance and config.llm_importance and self._scorer is not None and len(given) == len(msgs):
            wanted = [i for i, (m, v) in enumerate(zip(msgs, given, strict=True)) if v is None and m.text_content.strip()]
            budget = LLM_SCORING_BUDGET_S
            if answer_by is not None:
                budget = min(budget, answer_by - DEADLINE_MARGIN_S - time.monotonic())
            scored = await self._llm_scores(self._scorer, [msgs[i].text_content for i in wanted], budget)
            for i, outcome in zip(wanted, scored, strict=True):
                if outcome is not None:
                    given[i], methods[i] = outcome.importance_score, outcome.method
        return await self._manager.add_messages(
            tenant, memory_id, msgs, request_id, importances=given, importance_methods=methods,
            time_left_s=None if answer_by is None else answer_by - time.monotonic())

    async def _llm_scores(self, scorer: ImportanceScorer, texts: list[str], budget_s: float) -> list[Assessment | None]:
        """The LLM's assessment of each text; None where the heuristic scores it inside the add
        instead: a failed call, every call of this batch not yet sent after one failed (an LLM
        that is down is not waited for once per item), and what `budget_s` seconds leave
        unscored (waiting for a turn included).

        At most `LLM_SCORING_CONCURRENCY` calls of the whole service are in flight. Each batch
        sends through that many workers of its own, so the service's queue holds a few calls of
        each batch, not all of one: a batch of 500 queued 500 calls at once, and another
        memory's one-message add waited behind all of them."""
        results: list[Assessment | None] = [None] * len(texts)
        stop_at = time.monotonic() + budget_s
        # Shared by the workers: each index is taken by one of them.
        pending = iter(range(len(texts)))
        failed = False

        async def worker() -> None:
            nonlocal failed
            for i in pending:
                # A turn is waited for within the budget too: other adds' calls hold the slots
                # for up to their own budget (10 s), past a short deadline of this add's caller.
                try:
                    await asyncio.wait_for(self._scoring_slots.acquire(), max(stop_at - time.monotonic(), 0.0))
                except TimeoutError:
                    return
                try:
                    left = stop_at - time.monotonic()
                    if failed or left <= 0:
                        return
                    try:
                        results[i] = await asyncio.wait_for(scorer.assess([texts[i]]), left)
                    except TimeoutError:
                        if time.monotonic() >= stop_at:
                            return  # out of time: the rest of the batch is the heuristic's
                        failed = True  # the LLM client's own timeout: a failed call
                        log.warning("LLM importance timed out; the heuristic scores the rest of its batch", exc_info=True)
                        return
                    except Exception:
                        failed = True
                        log.warning("LLM importance failed; the heuristic scores this item and those of its batch "
                                    "not yet sent", exc_info=True)
                        return
                finally:
                    self._scoring_slots.release()

        if budget_s <= 0:
            if texts:
                log.warning("the caller's deadline leaves no time for LLM importance; the heuristic scores the batch")
            return results
        await asyncio.gather(*(worker() for _ in range(min(LLM_SCORING_CONCURRENCY, len(texts)))))
        if any(r is None for r in results) and not failed and time.monotonic() >= stop_at:
            log.warning("LLM importance took longer than %.1fs (its budget, or the caller's deadline); the heuristic "
                        "scored the rest of the batch", budget_s)
        return results

    async def _after_add(self, tenant: str, memory_id: str, answer_by: float | None = None) -> None:
        """The pass after an add, within the add's deadline (`answer_by`, see `compact`). The add
        is committed already, so a failing pass must not fail it (a retry would only replay it):
        the tiers stay as they are, over a threshold at worst, and the next add or `CompactTiers`
        runs the pass again."""
        try:
            await self.compact(tenant, memory_id, answer_by)
        except (AbortedError, NotFoundError):
            # Another pass or a delete got there first.
            log.info("tier pass skipped", extra={"fields": {"memory_id": memory_id}}, exc_info=True)
        except Exception:  # e.g. long-term memory unavailable for L4
            log.warning("tier pass failed; the next add or CompactTiers retries it",
                        extra={"fields": {"memory_id": memory_id}}, exc_info=True)

    async def _config(self, tenant: str, memory_id: str) -> TieredConfig:
        check_id(memory_id, "memory_id")
        record = await self.store.run(tenant, lambda tx: self._record(tx, memory_id), write=False, small=True)
        return self.kind.config(record)

    # -- the pass ---------------------------------------------------------------------------

    async def compact(self, tenant: str, memory_id: str, answer_by: float | None = None
                      ) -> list[tuple[int, TierEvent]]:
        """Run one pass: every move the thresholds call for. Returns the events it recorded.

        `answer_by`: the `time.monotonic()` instant the caller stops waiting (None: no deadline).
        The pass then ends its LLM summaries `DEADLINE_MARGIN_S` before it, each one the LLM has
        not written by then made offline instead (`extractive-fallback`, as when the LLM fails),
        writes L3's summaries to long-term memory only as long (those not written by then stay
        in L3, see `_vectorize_by`), and it waits for another pass over the memory (holding its
        lock, maybe waiting for the LLM itself) only as long: past that it does nothing, and the
        next pass moves what is due. Its commit waits `COMMIT_GRACE_S` longer, then goes on in
        the background (`_commit_later`) and the pass returns no events."""
        check_id(memory_id, "memory_id")
        stop_at = None if answer_by is None else answer_by - DEADLINE_MARGIN_S
        with self._use(self._locks, (tenant, memory_id), asyncio.Lock) as lock:
            if stop_at is not None and lock.locked():
                try:
                    await asyncio.wait_for(lock.acquire(), max(stop_at - time.monotonic(), 0.0))
                except TimeoutError:
                    log.info("tier pass skipped: another pass over the memory outlasts the caller's deadline; the "
                             "next add or CompactTiers runs it", extra={"fields": {"memory_id": memory_id}})
                    return []
            else:
                await lock.acquire()
            handed_on = False
            try:
                recorded = await self._pass(tenant, memory_id, stop_at)
            except _LateCommit as late:
                handed_on = True
                self._commit_later(tenant, memory_id, late.commit, lock)
                return []
            finally:
                if not handed_on:
                    lock.release()
        if recorded:
            await self._notify(tenant, memory_id)
        return recorded

    def _commit_later(self, tenant: str, memory_id: str, committing: asyncio.Future[list[tuple[int, TierEvent]]],
                      lock: asyncio.Lock) -> None:
        """A pass's commit its caller's deadline did not wait for: it keeps the memory's pass lock
        (and its entry in the table) until it ends, so that passes still never overlap, and then
        tells the watchers, or logs why it did not commit."""
        # The memory's entry in the table stays while the commit goes on, as a pass's does.
        held = contextlib.ExitStack()
        held.enter_context(self._use(self._locks, (tenant, memory_id), asyncio.Lock))
        log.info("the caller's deadline came before the tier pass's commit; it goes on in the background",
                 extra={"fields": {"memory_id": memory_id}})

        async def end() -> None:
            try:
                recorded = await committing
            except (AbortedError, NotFoundError):
                log.info("tier pass skipped", extra={"fields": {"memory_id": memory_id}}, exc_info=True)
                recorded = []
            except Exception:
                log.warning("tier pass failed; the next add or CompactTiers retries it",
                            extra={"fields": {"memory_id": memory_id}}, exc_info=True)
                recorded = []
            finally:
                lock.release()
                held.close()
            if recorded:
                await self._notify(tenant, memory_id)

        task = asyncio.ensure_future(end())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        """Wait for the pass commits that outlived their callers' deadlines (before the store closes)."""
        await asyncio.gather(*list(self._background), return_exceptions=True)

    def _due(self, config: TieredConfig, totals: dict[int, tuple[int, int]]) -> bool:
        """Whether any threshold may be reached (L1 counted with its marker: never too low).
        Without long-term memory L3 only has its budget: a threshold it cannot act on must not
        make every add read the tiers."""
        l1, l2, l3 = (totals.get(t, (0, 0))[1] for t in (L1, L2, L3))
        l3_at = config.l3_vectorize_at * config.l3_budget if self._vectorizes(config) else config.l3_budget + 1
        return ((config.l1_compact_trigger > 0 and l1 >= config.l1_compact_trigger) or l1 > config.l1_budget
                or l2 >= config.l2_compact_at * config.l2_budget or l3 >= l3_at)

    def _vectorizes(self, config: TieredConfig) -> bool:
        return self._long_term is not None and config.vectorize

    async def _summary(self, items: list[TierItem], stop_at: float | None) -> tuple[str, str]:
        """The summary of `items` and how it was made; what the summariser has not written by
        `stop_at` (a `time.monotonic()` instant), the offline summariser writes instead."""
        if stop_at is None or isinstance(self._summarizer, ExtractiveTierSummarizer):
            return await self._summarizer.summarize(items)  # no deadline, or offline already
        left = stop_at - time.monotonic()
        if left > 0:
            try:
                return await asyncio.wait_for(self._summarizer.summarize(items), left)
            except TimeoutError:
                pass
        log.warning("the caller's deadline leaves no more time for the tier summary; using the extractive summary")
        return self._offline.summarize_now(items), EXTRACTIVE

    async def _pass(self, tenant: str, memory_id: str, stop_at: float | None = None) -> list[tuple[int, TierEvent]]:
        def snapshot(tx: Tx) -> tuple[MemoryRecord, tuple[float, str], Tiers | None]:
            record = self._record(tx, memory_id)
            # Most adds reach no threshold: one aggregate over the (budget-bounded) tiers decides.
            if not self._due(self.kind.config(record), tx.tiered_totals(memory_id)):
                return record, (0.0, ""), None
            return record, incarnation(tx, record), Tiers(read_tier(tx, memory_id, L1), read_tier(tx, memory_id, L2),
                                                          read_tier(tx, memory_id, L3))

        record, read_as, read = await self.store.run(tenant, snapshot, write=False)
        if read is None:
            return []
        tiers = read
        config = self.kind.config(record)
        first, second = select_l1(tiers, config), select_l2(tiers, config)
        now = time.time()
        made: list[tuple[Selection, TierItem]] = []
        for sel in (first, second):
            if sel is not None and sel.summarise:
                text, method = await self._summary(sel.summarise, stop_at)
                summary = TierItem(0, L3, SUMMARY, max(i.importance for i in sel.summarise),
                                   self.kind.counters.text(config.token_counter, text), now, text=text,
                                   origins=sorted({o for i in sel.summarise for o in i.origins}), method=method)
                made.append((sel, summary))
        long_term = self._vectorizes(config)
        if first is None and second is None and not self._l3_due(tiers.l3, config, long_term):
            return []
        moves = select_l3(tiers.l3 + [s for _, s in made], config, long_term)
        ltm_ids: list[str] = []
        written: set[str] = set()
        if moves.vectorize:
            # Only what reached long-term memory leaves L3; the rest (new summaries included) is
            # kept there, over its threshold, for the next pass.
            moves.vectorize, ltm_ids, written = await self._vectorize_by(tenant, memory_id, config, moves.vectorize,
                                                                         stop_at)

        def commit(tx: Tx) -> list[tuple[int, TierEvent]]:
            now_as = incarnation(tx, self._record(tx, memory_id))
            expected = {i.seq: i.tier for sel in (first, second) if sel is not None for i in sel.leaving}
            expected.update({i.seq: L3 for i in moves.vectorize + moves.evict if i.seq})
            # A loaded state (or the memory made anew) may hold other items under the same numbers.
            if now_as != read_as or tx.tiered_present(memory_id, list(expected)) != expected:
                raise AbortedError(f"the tiers of memory {memory_id!r} changed during the pass; run it again")
            tx.tiered_delete(memory_id, list(expected))
            for _, summary in made:
                summary.seq = next_seqs(tx, memory_id, 1)[0]
            gone = {id(i) for i in moves.vectorize + moves.evict}
            tx.tiered_insert(memory_id, [to_row(s) for _, s in made if id(s) not in gone])
            events: list[TierEvent] = []
            stats = get_stats(tx, memory_id)
            by_sel = {id(sel): s for sel, s in made}
            for sel in (first, second):
                if sel is None:
                    continue
                made_here = by_sel.get(id(sel))
                detail: dict[str, Any] = {"held_elsewhere": [i.seq for i in sel.leaving if i not in sel.summarise]}
                if made_here is not None:
                    detail.update({"summary_seq": made_here.seq, "method": made_here.method})
                    stats.summaries_made += 1
                    stats.source_tokens += tokens(sel.summarise)
                    stats.summary_tokens += made_here.tokens
                if sel.kind == COMPACT_L1:
                    stats.compactions += 1
                    self._mark(tx, memory_id, config, tiers, sel, made_here, now)
                if sel.from_tier == L2:
                    self._cover(tx, memory_id, tiers, sel)
                events.append(TierEvent(sel.kind, sel.from_tier, L3, [i.seq for i in sel.leaving],
                                        tokens(sel.leaving), now, detail))
            if moves.vectorize:
                stats.l4_vectors += len(moves.vectorize)
                stats.l4_tokens += tokens(moves.vectorize)
                for pairs in _parts(list(zip(moves.vectorize, ltm_ids, strict=True)), lambda pair: len(pair[1])):
                    items = [item for item, _ in pairs]
                    events.append(TierEvent(VECTORIZE_L3, L3, L4, [i.seq for i in items], tokens(items), now,
                                            {"long_term_ids": [ltm_id for _, ltm_id in pairs if ltm_id],
                                             "memory_type": SUMMARY}))
            if moves.evict:
                stats.evicted_summaries += len(moves.evict)
                for part in _parts(moves.evict, lambda i: len(i.text.encode("utf-8"))):
                    events.append(TierEvent(EVICT_L3, L3, 0, [i.seq for i in part], tokens(part), now,
                                            {"texts": [i.text for i in part]}))
            put_stats(tx, memory_id, stats)
            tx.touch_memory(memory_id)
            return append_events(tx, memory_id, events)

        async def finish() -> list[tuple[int, TierEvent]]:
            try:
                return await self.store.run(tenant, commit)
            except AbortedError:
                if written:
                    await self._record_aborted(tenant, memory_id, read_as, moves.vectorize,
                                               [i if i in written else "" for i in ltm_ids], now)
                raise

        if stop_at is None:
            return await finish()
        # The commit waits for the database's write lock (another program's, or long writes of
        # this process: up to SQLite's busy timeout). A transaction is not cut short: it goes on
        # and commits whole or not at all, while the caller gets its answer.
        committing = asyncio.ensure_future(finish())
        now = time.monotonic()
        answer_by = stop_at + DEADLINE_MARGIN_S
        commit_by = max(stop_at + COMMIT_GRACE_S, now + (answer_by - now) / 2)
        try:
            return await asyncio.wait_for(asyncio.shield(committing), max(commit_by - now, 0.0))
        except TimeoutError:
            raise _LateCommit(committing) from None

    async def _record_aborted(self, tenant: str, memory_id: str, read_as: tuple[float, str], items: list[TierItem],
                              ltm_ids: list[str], now: float) -> None:
        """Record the long-term memories an aborted pass wrote (`vectorize_aborted`), so that none
        is there without an event naming it. They are not deleted: a writer of the same scope
        that found their text held already (another replica's pass over these very summaries,
        or another memory writing the same text) relies on them. Only while the memory is the
        one the pass read: deleted, made anew or loaded, its event log is another one."""
        written = [(item, ltm_id) for item, ltm_id in zip(items, ltm_ids, strict=True) if ltm_id]

        def record(tx: Tx) -> list[tuple[int, TierEvent]]:
            current = tx.get_memory(memory_id)
            if current is None or current.kind != KIND or incarnation(tx, current) != read_as:
                return []
            events = []
            for pairs in _parts(written, lambda pair: len(pair[1])):
                moved = [item for item, _ in pairs]
                events.append(TierEvent(VECTORIZE_ABORTED, L3, L4, [i.seq for i in moved], tokens(moved), now,
                                        {"long_term_ids": [ltm_id for _, ltm_id in pairs], "memory_type": SUMMARY}))
            tx.touch_memory(memory_id)
            return append_events(tx, memory_id, events)

        try:
            recorded = await self.store.run(tenant, record)
        except Exception:  # the pass's abort is what the caller hears of; this is its aftermath
            log.warning("an aborted tier pass could not record the long-term memories it wrote",
                        extra={"fields": {"memory_id": memory_id, "long_term_ids": [i for _, i in written]}},
                        exc_info=True)
            return
        if not recorded:
            log.info("an aborted tier pass wrote long-term memories of a memory since deleted or replaced",
                     extra={"fields": {"memory_id": memory_id, "long_term_ids": [i for _, i in written]}})
            return
        await self._notify(tenant, memory_id)

    @staticmethod
    def _l3_due(l3: list[TierItem], config: TieredConfig, long_term: bool) -> bool:
        return tokens(l3) >= (config.l3_vectorize_at * config.l3_budget if long_term else config.l3_budget + 1)

    def _mark(self, tx: Tx, memory_id: str, config: TieredConfig, tiers: Tiers, sel: Selection,
              summary: TierItem | None, now: float) -> None:
        """Replace L1's compaction marker: it sorts before every item L1 keeps."""
        tx.tiered_delete(memory_id, [i.seq for i in tiers.l1 if i.kind == MARKER])
        where = f" into session summary #{summary.seq}" if summary is not None else ""
        text = (f"{MARKER_TEXT}: {len(sel.leaving)} earlier messages were summarised{where}; "
                "the summaries and important items are kept in the tiered memory.")
        from agentscope_memory.message import MsgRole, TextBlock

        msg = Msg(id=f"tiered-marker-{uuid.uuid4()}", name="memory", role=MsgRole.SYSTEM, content=[TextBlock(text)],
                  metadata={"tiered_kind": MARKER})
        marker = TierItem(max(i.seq for i in sel.leaving), L1, MARKER, 0.0,
                          self.kind.count_tokens(config, msg), now, msg, method="marker")
        tx.tiered_insert(memory_id, [to_row(marker)])

    @staticmethod
    def _cover(tx: Tx, memory_id: str, tiers: Tiers, sel: Selection) -> None:
        """L1 messages whose L2 copies were summarised need no second summary when they leave L1."""
        origins = {o for i in sel.leaving for o in i.origins}
        for item in tiers.l1:
            if item.seq in origins and not item.covered:
                tx.tiered_set_body(memory_id, item.seq, replace(item, covered=True).body_json())

    async def _vectorize_by(self, tenant: str, memory_id: str, config: TieredConfig, items: list[TierItem],
                            stop_at: float | None) -> tuple[list[TierItem], list[str], set[str]]:
        """Writes `items` (oldest first) to long-term memory, as many as it can by `stop_at` (a
        `time.monotonic()` instant; None: all of them); returns those written, the id holding
        each ("" when none does any more) and the ids this call wrote.

        Under a deadline they go `VECTORIZE_BATCH` at a time, each batch whole or not at all
        (the engine writes nothing it could not embed in time): a pass with many summaries due
        moves some of them rather than none, so adds under short deadlines still empty L3 in
        turn. The rest stay in L3 for the next pass or `CompactTiers`; one that reached
        long-term memory in a pass that then aborts is named by `vectorize_aborted` and stored
        once all the same (see the module)."""
        size = len(items) if stop_at is None else VECTORIZE_BATCH
        moved: list[TierItem] = []
        ids: list[str] = []
        written: set[str] = set()
        for start in range(0, len(items), size):
            batch = items[start:start + size]
            try:
                found, batch_written = await self._vectorize(tenant, memory_id, config, batch, stop_at)
            except DeadlineExceededError as exc:
                log.warning("the caller's deadline leaves no more time for writing L3 summaries to long-term memory "
                            "(%s); %d of %d stay in L3 for the next pass or CompactTiers", exc, len(items) - start,
                            len(items), extra={"fields": {"memory_id": memory_id}})
                break
            except Exception:  # long-term memory unavailable: the summaries wait in L3
                log.warning("tier pass could not write long-term memory; L3 keeps %d of its summaries",
                            len(items) - start, extra={"fields": {"memory_id": memory_id}}, exc_info=True)
                break
            known = [(item, ltm_id) for item, ltm_id in zip(batch, found, strict=True) if ltm_id is not None]
            moved += [item for item, _ in known]
            ids += [ltm_id for _, ltm_id in known]
            written |= batch_written
            if len(known) < len(batch):
                log.warning("the caller's deadline came before long-term memory named the holders of %d L3 summaries "
                            "it held already; they and the %d after this batch stay in L3 for the next pass or "
                            "CompactTiers", len(batch) - len(known), len(items) - start - len(batch),
                            extra={"fields": {"memory_id": memory_id}})
                break
        return moved, ids, written

    async def _vectorize(self, tenant: str, memory_id: str, config: TieredConfig, items: list[TierItem],
                         write_by: float | None = None) -> tuple[list[str | None], set[str]]:
        """Writes `items` to long-term memory, by `write_by` or not at all (`DeadlineExceededError`);
        returns the id holding each ("" when none does any more; None for a text held already
        whose holder the lookup after the write had not named by `write_by`) and the ids this
        call wrote."""
        from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
        from agentscope_memory.store.base import LongTermRow

        assert self._long_term is not None
        scope = self.scope(memory_id, config).validate("tiered_config")
        now = time.time()
        rows = [LongTermRow(
            memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name, user_id=scope.user_id,
            run_name=scope.run_name, text=i.text, lex_terms=" ".join(tokenize(i.text)),
            metadata={"tiered_memory_id": memory_id, "summary_method": i.method,
                      "offline": i.method != "llm", "tiered_origins": i.origins},
            memory_type=SUMMARY, importance=i.importance, importance_method="tiered", created=now, updated=now,
            last_accessed=now, content_hash=content_hash(i.text),
            source={"memory_ids": [memory_id], "tiered_origins": i.origins},
        ) for i in items]
        inserted = {r.memory_id for r in await self._long_term.insert(tenant, scope, rows, write_by=write_by,
                                                                      history_detail={"tiered_memory_id": memory_id})}
        # One per item: a text long-term memory held already (stored once per scope) is named by
        # the memory holding it. Often this memory's own earlier write: a pass cancelled (its
        # caller's deadline) or killed between that write and its commit names it nowhere else.
        held = [r.content_hash for r in rows if r.memory_id not in inserted]
        holders: dict[str, str] | None = {}
        if held:
            key = rows[0].scope_key
            lookup = self.store.run(tenant, lambda tx: tx.ltm_live_ids_by_hash(key, held), write=False, small=True)
            if write_by is None:
                holders = await lookup
            else:
                # A read, safe to give up on: it waits for the database behind another program's
                # lock (up to SQLite's busy timeout). What this call wrote is known without it.
                try:
                    holders = await asyncio.wait_for(lookup, max(write_by - time.monotonic(), 0.0))
                except TimeoutError:
                    holders = None
        return [r.memory_id if r.memory_id in inserted else None if holders is None else holders.get(r.content_hash, "")
                for r in rows], inserted

    # -- reading ----------------------------------------------------------------------------

    async def tiers(self, tenant: str, memory_id: str) -> tuple[TieredConfig, Tiers]:
        """The memory's configuration and L1-L3 (L2 most important first), in one snapshot."""
        check_id(memory_id, "memory_id")

        def read(tx: Tx) -> tuple[MemoryRecord, Tiers]:
            record = self._record(tx, memory_id)
            return record, Tiers(read_tier(tx, memory_id, L1), ordered_l2(read_tier(tx, memory_id, L2)),
                                 read_tier(tx, memory_id, L3))

        record, tiers = await self.store.run(tenant, read, write=False)
        return self.kind.config(record), tiers

    async def status(self, tenant: str, memory_id: str) -> TierStatus:
        check_id(memory_id, "memory_id")

        def read(tx: Tx) -> tuple[MemoryRecord, dict[int, tuple[int, int]], TierStats, bool]:
            record = self._record(tx, memory_id)
            first = tx.tiered_rows(memory_id, L1, 0, 1)
            return record, tx.tiered_totals(memory_id), get_stats(tx, memory_id), bool(first and first[0].kind == MARKER)

        record, totals, stats, marked = await self.store.run(tenant, read, write=False, small=True)
        config = self.kind.config(record)
        usage = [TierUsage(t, totals.get(t, (0, 0))[0], totals.get(t, (0, 0))[1], config.budget(t)) for t in (L1, L2, L3)]
        usage.append(TierUsage(L4, stats.l4_vectors, stats.l4_tokens, config.l4_budget))
        ratio = stats.source_tokens / stats.summary_tokens if stats.summary_tokens else 0.0
        return TierStatus(memory_id, usage, totals.get(L3, (0, 0))[0], stats.l4_vectors, round(ratio, 4),
                          stats.compactions, marked, stats.evicted_summaries)

    async def query(self, tenant: str, memory_id: str, text: str, limit: int = 0,
                    tiers: Sequence[int] = (), weights: QueryWeights | None = None) -> list[QueryHit]:
        """Items of L1-L3 (by recency and importance) and L4 (the long-term search) that match
        `text`, best first by the weighted relevance, recency, importance and frequency."""
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidArgumentError("query", f"has {len(text)} characters; at most {MAX_QUERY_CHARS}")
        if limit < 0 or limit > MAX_QUERY_LIMIT:
            raise InvalidArgumentError("limit", f"is {limit}; must be from 0 (default {DEFAULT_QUERY_LIMIT}) to {MAX_QUERY_LIMIT}")
        wanted = set(tiers) or {L1, L2, L3, L4}
        for t in wanted:
            if t not in (L1, L2, L3, L4):
                raise InvalidArgumentError("tiers", f"has {t}; tiers are 1 to 4")
        weights = (weights or QueryWeights()).validate()
        limit = limit or DEFAULT_QUERY_LIMIT
        config, held = await self.tiers(tenant, memory_id)
        terms = set(tokenize(text))
        items = [i for t, part in ((L1, held.l1), (L2, held.l2), (L3, held.l3)) if t in wanted for i in part
                 if i.kind != MARKER]
        newest = sorted({i.seq for i in items}, reverse=True)
        rank = {seq: n for n, seq in enumerate(newest)}
        hits: list[QueryHit] = []
        for item in items:
            relevance = overlap(terms, item.content)
            if terms and relevance == 0.0:
                continue
            recency = 1.0 / (1.0 + 0.1 * rank[item.seq])
            frequency = min(1.0, math.log1p(item.hits) / math.log1p(10))
            score = (weights.relevance * relevance + weights.recency * recency + weights.importance * item.importance
                     + weights.frequency * frequency)
            hits.append(QueryHit(item.tier, item.seq, item.kind, item.content, item.importance, relevance, recency,
                                 frequency, round(score, 6), item.msg))
        if L4 in wanted and self._long_term is not None and text.strip():
            found, _ = await self._long_term.search_ranked(tenant, self.scope(memory_id, config), text, touch=False)
            for lt in found:
                relevance = min(1.0, max(0.0, lt.scores.semantic if lt.scores is not None else (lt.score or 0.0)))
                importance = lt.importance if lt.importance is not None else config.default_importance
                frequency = min(1.0, math.log1p(lt.access_count) / math.log1p(10))
                recency = lt.scores.decay if lt.scores is not None else 0.0
                score = (weights.relevance * relevance + weights.recency * recency + weights.importance * importance
                         + weights.frequency * frequency)
                hits.append(QueryHit(L4, 0, lt.memory_type, lt.text, importance, relevance, recency, frequency,
                                     round(score, 6), None, lt.id))
        hits.sort(key=lambda h: (-h.score, -h.seq))
        hits = hits[:limit]
        # Only the long-term memories the caller gets count as recalled.
        if self._long_term is not None:
            self._long_term.touch(tenant, [h.long_term_id for h in hits if h.tier == L4])
        seen = [h.seq for h in hits if h.tier != L4]
        if seen:
            await self.store.run(tenant, lambda tx: tx.tiered_hit(memory_id, seen), small=True)
        return hits

    # -- events ---------------------------------------------------------------------------

    async def events(self, tenant: str, memory_id: str, after_seq: int = 0, limit: int | None = None
                     ) -> list[tuple[int, TierEvent]]:
        check_id(memory_id, "memory_id")
        if after_seq < 0:
            raise InvalidArgumentError("after_sequence", "must not be negative")

        def read(tx: Tx) -> list[tuple[int, TierEvent]]:
            self._record(tx, memory_id)
            return read_events(tx, memory_id, after_seq, limit)

        return await self.store.run(tenant, read, write=False)

    async def watch(self, tenant: str, memory_id: str, after_seq: int = 0) -> AsyncIterator[tuple[int, TierEvent]]:
        """Events after `after_seq`, then new ones as they are recorded (polled every second
        too, so events committed by another replica arrive)."""
        last = after_seq
        with self._use(self._changed, (tenant, memory_id), asyncio.Condition) as condition:
            while True:
                for seq, event in await self.events(tenant, memory_id, last):
                    last = seq
                    yield seq, event
                async with condition:
                    try:
                        await asyncio.wait_for(condition.wait(), 1.0)
                    except asyncio.TimeoutError:
                        pass

    # -- projection -----------------------------------------------------------------------

    async def project(self, tenant: str, memory_id: str, request: ProjectionRequest) -> Projection:
        """The messages for the next model call (see `projection.py`). Without shared context
        from the caller, the memory's own shared pools give it (`pool/attachments.py`)."""
        if not request.shared_context and self.shared_context is not None:
            shared = await self.shared_context(tenant, memory_id)
            if shared:
                # The pools render newest first, the section keeps the newest of a list that ends
                # with them (a caller's `shared_context`): reversed, so a tight budget drops the
                # oldest entries, and only as many as a request may bring (the pools may hold more).
                request = dataclasses.replace(request, shared_context=shared[MAX_SHARED_MESSAGES - 1::-1])
        return await project(self, tenant, memory_id, request)

    # -- pages (every response stays under the receive limit) ------------------------------

    def _page_size(self, requested: int, default: int, maximum: int) -> int:
        if requested < 0:
            raise InvalidArgumentError("page_size", "must not be negative")
        return min(requested or default, maximum)

    async def events_page(self, tenant: str, memory_id: str, after_seq: int = 0, page_size: int = 0,
                          page_token: str = "") -> tuple[list[tuple[int, TierEvent]], str]:
        """A page of events after `after_seq`, cut at the page byte budget."""
        check_id(memory_id, "memory_id")
        if after_seq < 0:
            raise InvalidArgumentError("after_sequence", "must not be negative")
        tokens_ = self._manager.tokens
        await tokens_.ready()
        binding: list[str | int] = [tenant, memory_id, page_size, after_seq]
        after = tokens_.read(page_token, "tier_events", binding, 1)[0] if page_token else after_seq
        size = self._page_size(page_size, 1000, 10_000)

        def read(tx: Tx) -> list[tuple[int, TierEvent, int]]:
            self._record(tx, memory_id)
            return [(r.seq, TierEvent.from_dict(json.loads(r.data)), len(r.data))
                    for r in tx.read(memory_id, "tier_events", after, size + 1)]

        rows = await self.store.run(tenant, read, write=False)
        more = len(rows) > size
        rows = rows[:size]
        kept = cut_to_budget(rows, lambda r: r[2], self._manager.limits.max_page_bytes)
        more = more or kept < len(rows)
        rows = rows[:kept]
        token = tokens_.issue("tier_events", binding, [rows[-1][0]]) if more and rows else ""
        return [(seq, event) for seq, event, _ in rows], token

    async def items_page(self, tenant: str, memory_id: str, tier: int, page_size: int = 0,
                         page_token: str = "") -> tuple[list[TierItem], str]:
        """A page of one tier's items, oldest first, cut at the page byte budget."""
        check_id(memory_id, "memory_id")
        if tier not in (L1, L2, L3):
            raise InvalidArgumentError("tier", "must be TIER_L1, TIER_L2 or TIER_L3")
        tokens_ = self._manager.tokens
        await tokens_.ready()
        binding: list[str | int] = [tenant, memory_id, page_size, tier]
        after = tokens_.read(page_token, "tier_items", binding, 1)[0] if page_token else 0
        size = self._page_size(page_size, 100, 1000)

        def read(tx: Tx) -> list[tuple[TierItem, int]]:
            self._record(tx, memory_id)
            return [(of_row(r), len(r.body)) for r in tx.tiered_rows(memory_id, tier, after, size + 1)]

        rows = await self.store.run(tenant, read, write=False)
        more = len(rows) > size
        rows = rows[:size]
        kept = cut_to_budget(rows, lambda r: r[1], self._manager.limits.max_page_bytes)
        more = more or kept < len(rows)
        rows = rows[:kept]
        token = tokens_.issue("tier_items", binding, [rows[-1][0].seq]) if more and rows else ""
        return [item for item, _ in rows], token
