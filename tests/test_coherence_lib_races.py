"""`Coherence` on the library level: the interleavings that a gRPC test cannot force. A write
that commits while a watch is being registered is never lost to that watch, and a watch that is
registering keeps its memory's entry alive."""

from __future__ import annotations

import asyncio

from agentscope_memory.paging import ListState
from agentscope_memory.short_term.coherence import Changed, Coherence, Started, WatchState


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
