"""A retried AddMessages with the same request id stores nothing twice."""

from __future__ import annotations

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msgs_to_proto


@pytest.fixture
async def stub(server):
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        yield stub


async def test_retry_with_same_request_id_adds_nothing(stub) -> None:
    msgs = msgs_to_proto([Msg.create(MsgRole.USER, "a"), Msg.create(MsgRole.USER, "b")])
    request = pb.AddMessagesRequest(memory_id="m", messages=msgs, request_id="req-1")
    first = await stub.AddMessages(request)
    again = await stub.AddMessages(request)
    assert (first.message_count, first.replayed) == (2, False)
    assert (again.message_count, again.version, again.replayed) == (2, first.version, True)
    page = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"))
    assert len(page.messages) == 2


async def test_replay_reports_the_original_result_after_more_writes(stub) -> None:
    one = msgs_to_proto([Msg.create(MsgRole.USER, "a")])
    first = await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=one, request_id="r1"))
    await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=msgs_to_proto([Msg.create(MsgRole.USER, "b")])))
    replay = await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=one, request_id="r1"))
    assert replay.replayed and replay.message_count == first.message_count == 1
    assert (await stub.GetMemory(pb.GetMemoryRequest(memory_id="m"))).memory.message_count == 2


async def test_same_request_id_with_different_messages_is_rejected(stub) -> None:
    await stub.AddMessages(pb.AddMessagesRequest(
        memory_id="m", messages=msgs_to_proto([Msg.create(MsgRole.USER, "a")]), request_id="r1"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.AddMessages(pb.AddMessagesRequest(
            memory_id="m", messages=msgs_to_proto([Msg.create(MsgRole.USER, "other")]), request_id="r1"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "request_id" in err.value.details()


async def test_request_ids_are_per_memory(stub) -> None:
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="n", kind=pb.MEMORY_KIND_IN_MEMORY))
    msgs = msgs_to_proto([Msg.create(MsgRole.USER, "a")])
    await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=msgs, request_id="shared"))
    other = await stub.AddMessages(pb.AddMessagesRequest(memory_id="n", messages=msgs, request_id="shared"))
    assert not other.replayed and other.message_count == 1


async def test_without_request_id_every_call_appends(stub) -> None:
    msgs = msgs_to_proto([Msg.create(MsgRole.USER, "a")])
    await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=msgs))
    second = await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=msgs))
    assert second.message_count == 2 and not second.replayed


async def test_idempotency_survives_a_restart(server_factory, tmp_path) -> None:
    data = tmp_path / "restart"
    msgs = msgs_to_proto([Msg.create(MsgRole.USER, "a")])
    server = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=msgs, request_id="r1"))
    await server.stop(0)
    server = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        replay = await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=msgs, request_id="r1"))
        assert replay.replayed and replay.message_count == 1
