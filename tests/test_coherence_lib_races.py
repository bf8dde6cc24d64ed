"""`Coherence` on the library level: the interleavings that a gRPC test cannot force. A write
that commits while a watch is being registered is never lost to that watch, a watch that is
registering keeps its memory's entry alive, and a write whose caller was cancelled while it
committed (or, for a small write run inline, while it was being announced) is announced all the
same."""

from __future__ import annotations

import asyncio
import contextlib

from agentscope_memory.paging import ListState
from agentscope_memory.short_term.coherence import Changed, Coherence, Started, WatchedStore, WatchState
from agentscope_memory.store import MemoryRecord
from agentscope_memory.store.in_process import InProcessStore


class States:
    """What the store holds, by version; a read can be held until the test lets it finish."""

    def __init__(self) -> None:
        self.version = 1
        self.hold: asyncio.Event | None = None

    def now(self) -> WatchState:
        return WatchState(True, f"etag-{self.version}", ListState(1, self.version, self.version, self.version + 1))

    async def read(self, tenant: str, memory_id: str, since: ListState | None, max_messages: int) -> WatchState:
        state = self.now()
        if self.hold is not None:
            hold, self.hold = self.hold, None
            await hold.wait()
        return state


async def test_a_write_committed_while_a_watch_registers_is_announced_to_it() -> None:
    states = States()
    coherence = Coherence(states.read, lease_s=30)
    hold = states.hold = asyncio.Event()
    registering = asyncio.ensure_future(coherence.watch("t", "m"))
    await asyncio.sleep(0)  # the registration reads the state (version 1) and is held there
    states.version = 2  # a write commits meanwhile...
    announcing = asyncio.ensure_future(coherence.changed("t", "m"))  # ...and announces itself
    await asyncio.sleep(0)
    assert not announcing.done(), "the write found the registering watch and waits for it"
    hold.set()
    watcher = await registering
    started = watcher.outbox.get_nowait()
    assert isinstance(started, Started) and started.etag == "etag-1"
    changed = await watcher.outbox.get()
    assert isinstance(changed, Changed) and changed.etag == "etag-2" and changed.previous_etag == "etag-1"
    assert not announcing.done(), "and is acknowledged only after the watcher acknowledged it"
    coherence.ack(watcher, changed.sequence)
    await announcing


async def test_a_registering_watch_keeps_its_entry() -> None:
    states = States()
    coherence = Coherence(states.read, lease_s=30)
    first = await coherence.watch("t", "m")
    hold = states.hold = asyncio.Event()
    announcing = asyncio.ensure_future(coherence.changed("t", "m"))  # holds the memory's lock
    await asyncio.sleep(0)
    registering = asyncio.ensure_future(coherence.watch("t", "m"))  # waits for the lock
    await asyncio.sleep(0)
    coherence.close(first, released=True)  # the only registered watch goes
    hold.set()
    await announcing
    second = await registering
    states.version = 2
    announcing = asyncio.ensure_future(coherence.changed("t", "m"))
    assert isinstance(second.outbox.get_nowait(), Started)
    changed = await second.outbox.get()
    assert isinstance(changed, Changed) and changed.etag == "etag-2"
    coherence.ack(second, changed.sequence)
    await announcing
    assert coherence.watching("t", "m") == 1


class _Tx:
    def changed_memories(self) -> set[str]:
        return {"m"}


class _SlowStore:
    """A store whose write commits only when the test says so, as a worker thread would, whether
    or not its caller is still waiting."""

    def __init__(self, states: States) -> None:
        self.states = states
        self.commit = asyncio.Event()

    async def run(self, tenant, fn, *, write=True, small=False):
        await asyncio.shield(self.commit.wait())
        result = fn(_Tx())
        self.states.version += 1
        return result


async def test_a_write_whose_caller_was_cancelled_is_still_announced() -> None:
    states = States()
    coherence = Coherence(states.read, lease_s=30)
    inner = _SlowStore(states)
    store = WatchedStore(inner)  # type: ignore[arg-type]
    store.coherence = coherence
    watcher = await coherence.watch("t", "m")
    assert isinstance(watcher.outbox.get_nowait(), Started)
    call = asyncio.ensure_future(store.run("t", lambda tx: "added"))
    await asyncio.sleep(0)
    call.cancel()  # the client's deadline passed while the transaction was committing
    with contextlib.suppress(asyncio.CancelledError):
        await call
    inner.commit.set()  # ...and it commits all the same
    changed = await asyncio.wait_for(watcher.outbox.get(), 5)
    assert isinstance(changed, Changed) and changed.etag == "etag-2"
    coherence.ack(watcher, changed.sequence)


async def test_a_small_write_whose_caller_was_cancelled_while_announcing_is_still_announced() -> None:
    # SQLite runs a small write inline and announces it without a task of its own unless the
    # memory is watched: the announcement it starts must outlive its cancelled caller.
    states = States()
    coherence = Coherence(states.read, lease_s=30)
    inner = InProcessStore()
    store = WatchedStore(inner)
    store.coherence = coherence
    try:
        await store.run("t", lambda tx: tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)), small=True)
        watcher = await coherence.watch("t", "m")
        assert isinstance(watcher.outbox.get_nowait(), Started)

        def touch(tx):
            states.version = tx.touch_memory("m")
            return states.version

        hold = states.hold = asyncio.Event()
        call = asyncio.ensure_future(store.run("t", touch, small=True))
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # committed; its announcement is reading the new state, held there
        assert states.version == 2 and not call.done()
        call.cancel()  # the client's deadline passed while the write was being announced
        with contextlib.suppress(asyncio.CancelledError):
            await call
        hold.set()
        changed = await asyncio.wait_for(watcher.outbox.get(), 5)
        assert isinstance(changed, Changed) and changed.etag == "etag-2"
        coherence.ack(watcher, changed.sequence)
        assert await inner.run("t", lambda tx: tx.get_memory("m").version, write=False) == 2
    finally:
        await inner.close()
