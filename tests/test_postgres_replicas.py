"""Several server replicas on one PostgreSQL database: any replica serves any memory."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import AlreadyExistsError, UnavailableError
from agentscope_memory.message import Msg, MsgRole


@pytest.fixture
async def replicas(server_factory, postgres_dsn):
    return [await server_factory(store="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]


async def test_a_memory_written_on_one_replica_is_read_on_the_other(replicas) -> None:
    a, b = replicas
    async with AsyncMemoryClient(a.address) as first, AsyncMemoryClient(b.address) as second:
        await first.create_memory("m")
        await first.add_message("m", Msg.create(MsgRole.USER, "hello"))
        assert [m.text_content for m in await second.get_messages("m")] == ["hello"]
        await second.delete_message("m", 0)
        assert await first.get_messages("m") == []
        with pytest.raises(AlreadyExistsError):
            await second.create_memory("m")


async def test_concurrent_writes_through_both_replicas_are_all_kept_in_order(replicas) -> None:
    clients = [AsyncMemoryClient(r.address) for r in replicas]
    try:
        await clients[0].create_memory("m")

        async def writer(w: int) -> None:
            client = clients[w % 2]
            for i in range(25):
                await client.add_message("m", Msg.create(MsgRole.USER, f"{w}:{i}"))

        await asyncio.gather(*(writer(w) for w in range(6)))
        texts = [m.text_content for m in await clients[1].get_messages("m")]
        assert len(texts) == 150 and len(set(texts)) == 150
        for w in range(6):
            assert [t for t in texts if t.startswith(f"{w}:")] == [f"{w}:{i}" for i in range(25)]
        assert (await clients[0].get_memory("m")).message_count == 150
    finally:
        for client in clients:
            await client.close()


async def test_a_retry_on_the_other_replica_is_not_stored_twice(replicas) -> None:
    a, b = replicas
    msg = Msg.create(MsgRole.USER, "once")
    async with AsyncMemoryClient(a.address) as first, AsyncMemoryClient(b.address) as second:
        await first.create_memory("m")
        await first.add_messages("m", [msg], request_id="retry-1")
        await second.add_messages("m", [msg], request_id="retry-1")
        assert len(await second.get_messages("m")) == 1


@pytest.mark.parametrize("kind", ["IN_MEMORY", "AUTO_CONTEXT", "TIERED"])
async def test_get_or_create_at_once_through_both_replicas_answers_the_one_memory(replicas, kind) -> None:
    # Agents starting together each "get or create" their memory (allow_existing): on sqlite the
    # calls queue up; on PostgreSQL they race between the existence check and the insert.
    clients = [AsyncMemoryClient(r.address, retries=0) for r in replicas for _ in range(3)]
    try:
        for n in range(8):
            memory_id = f"会话-{n}"
            created = await asyncio.gather(*(c.create_memory(memory_id, kind, allow_existing=True) for c in clients))
            assert {(m.memory_id, m.kind, m.create_time) for m in created} == {(memory_id, kind, created[0].create_time)}
        assert len([m async for m in clients[1].list_memories()]) == 8
    finally:
        for client in clients:
            await client.close()


async def test_request_ids_older_than_a_day_are_forgotten_as_on_sqlite(replicas, postgres_dsn) -> None:
    # Every add of the clients carries a request id; sqlite forgets them after 24 h, PostgreSQL
    # kept every one for ever.
    async with AsyncMemoryClient(replicas[0].address) as first, AsyncMemoryClient(replicas[1].address) as second:
        await first.create_memory("m")
        msg = Msg.create(MsgRole.USER, "recent")
        await first.add_messages("m", [msg], request_id="recent")
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO asm_requests SELECT 'default', 'm', 'old-' || i, 'f', '{}', %s"
                         " FROM generate_series(1, 3000) AS i", (time.time() - 2 * 24 * 3600,))

        async def writer(client: AsyncMemoryClient) -> None:
            for i in range(260):
                await client.add_message("m", Msg.create(MsgRole.USER, f"{i}"))

        # 1040 adds on each replica: both prune once, neither blocks on the other.
        await asyncio.gather(*(writer(c) for c in (first, second) for _ in range(4)))
        deadline = time.monotonic() + 10
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            while conn.execute("SELECT count(*) FROM asm_requests WHERE request_id LIKE 'old-%'").fetchone() != (0,):
                assert time.monotonic() < deadline, "old request ids are still kept"
                await asyncio.sleep(0.1)
        # Recent ones still answer their retries.
        await second.add_messages("m", [msg], request_id="recent")
        assert (await second.get_memory("m")).message_count == 1 + 8 * 260


async def test_a_transaction_left_open_on_a_memory_costs_its_writers_ten_seconds_and_no_one_else(
        replicas, postgres_dsn) -> None:
    # A replica frozen (paused, cut off) in the middle of a write holds the memory's row lock.
    # Its writers waited for ever, each holding one of the replica's connections, and soon no
    # call of any memory was served; as on sqlite (another program holding the file's lock),
    # they now answer UNAVAILABLE after 10 s, and the rest goes on meanwhile.
    async with AsyncMemoryClient(replicas[0].address, retries=0) as client:
        await client.create_memory("m")
        await client.create_memory("other")
        with psycopg.connect(postgres_dsn) as frozen:
            frozen.execute("SELECT * FROM asm_memories WHERE memory_id = 'm' FOR UPDATE")
            started = time.monotonic()
            blocked = [asyncio.ensure_future(client.add_message("m", Msg.create(MsgRole.USER, "waits")))
                       for _ in range(2)]
            await asyncio.sleep(0.5)
            assert await client.add_message("other", Msg.create(MsgRole.USER, "served")) == 1
            assert [m.text_content for m in await client.get_messages("other")] == ["served"]
            for call in blocked:
                with pytest.raises(UnavailableError, match="locked by another transaction .* for more than 10 s; nothing"):
                    await call
            # 10 s per lock: a writer queued behind another first waits for its turn at the row.
            assert time.monotonic() - started < 25
            frozen.rollback()
        assert await client.add_message("m", Msg.create(MsgRole.USER, "after")) == 1
