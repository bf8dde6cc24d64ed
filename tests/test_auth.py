"""API keys map callers to tenants; tenants never see each other's memories."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import NotFoundError, UnauthenticatedError
from agentscope_memory.message import Msg, MsgRole

KEYS = {"key-for-alice-000001": "alice", "key-for-bob-00000001": "bob", "second-key-alice-001": "alice"}


@pytest.fixture
async def server(server_factory):
    return await server_factory(api_keys=KEYS)


async def test_calls_without_a_valid_key_are_unauthenticated(server) -> None:
    for key, reason in ((None, "missing API key"), ("not-a-key-at-all-000", "unknown API key")):
        async with AsyncMemoryClient(server.address, api_key=key) as client:
            with pytest.raises(UnauthenticatedError, match=reason):
                await client.create_memory("m")
    async with grpc.aio.insecure_channel(server.address) as channel:
        status = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert status.status == health_pb2.HealthCheckResponse.SERVING


async def test_tenants_are_isolated(server) -> None:
    async with AsyncMemoryClient(server.address, api_key="key-for-alice-000001") as alice, \
            AsyncMemoryClient(server.address, api_key="key-for-bob-00000001") as bob, \
            AsyncMemoryClient(server.address, api_key="second-key-alice-001") as alice2:
        await alice.create_memory("shared-name")
        await alice.add_message("shared-name", Msg.create(MsgRole.USER, "alice's secret"))
        await bob.create_memory("shared-name")
        assert await bob.get_messages("shared-name") == []
        assert [m.memory_id async for m in bob.list_memories()] == ["shared-name"]
        await bob.delete_memory("shared-name")
        with pytest.raises(NotFoundError):
            await bob.get_messages("shared-name")
        # Another key of the same tenant sees the same memories.
        assert [m.text_content for m in await alice2.get_messages("shared-name")] == ["alice's secret"]


async def test_bearer_token_is_accepted(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
        from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc

        stub = pb_grpc.MemoryServiceStub(channel)
        response = await stub.ListMemories(pb.ListMemoriesRequest(),
                                           metadata=[("authorization", "Bearer key-for-bob-00000001")])
        assert list(response.memories) == []


def test_short_keys_are_rejected_at_start() -> None:
    from pydantic import ValidationError

    from agentscope_memory_server.config import Settings

    with pytest.raises(ValidationError, match="at least 16"):
        Settings(api_keys={"short": "t"})
    with pytest.raises(ValidationError, match="tenant"):
        Settings(api_keys={"long-enough-key-0001": "../x"})


async def test_a_client_stream_is_authenticated_and_acts_for_its_keys_tenant(server) -> None:
    # StreamLoadState is the one client-streaming RPC: it once ran with no key check, as the
    # default tenant, while every other kind of call was checked.
    import json

    from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
    from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
    from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb
    from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as spb_grpc

    alice = [("x-api-key", "key-for-alice-000001")]
    message = {"id": "m1", "name": "用户", "role": "USER", "content": [{"type": "text", "text": "爱丽丝的秘密"}],
               "metadata": {}, "timestamp": "2026-11-26 10:00:00.000"}

    def load(memory_id: str):
        async def pieces():
            yield spb.StreamLoadStateRequest(memory_id=memory_id, entries=[spb.StateEntry(
                key="memory_messages", list=spb.JsonList(items=[json.dumps(message, ensure_ascii=False)]))])
        return pieces()

    async with grpc.aio.insecure_channel(server.address) as channel:
        memories, state = pb_grpc.MemoryServiceStub(channel), spb_grpc.StateServiceStub(channel)
        for metadata, reason in (([], "missing API key"), ([("x-api-key", "not-a-key-at-all-000")], "unknown API key")):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await state.StreamLoadState(load("记忆-1"), metadata=metadata)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert reason in (refused.value.details() or "")
        await memories.CreateMemory(pb.CreateMemoryRequest(memory_id="记忆-1", kind=pb.MEMORY_KIND_IN_MEMORY),
                                    metadata=alice)
        await state.StreamLoadState(load("记忆-1"), metadata=alice)
    async with AsyncMemoryClient(server.address, api_key="second-key-alice-001") as alice2, \
            AsyncMemoryClient(server.address, api_key="key-for-bob-00000001") as bob:
        assert [m.text_content for m in await alice2.get_messages("记忆-1")] == ["爱丽丝的秘密"]
        with pytest.raises(NotFoundError):
            await bob.get_messages("记忆-1")
