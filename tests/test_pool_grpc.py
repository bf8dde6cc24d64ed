"""Shared memory pools over gRPC: entries, versions and metadata merge, compare-and-set under
many concurrent writers (asyncio and blocking clients; two replicas on PostgreSQL), events
listed and watched (resumed after a restart), rendering for a model call (order and budget),
tenant isolation of every RPC, kill -9 durability, bad input, local mode."""

from __future__ import annotations

import asyncio
import json
import threading
import tracemalloc
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncPoolClient, PoolClient
from agentscope_memory.errors import InvalidArgumentError, MemoryServiceError, NotFoundError, UnavailableError
from agentscope_memory.pool import PoolConflictError
from conftest import ServerProcess

POOL = "研发团队/共享"


async def test_entries_versions_metadata_and_listing(server) -> None:
    async with AsyncPoolClient(server.address, timeout=10) as pools:
        first = await pools.write(POOL, "计划", {"步骤": 1, "done": False}, writer="planner", metadata={"lang": "zh"})
        assert first.entry.version == 1 and first.sequence == 1
        assert first.entry.created_by == first.entry.updated_by == "planner"
        second = await pools.write(POOL, "计划", {"步骤": 2}, writer="coder", metadata={"reviewed": True})
        assert second.entry.version == 2 and second.sequence == 2
        got = await pools.get(POOL, "计划")
        assert got.value == {"步骤": 2} and got.version == 2
        assert (got.created_by, got.updated_by) == ("planner", "coder")
        assert got.metadata == {"lang": "zh", "reviewed": True}  # merged, not replaced
        assert got.updated_at >= got.created_at
        for key in ("notes/a", "notes/b", "todo", "notes/c"):
            await pools.write(POOL, key, f"text of {key}")
        assert [e.key for e in await pools.list_entries(POOL, "notes/")] == ["notes/a", "notes/b", "notes/c"]
        # Paging follows the pages for the caller, whatever the page size.
        assert [e.key async for e in pools.iter_entries(POOL, page_size=2)] == sorted(
            ["计划", "notes/a", "notes/b", "notes/c", "todo"])
        deleted = await pools.delete(POOL, "todo", writer="planner")
        assert deleted.deleted_version == 1
        with pytest.raises(NotFoundError):
            await pools.get(POOL, "todo")
        with pytest.raises(NotFoundError):
            await pools.delete(POOL, "todo")
        events = [e async for e in pools.iter_events(POOL, page_size=3)]
        assert [e.sequence for e in events] == list(range(1, 8))
        assert [(e.event_type, e.key, e.version, e.writer) for e in (events[0], events[-1])] == [
            ("shared_pool.write", "计划", 1, "planner"), ("shared_pool.delete", "todo", 1, "planner")]
        assert [e.sequence async for e in pools.iter_events(POOL, after_sequence=5)] == [6, 7]


async def test_a_page_size_over_the_maximum_is_served_as_the_maximum(server) -> None:
    # AIP-158: a client asking for more than the server's largest page gets that page, not an
    # error; the pages still follow on with the size the client asked for.
    pool = "大池子"
    async with AsyncPoolClient(server.address, timeout=30) as pools:
        for i in range(1002):
            await pools.write(pool, f"键{i:04d}", i)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.SharedPoolServiceStub(channel)
        first = await stub.ListPoolEntries(pb.ListPoolEntriesRequest(pool_id=pool, page_size=5000))
        assert len(first.entries) == 1000 and first.next_page_token
        rest = await stub.ListPoolEntries(pb.ListPoolEntriesRequest(
            pool_id=pool, page_size=5000, page_token=first.next_page_token))
        assert [e.key for e in rest.entries] == ["键1000", "键1001"] and not rest.next_page_token
        events = await stub.ListPoolEvents(pb.ListPoolEventsRequest(pool_id=pool, page_size=5000))
        assert len(events.events) == 1000 and events.next_page_token


async def test_compare_and_set(server) -> None:
    async with AsyncPoolClient(server.address, timeout=10) as pools:
        await pools.write(POOL, "k", 1, expected_version=0)
        with pytest.raises(PoolConflictError) as caught:
            await pools.write(POOL, "k", 2, expected_version=0)
        assert (caught.value.expected, caught.value.actual) == (0, 1)
        assert "k" in str(caught.value) and "version 1" in str(caught.value)
        await pools.write(POOL, "k", 2, expected_version=1)
        with pytest.raises(PoolConflictError) as caught:
            await pools.delete(POOL, "k", expected_version=1)
        assert caught.value.actual == 2
        with pytest.raises(PoolConflictError):
            await pools.write(POOL, "absent", 1, expected_version=3)
        assert (await pools.get(POOL, "k")).value == 2
        # The trailing metadata carries the version that won, for any gRPC client.
        async with grpc.aio.insecure_channel(server.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as raw:
                await pb_grpc.SharedPoolServiceStub(channel).WritePoolEntry(
                    pb.WritePoolEntryRequest(pool_id=POOL, key="k", content_json="3", expected_version=7))
            assert raw.value.code() == grpc.StatusCode.ABORTED
            assert dict(raw.value.trailing_metadata() or ())["agentscope-memory-current-version"] == "2"
        await pools.delete(POOL, "k", expected_version=2)
        # Written again, the key goes on from the version deleted: no version of it repeats.
        assert (await pools.write(POOL, "k", "again", expected_version=0)).entry.version == 3


async def test_a_stale_compare_and_set_cannot_land_on_a_key_deleted_and_written_again(server) -> None:
    # ABA: an agent read 任务 at version 1; meanwhile another deleted it and wrote a new, different
    # entry under the same key. The stale agent's compare-and-set must not overwrite it.
    async with AsyncPoolClient(server.address, timeout=10) as pools:
        read = (await pools.write(POOL, "任务", {"负责人": "甲"}, writer="planner")).entry
        await pools.delete(POOL, "任务", writer="planner", expected_version=read.version)
        again = (await pools.write(POOL, "任务", {"负责人": "乙"}, writer="coder", expected_version=0)).entry
        assert again.version > read.version
        with pytest.raises(PoolConflictError) as caught:
            await pools.write(POOL, "任务", {"负责人": "甲", "完成": True}, writer="stale", expected_version=read.version)
        assert (caught.value.expected, caught.value.actual) == (read.version, again.version)
        with pytest.raises(PoolConflictError):
            await pools.delete(POOL, "任务", writer="stale", expected_version=read.version)
        async with grpc.aio.insecure_channel(server.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as raw:
                await pb_grpc.SharedPoolServiceStub(channel).WritePoolEntry(pb.WritePoolEntryRequest(
                    pool_id=POOL, key="任务", content_json="{}", expected_version=read.version))
            assert raw.value.code() == grpc.StatusCode.ABORTED
        assert (await pools.get(POOL, "任务")).value == {"负责人": "乙"}
        # Deleted and written again twice more: still each version once, in the order written.
        versions = [read.version, again.version]
        for i in range(2):
            await pools.delete(POOL, "任务")
            versions.append((await pools.write(POOL, "任务", i)).entry.version)
        assert versions == sorted(set(versions))
        events = [e async for e in pools.iter_events(POOL) if e.key == "任务"]
        assert [e.version for e in events if e.event_type == "shared_pool.write"] == versions


def test_a_conflict_reports_its_versions_whatever_the_key_says(threaded_server) -> None:
    # The versions are read from the end of the server's message, not from a key that quotes it.
    key, pool = "is at version 9, not the expected 9", "is at version 8, not the expected 8 池"
    with PoolClient(threaded_server.address, timeout=10) as pools:
        pools.write(pool, key, 1)
        with pytest.raises(PoolConflictError) as caught:
            pools.write(pool, key, 2, expected_version=5)
        assert (caught.value.expected, caught.value.actual) == (5, 1)
        with pytest.raises(PoolConflictError) as caught:
            pools.delete(pool, key + " (it does not exist)", expected_version=3)
        assert (caught.value.expected, caught.value.actual) == (3, 0)


async def _increment_async(pools: AsyncPoolClient, rounds: int) -> int:
    conflicts = 0
    for _ in range(rounds):
        while True:
            entry = await pools.get(POOL, "counter")
            try:
                await pools.write(POOL, "counter", entry.value + 1, expected_version=entry.version)
                break
            except PoolConflictError:
                conflicts += 1
    return conflicts


def _increment_blocking(address: str, rounds: int, conflicts: list[int]) -> None:
    with PoolClient(address, timeout=30) as pools:
        for _ in range(rounds):
            while True:
                entry = pools.get(POOL, "counter")
                try:
                    pools.write(POOL, "counter", entry.value + 1, expected_version=entry.version)
                    break
                except PoolConflictError:
                    conflicts[0] += 1


async def _no_lost_update(addresses: list[str]) -> None:
    rounds, async_writers, blocking_writers = 15, 6, 2
    clients = [AsyncPoolClient(addresses[i % len(addresses)], timeout=30) for i in range(async_writers)]
    try:
        await clients[0].write(POOL, "counter", 0)
        blocking_conflicts = [0]
        threads = [threading.Thread(target=_increment_blocking, args=(addresses[i % len(addresses)], rounds, blocking_conflicts))
                   for i in range(blocking_writers)]
        for thread in threads:
            thread.start()
        conflicts = await asyncio.gather(*(_increment_async(c, rounds) for c in clients))
        await asyncio.to_thread(lambda: [t.join() for t in threads])
        total = rounds * (async_writers + blocking_writers)
        final = await clients[-1].get(POOL, "counter")
        assert final.value == total and final.version == total + 1
        assert sum(conflicts) + blocking_conflicts[0] > 0, "the writers never raced: the test proved nothing"
        events = [e async for e in clients[0].iter_events(POOL)]
        assert [e.sequence for e in events] == list(range(1, total + 2))
    finally:
        for client in clients:
            await client.close()


async def test_no_lost_update_with_many_writers(server) -> None:
    await _no_lost_update([server.address])


async def test_no_lost_update_across_two_postgres_replicas(server_factory, postgres_dsn) -> None:
    replicas = [await server_factory(store="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]
    await _no_lost_update([r.address for r in replicas])


async def test_watch_sees_writes_at_once_and_across_replicas(server_factory, postgres_dsn) -> None:
    a, b = [await server_factory(store="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]
    async with AsyncPoolClient(a.address, timeout=10) as writer, AsyncPoolClient(b.address, timeout=10) as watcher:
        await writer.write(POOL, "before", 1)
        seen: list[tuple[int, str]] = []

        async def watch() -> None:
            async for event in watcher.watch(POOL):
                seen.append((event.sequence, event.key))
                if len(seen) == 3:
                    return

        task = asyncio.create_task(watch())
        await writer.write(POOL, "after", 2, writer="a")
        await writer.delete(POOL, "before")
        await asyncio.wait_for(task, 20)
        assert seen == [(1, "before"), (2, "after"), (3, "before")]


@pytest.mark.slow
async def test_acknowledged_writes_survive_kill_9_and_watch_resumes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data)
    acknowledged = 0
    try:
        async with AsyncPoolClient(server.address, timeout=10, retries=0) as pools:

            async def writer() -> None:
                nonlocal acknowledged
                for i in range(10_000):
                    await pools.write(POOL, f"k{i % 7}", {"i": i})
                    acknowledged = i + 1

            task = asyncio.create_task(writer())
            while acknowledged < 50:
                await asyncio.sleep(0.01)
            server.kill()
            with pytest.raises(MemoryServiceError):  # the write in flight when the server died
                await task
        restarted = ServerProcess(data, server.port)
        try:
            async with AsyncPoolClient(restarted.address, timeout=10) as pools:
                events = [e async for e in pools.iter_events(POOL)]
                # Every acknowledged write is there (one more may have committed unanswered).
                assert len(events) in (acknowledged, acknowledged + 1)
                assert [e.sequence for e in events] == list(range(1, len(events) + 1))
                last = events[-1]
                assert (await pools.get(POOL, last.key)).version == last.version
                # A watcher resumes after the last sequence it saw: nothing missed, nothing twice.
                stream = pools.watch(POOL, after_sequence=len(events) - 2)
                resumed = [await stream.__anext__(), await stream.__anext__()]
                await pools.write(POOL, "after-restart", True)
                resumed.append(await asyncio.wait_for(stream.__anext__(), 10))
                await stream.aclose()
                assert [e.sequence for e in resumed] == [len(events) - 1, len(events), len(events) + 1]
        finally:
            restarted.close()
    finally:
        server.close()


async def test_a_watch_redials_a_lost_server_with_pauses_and_gives_up_after_the_deadline(tmp_path: Path) -> None:
    """A broken watch used to reopen its stream at once, in a loop: a server down for a second
    was dialled about ten thousand times (a core at 100%), and one that never came back kept the
    watcher spinning forever. Now it pauses between attempts (as the retry rule), resumes after
    a restart without losing or repeating an event, and raises `UnavailableError` once the
    client's deadline passed without reaching the server."""
    data = tmp_path / "data"
    data.mkdir()
    server = ServerProcess(data)
    restarted = None
    try:
        async with AsyncPoolClient(server.address, timeout=30) as pools:
            await pools.write(POOL, "键", 1)
            opened = 0
            stub_watch = pools._stub.WatchPoolEvents

            def counted(*args, **kwargs):
                nonlocal opened
                opened += 1
                return stub_watch(*args, **kwargs)

            pools._stub.WatchPoolEvents = counted  # type: ignore[method-assign]
            stream = pools.watch(POOL)
            assert (await stream.__anext__()).sequence == 1
            server.kill()
            following = asyncio.ensure_future(stream.__anext__())
            await asyncio.sleep(1.5)
            assert not following.done() and opened < 30
            restarted = ServerProcess(data, server.port)
            # A write is not retried, and gRPC may still be waiting out its reconnect backoff to
            # this address (connection refused, so nothing was written): try until it lands.
            for _ in range(100):
                try:
                    await pools.write(POOL, "键", 2)
                    break
                except UnavailableError:
                    await asyncio.sleep(0.2)
            assert (await asyncio.wait_for(following, 20)).sequence == 2
            await stream.aclose()
        restarted.kill()
        async with AsyncPoolClient(restarted.address, timeout=1) as pools:
            with pytest.raises(UnavailableError):
                await asyncio.wait_for(pools.watch(POOL).__anext__(), 10)
        with PoolClient(restarted.address, timeout=1) as blocking:
            gone = asyncio.to_thread(lambda: next(iter(blocking.watch(POOL))))
            with pytest.raises(UnavailableError):
                await asyncio.wait_for(gone, 10)
    finally:
        server.close()
        if restarted is not None:
            restarted.close()


async def test_rendering_newest_first_within_the_budget(server) -> None:
    clock = {"t": 0}
    async with AsyncPoolClient(server.address, timeout=10) as pools:
        for key, value in (("old", "the oldest fact"), ("mid", {"n": 2}), ("new", "最新的事实")):
            await pools.write(POOL, key, value)
            clock["t"] += 1
            await asyncio.sleep(0.01)
        await pools.write("other pool", "x", "from another pool")
        everything = await pools.render([POOL, "other pool"], 1000)
        assert everything.text.splitlines() == [
            "[SHARED:x] from another pool", "[SHARED:new] 最新的事实", '[SHARED:mid] {"n":2}', "[SHARED:old] the oldest fact"]
        assert everything.entry_count == 4 and everything.omitted_count == 0 and everything.token_count > 0
        as_messages = await pools.render([POOL], 1000, messages=True)
        assert [m.text_content for m in as_messages.messages] == everything.text.splitlines()[1:]
        assert as_messages.messages[0].role.value == "SYSTEM"
        assert as_messages.messages[0].metadata == {"shared_pool": POOL, "key": "new", "version": 1}
        # A small budget keeps the newest that fit and counts what it left out.
        one = await pools.render([POOL], as_messages.token_count - 1)
        assert one.entry_count == 2 and one.omitted_count == 1 and one.token_count <= as_messages.token_count - 1
        assert one.text.splitlines()[0] == "[SHARED:new] 最新的事实"
        assert (await pools.render(["empty pool"])).entry_count == 0


async def test_each_entry_stays_one_line_whatever_its_text_holds(server) -> None:
    # A rendering promises one line per entry: a reader (or a model) splits it into entries. A
    # string holding line breaks is shown as a JSON string literal, from which the text comes back.
    values = {
        "plan": "Step 1: write the tests\nStep 2: fix the bug\r\nStep 3: release",
        "计划": "第一步：写测试\n第二步：修复\u2028第三步：发布",
        "quoted": '"already quoted"',
        "nested": {"说明": "第一行\n第二行", "sep": "a\u2029b\x85c"},
        "plain": "one line, shown as it is",
    }
    async with AsyncPoolClient(server.address, timeout=10) as pools:
        for key, value in values.items():
            await pools.write("多行", key, value)
        for key in ("a\u2028b",):  # a key may hold a Unicode line separator (not a control character)
            await pools.write("多行", key, "x")
        rendered = await pools.render(["多行"], 10_000)
        lines = rendered.text.splitlines()
        assert len(lines) == rendered.entry_count == len(values) + 1
        shown = {}
        for line in lines:
            key, _, text = line.removeprefix("[SHARED:").partition("] ")
            shown[key] = text
        assert shown["plain"] == "one line, shown as it is"
        for key in ("plan", "计划", "quoted"):
            assert shown[key].startswith('"') and json.loads(shown[key]) == values[key]
        assert json.loads(shown["nested"]) == values["nested"]
        as_messages = await pools.render(["多行"], 10_000, messages=True)
        assert [m.text_content for m in as_messages.messages] == lines
        assert all(len(m.text_content.splitlines()) == 1 for m in as_messages.messages)
        assert {m.metadata["key"] for m in as_messages.messages} == {*values, "a\u2028b"}


def _split_rendered(line: str) -> tuple[str, str]:
    """A reader's split of one `[SHARED:key] content` line: a key opening with `"` is a JSON
    string literal, any other ends at the first `] `."""
    label = line.removeprefix("[SHARED:")
    if label.startswith('"'):
        key, end = json.JSONDecoder().raw_decode(label)
        assert label[end:end + 2] == "] ", line
        return key, label[end + 2:]
    key, _, text = label.partition("] ")
    return key, text


async def test_a_key_holding_a_bracket_is_rendered_so_the_line_splits_back(server) -> None:
    # `[SHARED:a] b] c` was both key "a] b" with "c" and key "a" with "b] c".
    entries = {"a] b": "c", "a": "b] c", "计划] 第二步": "完成", "计划": "第二步] 完成", "x]y": "z", "[标签]": "值",
               '"quoted key"': "v", "行\u2028分隔": "w", "plain key": "shown as always", "计划：第一步": "写测试"}
    async with AsyncPoolClient(server.address, timeout=10) as pools:
        for key, value in entries.items():
            await pools.write("括号", key, value)
        rendered = await pools.render(["括号"], 10_000)
    lines = rendered.text.splitlines()
    assert len(lines) == len(entries)
    assert dict(_split_rendered(line) for line in lines) == entries
    # Keys without `]`, a line break or a leading quote are shown exactly as before.
    assert "[SHARED:plain key] shown as always" in lines and "[SHARED:计划：第一步] 写测试" in lines
    assert "[SHARED:a] b] c" in lines and '[SHARED:"a] b"] c' in lines
    assert '[SHARED:"计划] 第二步"] 完成' in lines and "[SHARED:计划] 第二步] 完成" in lines


async def test_a_page_of_entries_with_large_metadata_fits_a_stock_4_mib_client(server) -> None:
    # 100 small entries with 64 KiB of metadata each: 6.5 MB, in pages a stock client receives.
    metadata = json.dumps({"notes": "备" * 21_800}, ensure_ascii=False)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.SharedPoolServiceStub(channel)
        for i in range(100):
            await stub.WritePoolEntry(pb.WritePoolEntryRequest(pool_id=POOL, key=f"{i:03}", content_json="1",
                                                               metadata_json=metadata))
        keys: list[str] = []
        token = ""
        while True:
            page = await stub.ListPoolEntries(pb.ListPoolEntriesRequest(pool_id=POOL, page_size=100, page_token=token))
            assert page.ByteSize() <= 4 * 1024 * 1024
            assert all(e.metadata_json == metadata for e in page.entries)
            keys += [e.key for e in page.entries]
            token = page.next_page_token
            if not token:
                break
    assert keys == [f"{i:03}" for i in range(100)]


async def test_rendering_many_small_entries_as_messages_fits_a_stock_4_mib_client(server) -> None:
    # Each message carries the pool id (512 bytes) in its metadata, which costs no tokens:
    # 7,000 entries fit the largest token budget and would make 4.6 MB of messages.
    pool = "池" * 170
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.SharedPoolServiceStub(channel)
        limit = asyncio.Semaphore(32)

        async def write(i: int) -> None:
            async with limit:
                await stub.WritePoolEntry(pb.WritePoolEntryRequest(pool_id=pool, key=str(i), content_json="1"))

        await asyncio.gather(*(write(i) for i in range(7000)))
        as_messages = await stub.RenderPoolContext(pb.RenderPoolContextRequest(
            pool_ids=[pool], max_tokens=200_000, format=pb.POOL_RENDER_FORMAT_MESSAGES))
        assert as_messages.ByteSize() <= 4 * 1024 * 1024
        assert as_messages.entry_count == len(as_messages.messages) > 5000
        assert as_messages.entry_count + as_messages.omitted_count == 7000
        # The text is far smaller: every entry still fits it.
        as_text = await stub.RenderPoolContext(pb.RenderPoolContextRequest(pool_ids=[pool], max_tokens=200_000))
        assert as_text.entry_count == 7000 and as_text.omitted_count == 0
        assert len(as_text.text.splitlines()) == 7000


async def test_rendering_large_pools_holds_a_few_entries_at_a_time_and_keeps_the_order(server) -> None:
    big = '"' + "大" * 349_000 + '"'  # about 1 MiB of UTF-8
    async with AsyncPoolClient(server.address, timeout=30) as pools:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.SharedPoolServiceStub(channel)
            for i in range(100):
                await stub.WritePoolEntry(pb.WritePoolEntryRequest(pool_id="大池", key=f"big{i}", content_json=big))
        await pools.write("大池", "small", "fits")
        tracemalloc.start()
        try:
            rendered = await pools.render(["大池"])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert (rendered.text, rendered.entry_count, rendered.omitted_count) == ("[SHARED:small] fits", 1, 100)
        # 100 MiB of entries; the rendering held a few of them at a time, not all.
        assert peak < 40 * 1024 * 1024, peak
        # Many entries in three pools, written in turn: newest first across the pools.
        written = []
        for i in range(40):
            for pool in ("甲", "乙", "丙"):
                await pools.write(pool, f"k{i:02}", i)
                written.append(f"[SHARED:k{i:02}] {i}")
        everything = await pools.render(["甲", "乙", "丙"], 200_000)
        assert everything.text.splitlines() == written[::-1]


async def test_every_rpc_is_tenant_isolated(server_factory) -> None:
    server = await server_factory(api_keys={"alice-tenant-key-0001": "tenant-a", "bob-tenant-key-00001": "tenant-b"})
    async with AsyncPoolClient(server.address, api_key="alice-tenant-key-0001", timeout=10) as alice, \
            AsyncPoolClient(server.address, api_key="bob-tenant-key-00001", timeout=10) as bob:
        await alice.write(POOL, "secret", "tenant A only")
        with pytest.raises(NotFoundError):
            await bob.get(POOL, "secret")
        with pytest.raises(NotFoundError):
            await bob.delete(POOL, "secret")
        assert await bob.list_entries(POOL) == []
        assert [e async for e in bob.iter_events(POOL)] == []
        assert (await bob.render([POOL])).entry_count == 0
        # Bob's own pool of the same name is his: versions and sequences start afresh.
        mine = await bob.write(POOL, "secret", "tenant B's")
        assert mine.entry.version == 1 and mine.sequence == 1
        assert (await alice.get(POOL, "secret")).value == "tenant A only"
        stream = bob.watch(POOL)
        assert (await asyncio.wait_for(stream.__anext__(), 10)).key == "secret"
        await stream.aclose()


async def test_bad_input_names_the_field_and_changes_nothing(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.SharedPoolServiceStub(channel)
        await stub.WritePoolEntry(pb.WritePoolEntryRequest(pool_id=POOL, key="k", content_json='"v"'))
        write = pb.WritePoolEntryRequest
        cases = [
            (stub.WritePoolEntry, write(key="k", content_json="1"), "pool_id"),
            (stub.WritePoolEntry, write(pool_id=" ", key="k", content_json="1"), "pool_id"),
            (stub.WritePoolEntry, write(pool_id="p" * 600, key="k", content_json="1"), "pool_id"),
            (stub.WritePoolEntry, write(pool_id="a\x00b", key="k", content_json="1"), "pool_id"),
            (stub.WritePoolEntry, write(pool_id=POOL, content_json="1"), "key"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="键" * 400, content_json="1"), "key"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k\n", content_json="1"), "key"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k"), "content_json"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json="{not json"), "content_json"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json="NaN"), "content_json"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json="[" * 300 + "]" * 300), "content_json"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json='"' + "x" * (1024 * 1024) + '"'),
             "content_json"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json="1", metadata_json="[1]"), "metadata_json"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json="1", metadata_json='{"a":' + '"x"' * 2),
             "metadata_json"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json="1", writer="w" * 600), "writer"),
            (stub.WritePoolEntry, write(pool_id=POOL, key="k", content_json="1", expected_version=-1), "expected_version"),
            (stub.GetPoolEntry, pb.GetPoolEntryRequest(pool_id=POOL), "key"),
            (stub.ListPoolEntries, pb.ListPoolEntriesRequest(pool_id=POOL, page_size=-1), "page_size"),
            (stub.ListPoolEntries, pb.ListPoolEntriesRequest(pool_id=POOL, page_token="伪造的令牌"), "page_token"),
            (stub.ListPoolEntries, pb.ListPoolEntriesRequest(pool_id=POOL, key_prefix="\x01"), "key_prefix"),
            (stub.DeletePoolEntry, pb.DeletePoolEntryRequest(pool_id=POOL, key="k", expected_version=0), "expected_version"),
            (stub.ListPoolEvents, pb.ListPoolEventsRequest(pool_id=POOL, after_sequence=-1), "after_sequence"),
            (stub.ListPoolEvents, pb.ListPoolEventsRequest(pool_id=POOL, page_token="AAAA"), "page_token"),
            (stub.RenderPoolContext, pb.RenderPoolContextRequest(), "pool_ids"),
            (stub.RenderPoolContext, pb.RenderPoolContextRequest(pool_ids=[POOL] * 17), "pool_ids"),
            (stub.RenderPoolContext, pb.RenderPoolContextRequest(pool_ids=[POOL, ""]), "pool_ids[1]"),
            (stub.RenderPoolContext, pb.RenderPoolContextRequest(pool_ids=[POOL], max_tokens=-5), "max_tokens"),
            (stub.RenderPoolContext, pb.RenderPoolContextRequest(pool_ids=[POOL], max_tokens=300_000), "max_tokens"),
            (stub.RenderPoolContext, pb.RenderPoolContextRequest(pool_ids=[POOL], format=9), "format"),
        ]
        failures = []
        for n, (call, request, field) in enumerate(cases):
            try:
                await call(request)
                failures.append(f"case {n} ({field}): accepted")
            except grpc.aio.AioRpcError as err:
                if err.code() not in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED) \
                        or field not in (err.details() or ""):
                    failures.append(f"case {n} ({field}): {err.code().name} {err.details()!r}")
        async for _ in stub.WatchPoolEvents(pb.WatchPoolEventsRequest(pool_id=POOL, after_sequence=0)):
            break  # a valid watch still works (and the stream is cancelled by leaving it)
        with pytest.raises(grpc.aio.AioRpcError) as watch_error:
            async for _ in stub.WatchPoolEvents(pb.WatchPoolEventsRequest(pool_id="")):
                pass
        assert watch_error.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "pool_id" in watch_error.value.details()
        assert not failures, "\n".join(failures)
        got = await stub.GetPoolEntry(pb.GetPoolEntryRequest(pool_id=POOL, key="k"))
        assert (got.entry.content_json, got.entry.version) == ('"v"', 1)
        events = await stub.ListPoolEvents(pb.ListPoolEventsRequest(pool_id=POOL))
        assert [e.sequence for e in events.events] == [1]


async def test_metadata_up_to_the_limit_is_kept_and_only_a_merge_beyond_it_is_refused(server) -> None:
    # 4,200 keys in 61 KB, sent compactly: within the 64 KiB a request may carry.
    many = {f"键{i}": i for i in range(4200)}
    compact = json.dumps(many, ensure_ascii=False, separators=(",", ":"))
    assert 60_000 < len(compact.encode()) < 64 * 1024
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.SharedPoolServiceStub(channel)
        written = await stub.WritePoolEntry(pb.WritePoolEntryRequest(pool_id=POOL, key="k", content_json="1",
                                                                     metadata_json=compact))
        assert json.loads(written.entry.metadata_json) == many
        # Merging 5 KB more onto it would pass 64 KiB: refused, and nothing changes.
        more = json.dumps({"extra": "x" * 5000})
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.WritePoolEntry(pb.WritePoolEntryRequest(pool_id=POOL, key="k", content_json="2",
                                                               metadata_json=more))
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "metadata_json" in (refused.value.details() or "")
        got = (await stub.GetPoolEntry(pb.GetPoolEntryRequest(pool_id=POOL, key="k"))).entry
        assert (got.content_json, got.version, json.loads(got.metadata_json)) == ("1", 1, many)
        assert [e.sequence for e in (await stub.ListPoolEvents(pb.ListPoolEventsRequest(pool_id=POOL))).events] == [1]


def test_local_mode(tmp_path: Path) -> None:
    from agentscope_memory.service import ServiceSettings

    with PoolClient.local(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as pools:
        pools.write("本地", "k", [1, 2], writer="me")
        assert pools.get("本地", "k").value == [1, 2]
        with pytest.raises(PoolConflictError):
            pools.write("本地", "k", 3, expected_version=0)
        assert [e.key for e in pools.list_entries("本地")] == ["k"]
        assert pools.render(["本地"]).text == "[SHARED:k] [1,2]"
        with pytest.raises(InvalidArgumentError) as bad:
            pools.write("", "k", 1)
        assert bad.value.field == "pool_id"
