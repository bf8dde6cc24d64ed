"""`Coherence` on the library level: the interleavings that a gRPC test cannot force. A write
that commits while a watch is being registered is never lost to that watch, a watch that is
registering keeps its memory's entry alive, and a write whose caller was cancelled while it
committed (or, for a small write run inline, while it was being announced) is announced all the
same."""

from __future__ import annotations

import asyncio
import contextlib

from agentscope_memory.paging import ListState
from agentscope_memory.short_term.coherence import Changed, Coherence, Started, WatchedStore, WatchState, Written, writes_of
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


async def test_a_write_watched_only_by_its_writer_is_taken_in_from_its_own_account() -> None:
    # A watching client's own add is not announced to it: with no other watch, the new state
    # (the base of the next announcement's delta) comes from the writer's account, not a read.
    states = States()
    reads: list[str] = []

    async def read(tenant: str, memory_id: str, since: ListState | None, max_messages: int) -> WatchState:
        reads.append(memory_id)
        return await states.read(tenant, memory_id, since, max_messages)

    coherence = Coherence(read, lease_s=30)
    store = WatchedStore(InProcessStore())
    store.coherence = coherence
    try:
        await store.run("t", lambda tx: tx.insert_memory(MemoryRecord("m", "IN_MEMORY", version=1)), small=True)
        own = await coherence.watch("t", "m")
        assert isinstance(own.outbox.get_nowait(), Started)

        def add_as(previous: str):
            def add(tx) -> None:
                states.version = tx.touch_memory("m")
                written["m"] = Written(previous, f"etag-{states.version}", states.now().state)
            return add

        reads.clear()
        with writes_of(own.watch_id) as written:
            await store.run("t", add_as("etag-1"), small=True)
        assert reads == [] and states.version == 2

        # Someone else's write is announced as following the account.
        def touch(tx) -> None:
            states.version = tx.touch_memory("m")

        someone = asyncio.ensure_future(store.run("t", touch, small=True))
        changed = await asyncio.wait_for(own.outbox.get(), 5)
        assert isinstance(changed, Changed) and (changed.previous_etag, changed.etag) == ("etag-2", "etag-3")
        coherence.ack(own, changed.sequence)
        await someone

        # An account that does not follow the state last taken in is not trusted: it is read.
        reads.clear()
        with writes_of(own.watch_id) as written:
            await store.run("t", add_as("etag-elsewhere"), small=True)
        assert reads == ["m"]

        # With another watch, the change must be told: read and announced, as always.
        other = await coherence.watch("t", "m")
        assert isinstance(other.outbox.get_nowait(), Started)
        reads.clear()
        with writes_of(own.watch_id) as written:
            adding = asyncio.ensure_future(store.run("t", add_as("etag-4"), small=True))
            changed = await asyncio.wait_for(other.outbox.get(), 5)
        assert isinstance(changed, Changed) and changed.etag == "etag-5" and reads == ["m"]
        coherence.ack(other, changed.sequence)
        await adding
    finally:
        await store.close()
