"""`AutoContextService` on the library level (memory store, no gRPC): serialised compressions
with nothing left behind per memory, a delete during a compression, watchers."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from agentscope_memory.errors import AbortedError, FailedPreconditionError, InvalidArgumentError, NotFoundError
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import Identity, Summary
from agentscope_memory.short_term.auto_context.service import AutoContextService
from agentscope_memory.short_term.auto_context.kind import AutoContextKind
from agentscope_memory.short_term.in_memory import InMemoryKind
from agentscope_memory.short_term.manager import Limits, MemoryManager
from agentscope_memory.message import Msg, msg_to_dict
from agentscope_memory.session import StateEntry
from agentscope_memory.store.in_process import InProcessStore
from auto_context_helpers import A, TR, TU, U

D3 = AutoContextConfig(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3, min_compression_token_threshold=0)


class SlowSummarizer:
    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.running = 0
        self.most = 0
        self.calls = 0

    async def summarize(self, messages: list[Msg]) -> Summary:
        self.running += 1
        self.most = max(self.most, self.running)
        self.calls += 1
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.running -= 1
        return Summary("SUMMARY", {"inputTokens": 1, "outputTokens": 1, "time": 0.0})


def d3() -> list[Msg]:
    msgs = [U("User query")]
    for i in range(5):
        msgs += [TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}")]
    return msgs + [A("Assistant response")] + [U(f"Message {i}") for i in range(10)]


@pytest.fixture
async def service():
    store = InProcessStore()
    manager = MemoryManager(store, [InMemoryKind(), AutoContextKind()], Limits())
    uuids = itertools.count(1)
    summarizer = SlowSummarizer()
    svc = AutoContextService(manager, summarizer, Identity(new_uuid=lambda: f"u{next(uuids)}"))
    yield manager, svc, summarizer
    await store.close()


async def test_compressions_of_one_memory_never_overlap_and_leave_no_lock(service) -> None:
    manager, svc, summarizer = service
    for name in ("a", "b"):
        await manager.create_memory("t", name, "AUTO_CONTEXT", D3.to_json())
        await manager.add_messages("t", name, d3())
    outcomes = await asyncio.gather(*(svc.compress_if_needed("t", name) for name in ("a", "b") for _ in range(3)))
    # Two memories compress side by side, but never two compressions of one memory.
    assert summarizer.most == 2
    assert sum(o.compressed for o in outcomes) >= 2
    assert svc._locks == {}  # nothing kept per memory once nobody compresses it


async def test_a_delete_during_compression_aborts_instead_of_losing_it(service) -> None:
    manager, svc, summarizer = service
    summarizer.delay = 0.3
    await manager.create_memory("t", "m", "AUTO_CONTEXT", D3.to_json())
    msgs = d3()
    await manager.add_messages("t", "m", msgs)
    task = asyncio.ensure_future(svc.compress_if_needed("t", "m"))
    await asyncio.sleep(0.1)
    assert (await manager.delete_message("t", "m", 0)).deleted
    with pytest.raises(AbortedError, match="changed during compression"):
        await task
    # The delete stands and nothing of the aborted compression was written.
    assert await manager.get_messages("t", "m") == msgs[1:]
    assert (await svc.events("t", "m")).items == []
    # A retry compresses the history as it is now.
    assert (await svc.compress_if_needed("t", "m")).compressed


async def test_watchers_get_new_events_and_leave_nothing_behind(service) -> None:
    manager, svc, _ = service
    await manager.create_memory("t", "w", "AUTO_CONTEXT", D3.to_json())
    got: list[str] = []

    async def watch() -> None:
        stream = svc.watch("t", "w")
        try:
            async for _, event in stream:
                got.append(event.event_type)
                return
        finally:
            await stream.aclose()  # what gRPC does when the client cancels the stream

    watcher = asyncio.ensure_future(watch())
    await asyncio.sleep(0.05)
    assert len(svc._changed) == 1
    await manager.add_messages("t", "w", d3())
    await svc.compress_if_needed("t", "w")
    await asyncio.wait_for(watcher, 2.0)
    assert got == ["TOOL_INVOCATION_COMPRESS"]
    assert svc._changed == {}


async def test_offloaded_contexts_are_listed_a_page_at_a_time_without_their_messages(service) -> None:
    # The inspector read the whole saved state (every offloaded message) to list them.
    manager, svc, _ = service
    await manager.create_memory("t", "压缩", "AUTO_CONTEXT", D3.to_json())
    offloaded = {f"卸载-{i:04d}": [msg_to_dict(U(f"第{j}条")) for j in range(i % 4)] for i in range(2500)}
    await manager.load_state("t", "压缩", [StateEntry("autoContextMemory_offloadContext",
                                                      value={"offloadContext": offloaded})])
    seen: list[tuple[str, int]] = []
    after = ""
    while True:
        page, total = await svc.offloads("t", "压缩", after, 1000)
        assert total == 2500 and len(page) <= 1000
        if not page:
            break
        seen += page
        after = page[-1][0]
    assert seen == [(uuid, len(msgs)) for uuid, msgs in sorted(offloaded.items())]
    assert await svc.offloads("t", "压缩", "卸载-0001", 2) == ([("卸载-0002", 2), ("卸载-0003", 3)], 2500)

    await manager.create_memory("t", "空的", "AUTO_CONTEXT", D3.to_json())
    assert await svc.offloads("t", "空的") == ([], 0)
    with pytest.raises(InvalidArgumentError, match="limit"):
        await svc.offloads("t", "压缩", "", 0)
    with pytest.raises(InvalidArgumentError, match="after_uuid"):
        await svc.offloads("t", "压缩", "坏\x00", 10)
    with pytest.raises(NotFoundError):
        await svc.offloads("t", "没有", "", 10)
    await manager.create_memory("t", "普通", "IN_MEMORY")
    with pytest.raises(FailedPreconditionError, match="AUTO_CONTEXT"):
        await svc.offloads("t", "普通", "", 10)
