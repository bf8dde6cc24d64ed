"""Adds over a `WatchMessages` stream (`WatchMessagesRequest.add`): applied in order, answered
with `AddMessages`'s own fields or its own error, replay-safe across the stream and the unary
call, answered only once the other watchers acknowledged, scoped to the stream's tenant, and
counted in metrics as `AddMessages`."""

from __future__ import annotations

import asyncio

import grpc
import httpx

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from tests.watch_helpers import ALICE, BOB, KEYS, add, texts


async def start(server_factory, **settings):
    server = await server_factory(api_keys=KEYS, coherent_cache_lease_s=30.0, **settings)
    channel = grpc.aio.insecure_channel(server.address)
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    return server, channel, stub


async def watch(stub: pb_grpc.MemoryServiceStub, memory_id: str = "m", md=ALICE):
    call = stub.WatchMessages(metadata=md)
    await call.write(pb.WatchMessagesRequest(memory_id=memory_id, renewal=1))
    first = await call.read()
    return call, first.started


async def unary_failure(stub, request: pb.AddMessagesRequest, md=ALICE) -> tuple[int, str]:
    try:
        await stub.AddMessages(request, metadata=md)
    except grpc.aio.AioRpcError as e:
        return e.code().value[0], e.details() or ""
    raise AssertionError("the unary AddMessages succeeded")


async def stream_failure(call, add_id: int, request: pb.AddMessagesRequest) -> tuple[int, str]:
    await call.write(pb.WatchMessagesRequest(add=request, add_id=add_id))
    answer = (await call.read()).added
    assert answer.add_id == add_id and answer.WhichOneof("result") == "failure", answer
    return answer.failure.code, answer.failure.message


async def test_pipelined_adds_are_applied_and_answered_in_order(server_factory) -> None:
    _, channel, stub = await start(server_factory)
    async with channel:
        call, started = await watch(stub)
        assert started.accepts_adds
        # Sent without waiting for answers; the memory id may be left out (the watched one).
        for n in (1, 2, 3):
            await call.write(pb.WatchMessagesRequest(add=add("" if n == 2 else "m", f"t{n}", f"u{n}"), add_id=10 + n))
        answers = [(await call.read()) for _ in range(3)]
        assert [a.WhichOneof("event") for a in answers] == ["added"] * 3, "own adds are not announced to the watch"
        results = [a.added for a in answers]
        assert [r.add_id for r in results] == [11, 12, 13]
        assert [r.response.message_count for r in results] == [2, 4, 6]
        assert not any(r.response.replayed for r in results)
        versions = [r.response.version for r in results]
        assert versions == sorted(versions) and len(set(versions)) == 3
        # Each answer names the state it started from: the watch can follow its own writes.
        assert results[0].response.previous_etag == started.etag
        assert [r.response.previous_etag for r in results[1:]] == [r.response.etag for r in results[:-1]]
        now = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=ALICE)
        assert texts(now.messages) == ["t1", "u1", "t2", "u2", "t3", "u3"]
        assert now.etag == results[-1].response.etag
        # The stream goes on as a watch: another client's add is announced after the own ones.
        writing = asyncio.ensure_future(stub.AddMessages(add("m", "theirs"), metadata=ALICE))
        changed = (await call.read()).changed
        assert changed.previous_etag == now.etag and texts(changed.messages) == ["theirs"]
        await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        await writing
        call.cancel()


async def test_an_add_errs_with_the_code_and_message_of_the_unary_call(server_factory) -> None:
    _, channel, stub = await start(server_factory, max_batch_messages=2)
    async with channel:
        call, _ = await watch(stub)
        bad = [
            add("m"),  # no messages
            add("m", "a", "b", "c"),  # over the batch limit
            add("m", "a", request_id="x" * 200),  # request id too long
        ]
        for n, request in enumerate(bad, 1):
            code, message = await stream_failure(call, n, request)
            assert (code, message) == await unary_failure(stub, request)
            assert code in (grpc.StatusCode.INVALID_ARGUMENT.value[0], grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
        # Another memory than the watched one cannot be written through the watch.
        code, message = await stream_failure(call, 9, add("other", "a"))
        assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "add.memory_id" in message
        # A deleted memory: NOT_FOUND, as the unary call says.
        deleting = asyncio.ensure_future(stub.DeleteMemory(pb.DeleteMemoryRequest(memory_id="m"), metadata=ALICE))
        changed = (await call.read()).changed
        assert changed.etag == ""
        await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        await deleting
        code, message = await stream_failure(call, 10, add("m", "late"))
        assert code == grpc.StatusCode.NOT_FOUND.value[0]
        assert (code, message) == await unary_failure(stub, add("m", "late"))
        # Failed adds do not end the watch.
        await call.write(pb.WatchMessagesRequest(renewal=2))
        assert (await call.read()).lease_granted.renewal == 2
        call.cancel()


async def test_a_request_id_is_replayed_across_the_stream_and_the_unary_call(server_factory) -> None:
    _, channel, stub = await start(server_factory)
    async with channel:
        call, _ = await watch(stub)
        # (A message gets its id and timestamp when created: build each request once.)
        once = add("m", "once", request_id="r-1")
        await call.write(pb.WatchMessagesRequest(add=once, add_id=1))
        first = (await call.read()).added.response
        assert first.message_count == 1 and not first.replayed
        # The client lost the stream before the answer: it sends the same add as AddMessages.
        again = await stub.AddMessages(once, metadata=ALICE)
        assert again.replayed and again.message_count == 1 and again.etag == ""
        # And the other way round: a unary add replayed on the stream.
        twice = add("m", "twice", request_id="r-2")
        writing = asyncio.ensure_future(stub.AddMessages(twice, metadata=ALICE))
        # Not the watch's own write: announced to it, and waiting for its acknowledgement.
        changed = (await call.read()).changed
        await call.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        await writing
        await call.write(pb.WatchMessagesRequest(add=twice, add_id=2))
        replayed = (await call.read()).added.response
        assert replayed.replayed and replayed.message_count == 2
        # The same id with other messages is refused on both, with the same words.
        other = add("m", "different", request_id="r-1")
        code, message = await stream_failure(call, 3, other)
        assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert (code, message) == await unary_failure(stub, other)
        now = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=ALICE)
        assert texts(now.messages) == ["once", "twice"]
        call.cancel()


async def test_an_add_is_answered_only_after_another_watcher_acked_while_its_stream_goes_on(server_factory) -> None:
    _, channel, stub = await start(server_factory)
    async with channel:
        writer, _ = await watch(stub)
        other, _ = await watch(stub)
        await writer.write(pb.WatchMessagesRequest(add=add("m", "a"), add_id=1))
        changed = (await other.read()).changed
        assert texts(changed.messages) == ["a"]
        # The add waits for the other watcher; meanwhile the writer's own renewals are served.
        await writer.write(pb.WatchMessagesRequest(renewal=2))
        first = await writer.read()
        assert first.WhichOneof("event") == "lease_granted" and first.lease_granted.renewal == 2
        await other.write(pb.WatchMessagesRequest(ack_sequence=changed.sequence))
        answer = (await writer.read()).added
        assert answer.add_id == 1 and answer.response.etag == changed.etag
        writer.cancel()
        other.cancel()


async def test_adds_still_queued_when_the_client_closes_its_side_are_answered(server_factory) -> None:
    _, channel, stub = await start(server_factory)
    async with channel:
        call, _ = await watch(stub)
        await call.write(pb.WatchMessagesRequest(add=add("m", "a"), add_id=1))
        await call.write(pb.WatchMessagesRequest(add=add("m", "b"), add_id=2))
        await call.done_writing()
        answers = [(await call.read()).added for _ in range(2)]
        assert [a.response.message_count for a in answers] == [1, 2]
        assert await call.read() == grpc.aio.EOF


async def test_a_release_in_the_first_message_ends_the_watch_once_its_add_is_answered(server_factory) -> None:
    """A one-shot add (watch, add and release in one message) used to leave the stream open, its
    `release` ignored: the client waited for an end that never came, and cancelling it then kept
    other writers waiting for its lease (30 s here)."""
    _, channel, stub = await start(server_factory)
    async with channel:
        call = stub.WatchMessages(metadata=ALICE)
        await call.write(pb.WatchMessagesRequest(memory_id="m", renewal=1, add=add("", "once"), add_id=7,
                                                 release=True))
        assert (await asyncio.wait_for(call.read(), 5)).WhichOneof("event") == "started"
        answer = (await asyncio.wait_for(call.read(), 5)).added
        assert answer.add_id == 7 and answer.response.message_count == 1
        assert await asyncio.wait_for(call.read(), 5) == grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK
        # Released: another write does not wait for the watch's lease.
        await asyncio.wait_for(stub.AddMessages(add("m", "next"), metadata=ALICE), 5)
        # A release alone in the first message ends the watch at once, after `started`.
        call = stub.WatchMessages(metadata=ALICE)
        await call.write(pb.WatchMessagesRequest(memory_id="m", renewal=1, release=True))
        assert (await asyncio.wait_for(call.read(), 5)).started.message_count == 2
        assert await asyncio.wait_for(call.read(), 5) == grpc.aio.EOF
        await asyncio.wait_for(stub.AddMessages(add("m", "last"), metadata=ALICE), 5)


async def test_adds_on_a_watch_act_for_the_streams_tenant(server_factory) -> None:
    _, channel, stub = await start(server_factory)
    async with channel:
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=BOB)
        alices, _ = await watch(stub, md=ALICE)
        bobs, _ = await watch(stub, md=BOB)
        await bobs.write(pb.WatchMessagesRequest(add=add("m", "bob's"), add_id=1))
        # Answered at once: Alice's watch of her own "m" is no watcher of Bob's.
        assert (await bobs.read()).added.response.message_count == 1
        assert texts((await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=BOB)).messages) == ["bob's"]
        assert not (await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=ALICE)).messages
        # Alice's watch heard nothing of it: its next message is the grant of this renewal.
        await alices.write(pb.WatchMessagesRequest(renewal=2))
        assert (await alices.read()).WhichOneof("event") == "lease_granted"
        alices.cancel()
        bobs.cancel()


async def test_adds_on_a_watch_are_counted_as_add_messages_calls(server_factory) -> None:
    server, channel, stub = await start(server_factory, metrics_port=0)
    async with channel:
        call, _ = await watch(stub)
        await call.write(pb.WatchMessagesRequest(add=add("m", "a"), add_id=1))
        assert (await call.read()).added.response.message_count == 1
        await stream_failure(call, 2, add("m"))
        call.cancel()
    async with httpx.AsyncClient() as http:
        # With keys on, /metrics wants one (any tenant's) as the other HTTP surfaces do.
        text = (await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics",
                               headers={"Authorization": f"Bearer {next(iter(KEYS))}"})).text
    method = "/agentscope.memory.v1.MemoryService/AddMessages"
    assert f'agentscope_memory_rpc_calls_total{{code="OK",method="{method}"}} 1.0' in text
    assert f'agentscope_memory_rpc_calls_total{{code="INVALID_ARGUMENT",method="{method}"}} 1.0' in text
    assert ('rpc_server_call_duration_seconds_count{rpc_grpc_status_code="3",rpc_method="AddMessages",'
            'rpc_service="agentscope.memory.v1.MemoryService",rpc_system="grpc"} 1.0') in text


async def test_a_streams_queued_adds_leave_the_event_loop_a_turn_between_them() -> None:
    # An add can complete without ever suspending (an inline SQLite write nobody else watches):
    # a stream's queued adds must not run back to back and hold every other call meanwhile.
    from agentscope_memory.short_term.coherence import Watcher
    from agentscope_memory_server.memory_servicer import _StreamAdds

    applied: list[int] = []
    seen_by_another_call: list[int] = []

    class Instant:
        async def _add_messages(self, tenant: str, request: pb.AddMessagesRequest) -> pb.AddMessagesResponse:
            if not applied:
                # Another call, ready to run once the loop gets a turn.
                asyncio.get_running_loop().call_soon(lambda: seen_by_another_call.append(len(applied)))
            applied.append(len(applied))
            return pb.AddMessagesResponse(message_count=len(applied))

    watcher = Watcher("w", "t", "m")
    adds = _StreamAdds(Instant(), watcher)  # type: ignore[arg-type]
    for i in range(100):
        adds.take(pb.WatchMessagesRequest(add=add("m", f"t{i}"), add_id=i + 1))
    for _ in range(100):
        assert (await asyncio.wait_for(watcher.outbox.get(), 5)).added.response.message_count > 0
    assert len(applied) == 100
    assert seen_by_another_call and seen_by_another_call[0] < 5, seen_by_another_call
    adds.stop(lambda: None)
