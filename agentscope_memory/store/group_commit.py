"""Group commit: small writes that arrive together share one transaction.

On the embedded store a small write (one append, a job's state) costs a whole SQLite transaction:
taking the lock, writing the changed pages to the WAL and committing cost more than the rows
themselves. Under concurrent callers most of that is repeated for the same pages (the memory's
row, the same index pages), so writes that arrive within a few turns of the event loop are
gathered and committed together, each in a savepoint of its own: one write's error undoes only
that write, and every write is acknowledged only once the shared commit is done, so an
acknowledged write is as durable as one committed alone. The writes of a batch also share what
they read and change of memory rows and list heads (`store.sql.memories.BatchShare`): adds to
one memory arriving together read its row once and write its version and list head once.

Waiting for company costs a lone caller latency, and a lone caller (one agent, a sequential
client) never has any. So writes run alone, as before, until gathering pays: every
`_PROBE_EVERY`-th lone write waits for company; once one finds it, writes keep gathering until
`_ALONE_TO_STOP` batches in a row found none.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Awaitable, Callable, Generic, TypeVar

T = TypeVar("T")

# Turns of the event loop with no new write after which a gathering batch commits. Under load a
# new request reaches its handler every few turns (about four per add with 32 callers); 4, 8 and
# 16 turns with 2 or 4 ms gave 5,600, 5,700-6,100 and 6,050 adds/s at 32 callers (2-vCPU host).
_QUIET_TURNS = 8
# A batch commits after this long whatever still arrives, so no write waits for more than this.
_MAX_WAIT_S = 0.004
# A batch never holds more writes than this.
_MAX_BATCH = 64
# While writes run alone, one in this many waits to see whether others arrive with it.
_PROBE_EVERY = 16
# Batches of one in a row after which writes run alone again.
_ALONE_TO_STOP = 8


@dataclass(eq=False)
class PendingWrite(Generic[T]):
    """One caller's write waiting in a batch."""

    tenant: str
    fn: Callable[[Any], T]
    future: asyncio.Future[T]
    # Set when a commit took the write: from then on it runs, whatever happens to its caller.
    taken: bool = False


@dataclass(eq=False)
class _Batch:
    """The writes gathered for one commit, and when that commit is over (whatever its outcome)."""

    over: asyncio.Future[None]
    writes: list[PendingWrite[Any]] = field(default_factory=list)


@dataclass
class GroupCommitStats:
    """What gathering did: commits of gathered batches, and the writes they held."""

    batches: int = 0
    writes: int = 0
    largest: int = 0
    sizes: dict[int, int] = field(default_factory=dict)


class GroupCommit:
    """Gathers small writes on one event loop and hands each batch to `commit`, which runs every
    write of the batch and settles each one's future (result or error)."""

    def __init__(self, commit: Callable[[list[PendingWrite[Any]]], Awaitable[None]]) -> None:
        self._commit = commit
        self._open: _Batch | None = None
        self._gathering = False
        self._lone_writes = 0
        self._alone_streak = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.stats = GroupCommitStats()

    @property
    def waiting(self) -> int:
        """Writes in the batch being gathered."""
        return len(self._open.writes) if self._open is not None else 0

    def wants(self) -> bool:
        """Whether the next small write should be gathered rather than run alone now."""
        if self._open is not None or self._gathering:
            return True
        self._lone_writes += 1
        return self._lone_writes % _PROBE_EVERY == 0

    async def write(self, tenant: str, fn: Callable[[Any], T]) -> T:
        """Gather `fn`'s write and wait until its batch committed. A caller cancelled before a
        commit took its write cancels the write; one cancelled after hears of it only once the
        commit is over, so its caller's next line still follows the commit (as for a write run
        alone, which cannot be cancelled half-way)."""
        loop = asyncio.get_running_loop()
        # A full batch is left to commit and this write starts the next: writes arriving in one
        # turn (a burst of callers) would otherwise all join it before its gathering looks.
        if self._open is None or len(self._open.writes) >= _MAX_BATCH:
            self._open = _Batch(loop.create_future())
            task = loop.create_task(self._gather(self._open))
            self._tasks.add(task)
            task.add_done_callback(partial(self._ended, self._open))
        batch = self._open
        pending: PendingWrite[T] = PendingWrite(tenant, fn, loop.create_future())
        batch.writes.append(pending)
        try:
            # Awaited directly (no `asyncio.wait`, which costs a waiter and two callbacks per
            # write): a cancelled caller cancels this future, which a commit not yet begun skips
            # and one under way leaves unsettled.
            return await pending.future
        except asyncio.CancelledError:
            if pending.taken:
                await self._until_over(batch)
                if pending.future.done() and not pending.future.cancelled():
                    pending.future.exception()  # seen: the caller hears of its cancellation instead
            raise

    @staticmethod
    async def _until_over(batch: _Batch) -> None:
        """Wait for `batch`'s commit to end, whatever cancellations arrive meanwhile."""
        while not batch.over.done():
            try:
                await asyncio.wait([batch.over])
            except asyncio.CancelledError:
                pass

    async def _gather(self, batch: _Batch) -> None:
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()
        # The turns are counted by a callback scheduled again each turn: a task step per turn
        # (`sleep(0)`) costs several times as much, and a batch waits dozens of turns.
        self._turn(batch, closed, time.monotonic(), 0, 0)
        try:
            await closed
        finally:
            if not closed.done():
                closed.cancel()
            # Writes arriving from here on start the next batch.
            if self._open is batch:
                self._open = None
        live = [p for p in batch.writes if not p.future.done()]
        for p in live:
            p.taken = True
        self._record(len(live))
        try:
            if live:
                await self._commit(live)
        except Exception as exc:  # noqa: BLE001 - the batch's failure is each write's answer
            for p in live:
                if not p.future.done():
                    p.future.set_exception(exc)
        finally:
            batch.over.set_result(None)

    def _turn(self, batch: _Batch, closed: asyncio.Future[None], started: float, seen: int, quiet: int) -> None:
        if closed.done():
            return  # the gathering task was cancelled
        size = len(batch.writes)
        if size == seen:
            quiet += 1
        else:
            seen, quiet = size, 0
        if quiet >= _QUIET_TURNS or size >= _MAX_BATCH or time.monotonic() - started >= _MAX_WAIT_S:
            closed.set_result(None)
        else:
            asyncio.get_running_loop().call_soon(self._turn, batch, closed, started, seen, quiet)

    def _ended(self, batch: _Batch, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        # Cancelled (the loop shutting down, maybe before it even started): its callers hear
        # so rather than wait for ever, and the next write starts a batch of its own. Before its
        # commit nothing of the batch was written; after it began, a write may have committed
        # (as a write whose caller gave up on the lock may).
        if self._open is batch:
            self._open = None
        for pending in batch.writes:
            if not pending.future.done():
                pending.future.cancel()
        if not batch.over.done():
            batch.over.set_result(None)

    def _record(self, size: int) -> None:
        if size >= 2:
            self._gathering, self._alone_streak = True, 0
        else:
            self._alone_streak += 1
            if self._alone_streak >= _ALONE_TO_STOP:
                self._gathering = False
        if size:
            stats = self.stats
            stats.batches += 1
            stats.writes += size
            stats.largest = max(stats.largest, size)
            stats.sizes[size] = stats.sizes.get(size, 0) + 1

    async def wait_idle(self) -> None:
        """Until the batch being gathered (if any) is committed: for closing the store."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))
