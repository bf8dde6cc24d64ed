"""Coherent caching of a memory's messages: leases and invalidations, for one server process.

A client that watches a memory (`MemoryService.WatchMessages`) holds a short lease it renews;
while its lease is fresh and no invalidation has arrived, it answers `getMessages` from its own
copy with no call at all. That is only correct if no write can be acknowledged while a watcher
still trusts an older copy, so every committed change of a watched memory is announced to each
watcher (the new etag, and the added messages when only messages were added), and the write is
acknowledged to its writer only once every watcher has acknowledged the announcement or that
watcher's lease has run out. A client counts its lease from the moment it *sent* the renewal,
the server from when it received it, so the client stops trusting its copy no later than the
server stops waiting for it.

The announcement comes from `WatchedStore`, which wraps the store every engine writes through:
any write transaction that changed a memory (a version bump, a deletion, a creation; the same
events that change an etag) is announced, whichever engine or path made it. That needs every
write to pass through this process, so the server offers it on the embedded stores only (sqlite,
memory), never on PostgreSQL, where other replicas write too; and a program writing the same
sqlite file in local mode while the server runs would bypass it (the server's `coherent_cache`
setting turns it off).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from agentscope_memory.errors import NotFoundError
from agentscope_memory.paging import ListState
from agentscope_memory.store.base import Store, Tx
from agentscope_memory.validation.ids import check_id

__all__ = ["Changed", "Coherence", "LeaseGranted", "Started", "WatchedStore", "Watcher", "writes_of"]

log = logging.getLogger("agentscope_memory.coherence")

T = TypeVar("T")

DEFAULT_LEASE_S = 2.0
# The most added messages an announcement carries; more, and the watcher reads them itself.
MAX_ANNOUNCED_MESSAGES = 100

# The watch of the client whose write is running: it learns the outcome from the write's own
# response, so the write does not wait for it to acknowledge an announcement.
_writer_watch: contextvars.ContextVar[str] = contextvars.ContextVar("writer_watch", default="")
_written: contextvars.ContextVar[dict[str, Written] | None] = contextvars.ContextVar("written", default=None)


@dataclass(frozen=True)
class Written:
    """A write's own account of a memory it changed: the etags before and after, and the state
    after. When nobody but the writer's own watch watches the memory, its announcement takes the
    new state from here instead of reading it again."""

    previous_etag: str
    etag: str
    state: ListState


class writes_of:
    """Within this block, write transactions do not wait for the watch `watch_id` (the writer's
    own, whose client applies the write's response itself). Wrap exactly the transaction whose
    outcome the response reports: a later one (a TIERED pass after an add) must be announced.
    The transaction may put its account of what it wrote (`Written`, by memory id) in the dict
    this yields.

    A class rather than a generator-based context manager: it wraps every add, and a
    generator's set-up costs more than the two context variables it sets."""

    __slots__ = ("_watch_id", "_tokens")

    def __init__(self, watch_id: str) -> None:
        self._watch_id = watch_id

    def __enter__(self) -> dict[str, Written]:
        written: dict[str, Written] = {}
        self._tokens = (_writer_watch.set(self._watch_id), _written.set(written))
        return written

    def __exit__(self, *exc: object) -> None:
        watch_token, written_token = self._tokens
        _written.reset(written_token)
        _writer_watch.reset(watch_token)


@dataclass(frozen=True)
class Started:
    """The watch is registered: `etag` names the messages now; the subscription was the first
    renewal of a lease of `lease_s` seconds."""

    watch_id: str
    etag: str
    lease_s: float
    # Messages at `etag`.
    count: int = 0


@dataclass(frozen=True)
class LeaseGranted:
    """The renewal numbered `renewal` was granted for `lease_s` seconds from when it was sent."""

    renewal: int
    lease_s: float


@dataclass(frozen=True)
class Changed:
    """The memory changed: its messages are now named `etag` ("" when the memory no longer
    exists). When `appended`, the messages named `previous_etag` followed by `stored` are the
    messages now. Acknowledge with `sequence`."""

    sequence: int
    etag: str
    previous_etag: str
    appended: bool
    stored: list[bytes]
    exists: bool


Event = Started | LeaseGranted | Changed


@dataclass(frozen=True)
class WatchState:
    """A memory's messages as an announcement names them."""

    exists: bool
    etag: str
    state: ListState | None
    # True when `stored` are the messages added since the state asked about.
    appended: bool = False
    stored: list[bytes] = field(default_factory=list)


@dataclass(eq=False)
class Watcher:
    """One client's watch of one memory."""

    watch_id: str
    tenant: str
    memory_id: str
    # The watch's events, in order. Its stream may queue items of its own in between (the answers
    # to adds it carries), so they go out in the order they came: only `Event`s come from here.
    outbox: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    # Server clock; 0 once lapsed (a write stopped waiting for it).
    lease_until: float = 0.0
    # Announcements not acknowledged yet, by sequence.
    unacked: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    next_sequence: int = 1
    closed: bool = False


@dataclass(eq=False)
class _Watched:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    watchers: dict[str, Watcher] = field(default_factory=dict)
    # What the last announcement (or registration) named: the base of the next delta.
    last: ListState | None = None
    last_etag: str = ""
    # Registrations under way (waiting for the lock): the entry must outlive them.
    joining: int = 0


class Coherence:
    """The watches of one server process and the announcements of changes to them."""

    def __init__(self, read_state: Callable[[str, str, ListState | None, int], Awaitable[WatchState]],
                 lease_s: float = DEFAULT_LEASE_S, clock: Callable[[], float] = time.monotonic) -> None:
        # `read_state(tenant, memory_id, since, max_messages)` -> WatchState (MemoryManager.watch_state).
        self._read_state = read_state
        self.lease_s = lease_s
        self._clock = clock
        self._memories: dict[tuple[str, str], _Watched] = {}

    def watching(self, tenant: str, memory_id: str) -> int:
        """How many watches the memory has."""
        entry = self._memories.get((tenant, memory_id))
        return len(entry.watchers) if entry else 0

    async def watch(self, tenant: str, memory_id: str) -> Watcher:
        """Register a watch; its first event is `Started`. NOT_FOUND when the memory does not exist."""
        check_id(memory_id, "memory_id")
        entry = self._memories.setdefault((tenant, memory_id), _Watched())
        entry.joining += 1
        try:
            await entry.lock.acquire()
        finally:
            entry.joining -= 1
        watcher = Watcher(secrets.token_urlsafe(16), tenant, memory_id)
        try:
            # Registered before the state is read: a write committed after the read finds the
            # watcher and announces itself (waiting for this lock); one committed before it is in
            # what the read returns.
            entry.watchers[watcher.watch_id] = watcher
            watcher.lease_until = self._clock() + self.lease_s
            current = await self._read_state(tenant, memory_id, None, 0)
            if not current.exists:
                raise NotFoundError(f"memory {memory_id!r} does not exist")
            entry.last, entry.last_etag = current.state, current.etag
            count = current.state.count if current.state is not None else 0
            watcher.outbox.put_nowait(Started(watcher.watch_id, current.etag, self.lease_s, count))
        except BaseException:
            watcher.closed = True
            entry.watchers.pop(watcher.watch_id, None)
            raise
        finally:
            entry.lock.release()
            self._forget_if_idle(tenant, memory_id, entry)
        return watcher

    def renew(self, watcher: Watcher, renewal: int) -> None:
        """Extend the lease, unless an announcement still waits for its acknowledgement: a client
        that does not take in announcements must not keep a fresh lease."""
        if watcher.closed or watcher.unacked:
            return
        watcher.lease_until = self._clock() + self.lease_s
        watcher.outbox.put_nowait(LeaseGranted(renewal, self.lease_s))

    def ack(self, watcher: Watcher, sequence: int) -> None:
        """Acknowledge every announcement up to `sequence` (they arrive in order)."""
        for seq in [s for s in watcher.unacked if s <= sequence]:
            future = watcher.unacked.pop(seq)
            if not future.done():
                future.set_result(None)

    def close(self, watcher: Watcher, released: bool) -> None:
        """The watch's stream ended. `released`: its client ended it (after it stopped trusting
        its copy), so writes stop waiting for it. Otherwise (cancelled, connection lost, server
        stopping) the client may not know yet and may still trust its copy until its lease
        runs out: until then every write waits for that, as for a watcher that does not ack."""
        if watcher.closed and not released:
            return
        watcher.closed = True
        if released or watcher.lease_until <= self._clock():
            self.ack(watcher, watcher.next_sequence)
            self._remove(watcher)

    def _remove(self, watcher: Watcher) -> None:
        entry = self._memories.get((watcher.tenant, watcher.memory_id))
        if entry is not None and entry.watchers.get(watcher.watch_id) is watcher:
            del entry.watchers[watcher.watch_id]
            self._forget_if_idle(watcher.tenant, watcher.memory_id, entry)

    def _forget_if_idle(self, tenant: str, memory_id: str, entry: _Watched) -> None:
        if (not entry.watchers and not entry.joining and not entry.lock.locked()
                and self._memories.get((tenant, memory_id)) is entry):
            del self._memories[(tenant, memory_id)]

    def settled(self, tenant: str, memory_id: str, skip: str, written: Written | None) -> bool:
        """Takes in a committed change with nothing to announce, when that can be done at once:
        the memory's only watch is the writer's own (`skip`, not told of its own writes), no
        announcement is under way, and the writer's account (`written`) follows the state last
        taken in, so it becomes the base of the next announcement's delta with no read. False:
        announce it with `changed`."""
        entry = self._memories.get((tenant, memory_id))
        if entry is None or not entry.watchers:
            return True
        if (written is None or entry.lock.locked() or entry.joining or entry.last_etag != written.previous_etag
                or any(w.closed or w.watch_id != skip for w in entry.watchers.values())):
            return False
        entry.last, entry.last_etag = written.state, written.etag
        return True

    async def changed(self, tenant: str, memory_id: str, skip: str = "") -> None:
        """Announce a committed change of `memory_id` to its watchers (except `skip`) and return
        once each has acknowledged it or its lease ran out."""
        entry = self._memories.get((tenant, memory_id))
        if entry is None or not entry.watchers:
            return
        async with entry.lock:
            # The added messages only when a watcher will be sent them: a write whose only watch
            # is its writer's (skipped) needs just the new state, the base of the next delta.
            told = any(not w.closed and w.watch_id != skip for w in entry.watchers.values())
            current = await self._read_state(tenant, memory_id, entry.last, MAX_ANNOUNCED_MESSAGES if told else 0)
            previous = entry.last_etag
            entry.last, entry.last_etag = current.state, current.etag
            loop = asyncio.get_running_loop()
            now = self._clock()
            waits: list[tuple[Watcher, asyncio.Future[None]]] = []
            for watcher in list(entry.watchers.values()):
                if watcher.closed:
                    if watcher.lease_until > now:
                        # Gone without a word: its client may trust its copy until its lease ends.
                        waits.append((watcher, loop.create_future()))
                    else:
                        self._remove(watcher)
                    continue
                if watcher.watch_id == skip:
                    continue
                sequence = watcher.next_sequence
                watcher.next_sequence += 1
                # Sent even when the last announcement already named this state: a skipped
                # writer's watch learns of later writes only from here.
                watcher.outbox.put_nowait(Changed(sequence, current.etag, previous, current.appended,
                                                  current.stored, current.exists))
                if watcher.lease_until > now:
                    future = loop.create_future()
                    watcher.unacked[sequence] = future
                    waits.append((watcher, future))
            for watcher, future in waits:
                left = watcher.lease_until - self._clock()
                try:
                    await asyncio.wait_for(asyncio.shield(future), max(left, 0.0))
                except TimeoutError:
                    # Its client stopped trusting its copy when its lease ran out; later writes
                    # do not wait for it until it acknowledges and renews.
                    watcher.lease_until = 0.0
                    if watcher.closed:
                        self._remove(watcher)
                    else:
                        log.warning("memory %r: a watcher did not acknowledge a change within its lease", memory_id)


def _consume_outcome(task: asyncio.Future[Any]) -> None:
    # The shielded write's caller may be gone: its failure is the caller's (already cancelled)
    # business, so mark it retrieved rather than log it as never retrieved.
    if not task.cancelled():
        task.exception()


def _tracking(fn: Callable[[Tx], T]) -> tuple[Callable[[Tx], T], list[set[str]]]:
    """`fn`, and the list it fills with the memories its transaction changed (once it ran)."""
    changed: list[set[str]] = []

    def tracked(tx: Tx) -> T:
        result = fn(tx)
        changed.append(tx.changed_memories())
        return result

    return tracked, changed


class WatchedStore:
    """A store whose write transactions announce the memories they changed to `coherence`
    before the write returns to its caller (see the module docstring)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.coherence: Coherence | None = None

    async def run(self, tenant: str, fn: Callable[[Tx], T], *, write: bool = True, small: bool = False) -> T:
        coherence = self.coherence
        if not write or coherence is None:
            return await self.inner.run(tenant, fn, write=write, small=small)
        if small and getattr(self.inner, "inline_small_writes", False):
            return await self._write_inline(coherence, tenant, fn)
        # A caller cancelled mid-write (a client's deadline) must not stop the announcement: the
        # transaction may commit in its worker thread all the same, and a watcher that never
        # hears of it would go on trusting its copy. So the write and its announcement run as one
        # task the caller's cancellation does not reach.
        task = asyncio.ensure_future(self._write_and_announce(coherence, tenant, fn, small))
        task.add_done_callback(_consume_outcome)
        return await asyncio.shield(task)

    async def _write_inline(self, coherence: Coherence, tenant: str, fn: Callable[[Tx], T]) -> T:
        """A small write on a store that runs it inline: the caller cannot be cancelled between
        the commit and the line after the `await` (nothing suspends in between), so the
        announcement is started right there, as its own task, only when the memory has watchers.
        A write nobody watches costs no task and no extra turn of the event loop."""
        tracked, changed = _tracking(fn)
        try:
            result = await self.inner.run(tenant, tracked, write=True, small=True)
        except asyncio.CancelledError:
            # The store waited for a lock another program held and the caller was cancelled
            # meanwhile: the transaction is over, and if it ran it may have committed.
            if changed:
                task = asyncio.ensure_future(self._announce(coherence, tenant, sorted(changed[-1]), _writer_watch.get()))
                task.add_done_callback(_consume_outcome)
            raise
        watched = [m for m in sorted(changed[-1]) if coherence.watching(tenant, m)] if changed else []
        skip, written = _writer_watch.get(), _written.get() or {}
        watched = [m for m in watched if not coherence.settled(tenant, m, skip, written.get(m))]
        if watched:
            task = asyncio.ensure_future(self._announce(coherence, tenant, watched, skip))
            task.add_done_callback(_consume_outcome)
            await asyncio.shield(task)
        return result

    @staticmethod
    async def _announce(coherence: Coherence, tenant: str, memory_ids: list[str], skip: str) -> None:
        for memory_id in memory_ids:
            await coherence.changed(tenant, memory_id, skip)

    async def _write_and_announce(self, coherence: Coherence, tenant: str, fn: Callable[[Tx], T], small: bool) -> T:
        tracked, changed = _tracking(fn)
        result = await self.inner.run(tenant, tracked, write=True, small=small)
        if changed:
            await self._announce(coherence, tenant, sorted(changed[-1]), _writer_watch.get())
        return result

    async def close(self) -> None:
        await self.inner.close()
