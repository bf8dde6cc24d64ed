"""Append-only deltas of `GetMessages` on the library level (memory store, no gRPC): a reader
whose cached messages are a prefix of the current ones gets just the added messages; after any
change that removed or rewrote a cached message (delete, clear, state load, compression) it gets
the whole list. A randomised history of writes checks that cache + delta always equals a full
read."""

from __future__ import annotations

import itertools
import random

import pytest

from agentscope_memory.message import Msg
from agentscope_memory.session.state import MEMORY_MESSAGES, StateEntry, messages_to_items
from agentscope_memory.short_term.auto_context.engine import Identity, Summary
from agentscope_memory.short_term.auto_context.kind import KEY_WORKING, AutoContextKind
from agentscope_memory.short_term.auto_context.service import AutoContextService
from agentscope_memory.short_term.in_memory import InMemoryKind
from agentscope_memory.short_term.manager import Limits, MemoryManager, MessagePage, WriteResult
from agentscope_memory.short_term.tiered.kind import TieredKind
from agentscope_memory.store.in_process import InProcessStore
from auto_context_helpers import A, TR, TU, U
from test_auto_context_lib_service import D3

T = "t"


class Summarizer:
    async def summarize(self, messages: list[Msg]) -> Summary:
        return Summary("SUMMARY", {"inputTokens": 1, "outputTokens": 1, "time": 0.0})


@pytest.fixture
async def manager():
    store = InProcessStore()
    yield MemoryManager(store, [InMemoryKind(), AutoContextKind(), TieredKind()], Limits())
    await store.close()


def texts(msgs: list[Msg]) -> list[str]:
    return [m.text_content for m in msgs]


async def cached_read(manager: MemoryManager, memory_id: str) -> tuple[list[Msg], str]:
    page = await manager.get_messages_page(T, memory_id)
    assert not page.next_page_token
    return page.messages, page.etag


async def read_with(manager: MemoryManager, memory_id: str, etag: str, page_size: int = 0) -> MessagePage:
    return await manager.get_messages_page(T, memory_id, page_size, if_none_match=etag, accept_delta=True)


@pytest.mark.parametrize("kind", ["IN_MEMORY", "AUTO_CONTEXT"])
async def test_another_writers_appends_come_as_a_delta(manager, kind) -> None:
    await manager.create_memory(T, "m", kind, "{}")
    await manager.add_messages(T, "m", [U(f"old {i}") for i in range(5)])
    cached, etag = await cached_read(manager, "m")
    await manager.add_messages(T, "m", [U("new 1")])
    await manager.add_messages(T, "m", [U("new 2"), U("new 3")])
    page = await read_with(manager, "m", etag)
    assert page.delta and not page.not_modified and not page.next_page_token
    assert texts(page.messages) == ["new 1", "new 2", "new 3"]
    full = await manager.get_messages_page(T, "m")
    assert page.total_size == full.total_size == 8 and page.etag == full.etag
    # The new etag is current: nothing more to send.
    assert (await read_with(manager, "m", page.etag)).not_modified


async def test_without_accept_delta_the_whole_list_comes_as_before(manager) -> None:
    await manager.create_memory(T, "m", "IN_MEMORY")
    await manager.add_messages(T, "m", [U("a"), U("b")])
    _, etag = await cached_read(manager, "m")
    await manager.add_messages(T, "m", [U("c")])
    page = await manager.get_messages_page(T, "m", if_none_match=etag)
    assert not page.delta and texts(page.messages) == ["a", "b", "c"]


async def test_an_add_s_own_etags_chain_into_deltas(manager) -> None:
    await manager.create_memory(T, "m", "IN_MEMORY")
    first = await manager.add_messages(T, "m", [U("a")])
    _, etag = await cached_read(manager, "m")
    assert etag == first.etag
    second = await manager.add_messages(T, "m", [U("b")])
    assert second.previous_etag == etag
    assert (await read_with(manager, "m", second.etag)).not_modified
    page = await read_with(manager, "m", first.etag)
    assert page.delta and texts(page.messages) == ["b"]


async def test_a_change_without_new_messages_is_an_empty_delta(manager) -> None:
    await manager.create_memory(T, "m", "IN_MEMORY")
    await manager.add_messages(T, "m", [U("a"), U("b")])
    _, etag = await cached_read(manager, "m")
    # A delete of a position past the end changes nothing and keeps the etag.
    result = await manager.delete_message(T, "m", 7)
    assert (result.deleted, result.message_count, result.etag) == (False, 2, etag)
    assert (await read_with(manager, "m", etag)).not_modified
    await manager.add_messages(T, "m", [U("c")])
    _, etag = await cached_read(manager, "m")
    await manager.clear_messages(T, "m")
    page = await read_with(manager, "m", etag)
    assert not page.delta and page.messages == [] and page.total_size == 0


async def rewrite_then_append(manager: MemoryManager, memory_id: str, how: str) -> None:
    if how == "delete first":
        await manager.delete_message(T, memory_id, 0)
    elif how == "delete last":
        await manager.delete_message(T, memory_id, 4)
    elif how == "clear":
        await manager.clear_messages(T, memory_id)
    elif how == "load the same state":
        record, entries = await manager.save_state(T, memory_id)
        await manager.load_state(T, memory_id, entries)
    elif how == "load a shorter state":
        entries = [StateEntry(MEMORY_MESSAGES, items=messages_to_items([U("x"), U("y")]))]
        await manager.load_state(T, memory_id, entries)
    else:
        raise AssertionError(how)
    # Appends that bring the count to what a delta would claim, and beyond.
    await manager.add_messages(T, memory_id, [U("after 1"), U("after 2")])


@pytest.mark.parametrize("how", ["delete first", "delete last", "clear", "load the same state", "load a shorter state"])
async def test_no_delta_after_a_cached_message_was_removed_or_rewritten(manager, how) -> None:
    await manager.create_memory(T, "m", "IN_MEMORY")
    await manager.add_messages(T, "m", [U(f"old {i}") for i in range(5)])
    _, etag = await cached_read(manager, "m")
    await rewrite_then_append(manager, "m", how)
    page = await read_with(manager, "m", etag)
    full = await manager.get_messages_page(T, "m")
    assert not page.delta and texts(page.messages) == texts(full.messages) and page.etag == full.etag


async def test_no_delta_after_a_compression(manager) -> None:
    uuids = itertools.count(1)
    service = AutoContextService(manager, Summarizer(), Identity(new_uuid=lambda: f"u{next(uuids)}"))
    await manager.create_memory(T, "m", "AUTO_CONTEXT", D3.to_json())
    msgs = [U("User query")]
    for i in range(5):
        msgs += [TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}")]
    await manager.add_messages(T, "m", msgs + [A("Assistant response")] + [U(f"Message {i}") for i in range(10)])
    cached, etag = await cached_read(manager, "m")
    assert (await service.compress_if_needed(T, "m")).compressed
    # As many new messages as were cached, so the count alone does not give the rewrite away.
    await manager.add_messages(T, "m", [U(f"after {i}") for i in range(len(cached))])
    page = await read_with(manager, "m", etag)
    full = await manager.get_messages_page(T, "m")
    assert not page.delta and len(cached) < len(full.messages) < 2 * len(cached)
    assert texts(page.messages) == texts(full.messages)


async def test_forged_foreign_and_stale_etags_give_the_whole_list(manager) -> None:
    for memory_id in ("m", "other"):
        await manager.create_memory(T, memory_id, "IN_MEMORY")
        await manager.add_messages(T, memory_id, [U(f"{memory_id} {i}") for i in range(3)])
    _, etag = await cached_read(manager, "m")
    _, other_etag = await cached_read(manager, "other")
    await manager.add_messages(T, "m", [U("m 3")])
    forged = [etag[:-2] + ("AA" if not etag.endswith("AA") else "BB"), "garbage", other_etag, "", "页码"]
    for bad in forged:
        page = await read_with(manager, "m", bad)
        assert not page.delta and texts(page.messages) == ["m 0", "m 1", "m 2", "m 3"], bad
    # The same id in another tenant is another memory.
    await manager.create_memory("t2", "m", "IN_MEMORY")
    await manager.add_messages("t2", "m", [U("m 0"), U("m 1"), U("m 2"), U("m 3")])
    page = await manager.get_messages_page("t2", "m", if_none_match=etag, accept_delta=True)
    assert not page.delta and len(page.messages) == 4
    # Deleted and created again with as many messages: another memory.
    await manager.delete_memory(T, "m")
    await manager.create_memory(T, "m", "IN_MEMORY")
    await manager.add_messages(T, "m", [U("n 0"), U("n 1"), U("n 2"), U("n 3")])
    page = await read_with(manager, "m", etag)
    assert not page.delta and texts(page.messages) == ["n 0", "n 1", "n 2", "n 3"]


async def test_a_delta_larger_than_a_page_comes_as_the_whole_list(manager) -> None:
    await manager.create_memory(T, "m", "IN_MEMORY")
    await manager.add_messages(T, "m", [U("a")])
    page = await manager.get_messages_page(T, "m", page_size=2)
    await manager.add_messages(T, "m", [U("b"), U("c")])
    small = await read_with(manager, "m", page.etag, page_size=2)
    assert small.delta and texts(small.messages) == ["b", "c"]
    await manager.add_messages(T, "m", [U("d"), U("e"), U("f")])
    big = await read_with(manager, "m", small.etag, page_size=2)
    assert not big.delta and texts(big.messages) == ["a", "b"] and big.next_page_token


async def test_tiered_memories_never_answer_a_delta(manager) -> None:
    await manager.create_memory(T, "m", "TIERED", "{}")
    await manager.add_messages(T, "m", [U("a")])
    _, etag = await cached_read(manager, "m")
    await manager.add_messages(T, "m", [U("b")])
    page = await read_with(manager, "m", etag)
    assert not page.delta and texts(page.messages) == ["a", "b"]


async def test_cache_plus_delta_always_equals_a_full_read(manager) -> None:
    """Several readers keep caches while a writer adds, deletes, clears and loads at random."""
    rng = random.Random(1726)
    await manager.create_memory(T, "m", "IN_MEMORY")
    caches: list[tuple[list[str], str]] = []
    deltas = wholes = 0
    counter = itertools.count()
    for _ in range(400):
        op = rng.random()
        count = (await manager.get_memory(T, "m")).message_count
        if op < 0.55:
            await manager.add_messages(T, "m", [U(f"msg {next(counter)}") for _ in range(rng.randint(1, 3))])
        elif op < 0.7 and count:
            await manager.delete_message(T, "m", rng.randrange(count + 1))
        elif op < 0.75:
            await manager.clear_messages(T, "m")
        elif op < 0.8:
            kept = texts((await manager.get_messages_page(T, "m")).messages)
            kept = kept[: rng.randint(0, len(kept))] + ([f"msg {next(counter)}"] if rng.random() < 0.5 else [])
            await manager.load_state(T, "m", [StateEntry(MEMORY_MESSAGES, items=messages_to_items([U(t) for t in kept]))])
        else:
            full = await manager.get_messages_page(T, "m")
            caches.append((texts(full.messages), full.etag))
        # Every reader catches up now and then, as an agent's next getMessages would.
        if caches and rng.random() < 0.3:
            index = rng.randrange(len(caches))
            cached, etag = caches[index]
            page = await read_with(manager, "m", etag)
            now = texts((await manager.get_messages_page(T, "m")).messages)
            if page.not_modified:
                got = cached
            elif page.delta:
                deltas += 1
                got = cached + texts(page.messages)
            else:
                wholes += 1
                got = texts(page.messages)
            assert got == now
            caches[index] = (got, page.etag)
    # Both answers were exercised.
    assert deltas > 10 and wholes > 10


@pytest.mark.parametrize("kind", ["IN_MEMORY", "AUTO_CONTEXT"])
async def test_a_writer_keeps_its_copy_from_its_own_deletes_clears_and_loads(manager, kind) -> None:
    """A delete, clear or state load answers the etags just before and after it (as an add
    does), taken in its own transaction: a writer whose copy the previous etag names applies
    its change to the copy without reading, and the etag after is the one a read gives. When
    another writer changed the memory in between, the previous etag is not the copy's, so the
    writer reads again. Randomised against a full read after every step."""
    rng = random.Random(3607)
    await manager.create_memory(T, "m", kind, "{}")
    await manager.add_messages(T, "m", [U(f"旧消息 {i}") for i in range(6)])
    copy, etag = await cached_read(manager, "m")
    mine = [texts(copy), etag]
    applied = fallbacks = 0
    counter = itertools.count()
    for _ in range(300):
        if rng.random() < 0.25:  # another writer
            await manager.add_messages(T, "m", [U(f"别人的 {next(counter)}")])
        op = rng.random()
        cached, cached_etag = mine
        if op < 0.4:
            added = [f"我的 {next(counter)}"]
            result = await manager.add_messages(T, "m", [U(t) for t in added])
            after = cached + added
        elif op < 0.75:
            index = rng.randrange(len(cached) + 2)
            deleted = await manager.delete_message(T, "m", index)
            result = deleted
            after = cached[:index] + cached[index + 1:]
            if result.previous_etag == cached_etag:
                assert deleted.deleted == (index < len(cached)) and deleted.message_count == len(after)
        elif op < 0.85:
            result = await manager.clear_messages(T, "m")
            after = []
        else:
            after = cached[: rng.randint(0, len(cached))] + [f"载入 {next(counter)}"]
            key = MEMORY_MESSAGES if kind == "IN_MEMORY" else KEY_WORKING
            result = await manager.load_state(T, "m", [StateEntry(key, items=messages_to_items([U(t) for t in after]))])
        full, now = await cached_read(manager, "m")
        # The etag after names the state a read right after gives; a clear or a load leaves what
        # the writer wrote, whatever came before.
        assert result.etag == now
        if result.previous_etag == cached_etag or isinstance(result, WriteResult):
            applied += 1
            mine = [after, result.etag]
        else:
            fallbacks += 1
            mine = [texts(full), now]
        assert mine == [texts(full), now]
    assert applied > 100 and fallbacks > 30
