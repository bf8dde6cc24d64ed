"""Coherent caching (`MemoryService.WatchMessages`) over gRPC: announcements of every change, a
write acknowledged only after every watcher acknowledged it or its lease ran out, renewals, the
writer's own watch, and PostgreSQL (no coherent caching: FAILED_PRECONDITION)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from tests.watch_helpers import ALICE, BOB, KEYS, add, texts


@pytest.fixture
async def server(server_factory):
    return await server_factory(api_keys=KEYS, coherent_cache_lease_s=30.0)


@pytest.fixture
async def channel(server):
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield channel


async def watch(stub: pb_grpc.MemoryServiceStub, memory_id: str, md=ALICE):
    call = stub.WatchMessages(metadata=md)
    await call.write(pb.WatchMessagesRequest(memory_id=memory_id, renewal=1))
    first = await call.read()
    return call, first.started


async def test_a_watch_starts_at_the_current_etag_and_sees_another_clients_append(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    await stub.AddMessages(add("m", "a"), metadata=ALICE)
    call, started = await watch(stub, "m")
    current = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=ALICE)
    assert started.etag == current.etag and started.watch_id and started.lease_duration.seconds == 30
    writing = asyncio.ensure_future(stub.AddMessages(add("m", "b", "c"), metadata=ALICE))
    changed = (await call.read()).changed
    assert changed.appended and texts(changed.messages) == ["b", "c"] and changed.previous_etag == started.etag
    # Not acknowledged yet: the write waits (an unrelated call goes through meanwhile).
    await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=ALICE)
    assert not writing.done()
    await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
    written = await writing
    assert written.etag == changed.etag
    await call.done_writing()
    assert await call.read() == grpc.aio.EOF


async def test_every_kind_of_change_is_announced(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    await stub.AddMessages(add("m", "a", "b", "c"), metadata=ALICE)
    call, started = await watch(stub, "m")
    previous = started.etag
    last_id = (await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=ALICE)).messages[-1].id
    # One at a time: a grpc.aio call starts when it is made.
    changes = [lambda: stub.DeleteMessage(pb.DeleteMessageRequest(memory_id="m", index=0), metadata=ALICE),
               # A mark changes a stored message in place: announced as a change, never as an append.
               lambda: stub.UpdateMessageMarks(pb.UpdateMessageMarksRequest(memory_id="m", message_ids=[last_id],
                                                                            new_mark="已读"), metadata=ALICE),
               lambda: stub.DeleteMessages(pb.DeleteMessagesRequest(memory_id="m", marks=["已读"]), metadata=ALICE),
               lambda: stub.ClearMessages(pb.ClearMessagesRequest(memory_id="m"), metadata=ALICE),
               lambda: stub.DeleteMemory(pb.DeleteMemoryRequest(memory_id="m"), metadata=ALICE)]
    for change in changes:
        task = asyncio.ensure_future(change())
        changed = (await call.read()).changed
        assert not changed.appended and changed.previous_etag == previous and changed.etag != previous
        await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        await task
        previous = changed.etag
    assert previous == "", "a deleted memory has no etag"
    call.cancel()


async def test_the_writers_own_watch_learns_from_the_response(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    call, started = await watch(stub, "m")
    mine = await stub.AddMessages(add("m", "mine", watch_id=started.watch_id), metadata=ALICE)
    assert mine.previous_etag == started.etag
    writing = asyncio.ensure_future(stub.AddMessages(add("m", "theirs"), metadata=ALICE))
    changed = (await call.read()).changed
    # The first announcement this watch gets is the other write's, based on mine.
    assert changed.previous_etag == mine.etag and changed.appended and texts(changed.messages) == ["theirs"]
    await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
    await writing
    call.cancel()


async def test_a_watcher_that_stops_acknowledging_is_waited_for_until_its_lease_ends(server_factory) -> None:
    server = await server_factory(coherent_cache_lease_s=0.5)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        call, started = await watch(stub, "m", md=None)
        # The write returns although the watcher never acknowledges: its lease ran out.
        await stub.AddMessages(add("m", "a"))
        changed = (await call.read()).changed
        # Renewals are not granted while an announcement waits for its acknowledgement.
        await call.write(pb.WatchMessagesRequest(renewal=2))
        await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        await call.write(pb.WatchMessagesRequest(renewal=3))
        granted = (await call.read()).lease_granted
        assert granted.renewal == 3
        # A lapsed watcher is not waited for by later writes until it renews; now it is again.
        writing = asyncio.ensure_future(stub.AddMessages(add("m", "b")))
        changed = (await call.read()).changed
        assert changed.appended and texts(changed.messages) == ["b"]
        await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        await writing
        call.cancel()


async def test_a_closed_watch_is_not_waited_for(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    call, _ = await watch(stub, "m")
    await call.write(pb.WatchMessagesRequest(release=True))
    await call.done_writing()
    assert await call.read() == grpc.aio.EOF
    # With a 30 s lease, only the closed stream lets this return.
    await asyncio.wait_for(stub.AddMessages(add("m", "a"), metadata=ALICE), 20)


async def test_a_watch_is_scoped_to_its_tenant(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    call = stub.WatchMessages(metadata=BOB)
    await call.write(pb.WatchMessagesRequest(memory_id="m", renewal=1))
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await call.read()
    assert failure.value.code() == grpc.StatusCode.NOT_FOUND
    call = stub.WatchMessages()
    await call.write(pb.WatchMessagesRequest(memory_id="m", renewal=1))
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await call.read()
    assert failure.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_postgres_offers_no_coherent_caching(server_factory, postgres_dsn) -> None:
    server = await server_factory(store="postgres", postgres_dsn=postgres_dsn)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        call = stub.WatchMessages()
        await call.write(pb.WatchMessagesRequest(memory_id="m", renewal=1))
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await call.read()
        assert failure.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "if_none_match" in (failure.value.details() or "")


async def test_a_lost_watch_is_waited_for_until_its_lease_ends(server_factory) -> None:
    """A cancelled stream (a lost connection) may not be known to its client yet, which may still
    trust its copy until its lease ends: writes wait until then. A released one (the client
    closed its side) is not waited for at all (see test_a_closed_watch_is_not_waited_for)."""
    server = await server_factory(coherent_cache_lease_s=3.0)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        call, _ = await watch(stub, "m", md=None)
        call.cancel()
        writing = asyncio.ensure_future(stub.AddMessages(add("m", "a")))
        for _ in range(3):
            await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"))
        assert not writing.done()
        await writing
        # Its lease over, the lost watch is forgotten: the next write does not wait.
        await asyncio.wait_for(stub.AddMessages(add("m", "b")), 2.5)


@pytest.mark.parametrize("memory_id", ["", "a\x00b", "会" * 300])
async def test_a_watch_of_a_bad_memory_id_is_invalid_argument(channel, memory_id) -> None:
    call = pb_grpc.MemoryServiceStub(channel).WatchMessages(metadata=ALICE)
    await call.write(pb.WatchMessagesRequest(memory_id=memory_id, renewal=1))
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await call.read()
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "memory_id" in failure.value.details()


async def test_an_undecodable_watch_request_is_invalid_argument(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="会话-watch", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    raw = channel.stream_stream("/agentscope.memory.v1.MemoryService/WatchMessages",
                                request_serializer=lambda b: b, response_deserializer=lambda b: b)
    call = raw(metadata=ALICE)
    await call.write(b"\xff\xff\xff\xff")  # not a WatchMessagesRequest
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await call.read()
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # The memory is untouched and can still be watched.
    call, started = await watch(stub, "会话-watch")
    assert started.etag
    call.cancel()


async def test_a_watch_can_create_its_memory_and_says_how_many_messages_it_holds(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    config = pb.CreateMemoryRequest(kind=pb.MEMORY_KIND_IN_MEMORY, labels={"对话": "新"})
    call = stub.WatchMessages(metadata=ALICE)
    await call.write(pb.WatchMessagesRequest(memory_id="会话-1", renewal=1, create=config))
    started = (await call.read()).started
    got = await stub.GetMemory(pb.GetMemoryRequest(memory_id="会话-1"), metadata=ALICE)
    assert got.memory.labels["对话"] == "新" and got.memory.message_count == 0
    current = await stub.GetMessages(pb.GetMessagesRequest(memory_id="会话-1"), metadata=ALICE)
    assert started.HasField("message_count") and started.message_count == 0
    assert started.etag == current.etag and started.accepts_adds
    # The stream goes on as any watch: an add over it, then another client's add, announced.
    await call.write(pb.WatchMessagesRequest(add=add("", "你好"), add_id=1))
    assert (await call.read()).added.response.message_count == 1
    call.cancel()
    # An existing memory is watched as it is (allow_existing), with its count; other tenants'
    # memories are not touched.
    call = stub.WatchMessages(metadata=ALICE)
    await call.write(pb.WatchMessagesRequest(memory_id="会话-1", renewal=1,
                                             create=pb.CreateMemoryRequest(kind=pb.MEMORY_KIND_IN_MEMORY)))
    assert (await call.read()).started.message_count == 1
    call.cancel()
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.GetMemory(pb.GetMemoryRequest(memory_id="会话-1"), metadata=BOB)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_watch_that_cannot_create_its_memory_ends_with_create_memorys_error(channel) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    cases = [
        (pb.WatchMessagesRequest(memory_id="m", create=pb.CreateMemoryRequest(memory_id="other")), "create.memory_id"),
        (pb.WatchMessagesRequest(memory_id="m", create=pb.CreateMemoryRequest(
            kind=pb.MEMORY_KIND_IN_MEMORY, labels={"": "x"})), "labels"),
        (pb.WatchMessagesRequest(memory_id="", create=pb.CreateMemoryRequest(kind=pb.MEMORY_KIND_IN_MEMORY)),
         "memory_id"),
    ]
    for request, field in cases:
        call = stub.WatchMessages(metadata=ALICE)
        await call.write(request)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await call.read()
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT, failed.value.details()
        assert field in failed.value.details()
    listed = await stub.ListMemories(pb.ListMemoriesRequest(), metadata=ALICE)
    assert [m.memory_id for m in listed.memories] == []
