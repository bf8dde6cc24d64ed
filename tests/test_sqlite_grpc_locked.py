"""Another program holding the sqlite file's write lock (a local-mode client beside the server,
which the data-dir lock allows, or an operator's `sqlite3` shell) longer than SQLite's busy
timeout: a write answers UNAVAILABLE saying so (clients retry it), not INTERNAL. While it waits,
the server answers everything else: the wait is on a worker thread, never on the event loop."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.errors import UnavailableError
from agentscope_memory.message import Msg, MsgRole


@pytest.mark.slow
async def test_a_write_lock_held_elsewhere_answers_unavailable(server_factory, tmp_path) -> None:
    server = await server_factory(data_dir=tmp_path / "data", long_term_enabled=False)
    async with AsyncMemoryClient(server.address, retries=0, timeout=60) as client:
        await client.create_memory("锁")
        await client.add_message("锁", Msg.create(MsgRole.USER, "before"))
        other = sqlite3.connect(tmp_path / "data" / "agentscope-memory.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="locked by another program") as error:
                await client.add_message("锁", Msg.create(MsgRole.USER, "while locked"))
            assert "incident" not in str(error.value) and time.monotonic() - started < 30
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert await client.add_message("锁", Msg.create(MsgRole.USER, "after")) == 2
        assert [m.text_content for m in await client.get_messages("锁")] == ["before", "after"]


def test_a_write_waiting_for_the_lock_does_not_stall_other_calls(tmp_path: Path) -> None:
    from tests.conftest import ServerThread, make_settings

    # A server with its own event loop, so this test's clock runs while the server's is stuck.
    server = ServerThread(make_settings(tmp_path / "data", long_term_enabled=False))
    other = sqlite3.connect(tmp_path / "data" / "agentscope-memory.sqlite3", isolation_level=None)
    try:
        with MemoryClient(server.address, retries=0, timeout=60) as client:
            client.create_memory("锁")
            client.add_message("锁", Msg.create(MsgRole.USER, "before"))
            other.execute("BEGIN IMMEDIATE")
            outcome: list[object] = []
            writer = threading.Thread(target=lambda: outcome.append(
                client.add_message("锁", Msg.create(MsgRole.USER, "while locked"))))
            writer.start()
            time.sleep(0.5)  # the add is now waiting for the lock
            assert not outcome
            with grpc.insecure_channel(server.address) as channel:
                started = time.monotonic()
                health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
                assert health.status == health_pb2.HealthCheckResponse.SERVING
            with MemoryClient(server.address, retries=0, timeout=3) as reader:
                assert [m.text_content for m in reader.get_messages("锁")] == ["before"]
            assert time.monotonic() - started < 3
            assert writer.is_alive()
            other.execute("COMMIT")
            writer.join(15)
            assert outcome == [2]
            assert [m.text_content for m in client.get_messages("锁")] == ["before", "while locked"]
    finally:
        other.close()
        server.stop()


async def test_a_cancelled_small_write_waiting_for_the_lock_ends_with_its_transaction(tmp_path: Path) -> None:
    """What follows a small write (the coherent cache's announcement) must follow its commit:
    a caller cancelled while the write waits for the lock hears of it once the write is over."""
    import asyncio

    from agentscope_memory.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.sqlite3")
    other = sqlite3.connect(tmp_path / "s.sqlite3", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(store.run("t", lambda tx: tx.kv_put("m", "k", "值"), small=True))
        await asyncio.sleep(0.3)
        write.cancel()
        await asyncio.sleep(0.3)
        assert not write.done()
        other.execute("COMMIT")
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(write, 15)
        assert await store.run("t", lambda tx: tx.kv_get("m", "k"), write=False, small=True) == "值"
    finally:
        other.close()
        await store.close()


async def test_a_write_cancelled_while_waiting_for_the_lock_is_still_announced_to_watchers(
        server_factory, tmp_path: Path) -> None:
    """The writer gave up (its deadline passed) while another program held the lock; the write
    committed once the lock was free, and a client caching the memory must hear of it."""
    import asyncio

    from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
    from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
    from tests.watch_helpers import add, texts

    server = await server_factory(data_dir=tmp_path / "data", long_term_enabled=False, coherent_cache_lease_s=30.0)
    other = sqlite3.connect(tmp_path / "data" / "agentscope-memory.sqlite3", isolation_level=None)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="缓存", kind=pb.MEMORY_KIND_IN_MEMORY))
        watch = stub.WatchMessages()
        await watch.write(pb.WatchMessagesRequest(memory_id="缓存", renewal=1))
        started = (await watch.read()).started
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(grpc.aio.AioRpcError) as late:
                await stub.AddMessages(add("缓存", "迟到"), timeout=0.5)
            assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        finally:
            other.execute("COMMIT")
            other.close()
        changed = (await asyncio.wait_for(watch.read(), 15)).changed
        assert changed.previous_etag == started.etag and texts(changed.messages) == ["迟到"]
        await watch.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        current = await stub.GetMessages(pb.GetMessagesRequest(memory_id="缓存"))
        assert current.etag == changed.etag and texts(current.messages) == ["迟到"]
        watch.cancel()
