"""A watch whose caller goes away (deadline passed, call cancelled) ends on the server within
a couple of seconds, even with nothing to send: no handler, and no polling, is left behind."""

from __future__ import annotations

import asyncio

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pool_pb
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2 as tier_pb
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.tiered import AsyncTieredClient


async def _settled(limit: float = 10.0) -> int:
    """The number of tasks once it stops falling."""
    count = len(asyncio.all_tasks())
    for _ in range(int(limit / 0.5)):
        await asyncio.sleep(0.5)
        now = len(asyncio.all_tasks())
        if now == count:
            return now
        count = now
    return count


async def test_abandoned_watches_end_on_the_server(server) -> None:
    async with AsyncMemoryClient(server.address) as memories, AsyncTieredClient(server.address) as tiered:
        await memories.create_memory("压缩", "AUTO_CONTEXT")
        await tiered.create_memory("分层")
    watches = [
        ("/agentscope.memory.v1.SharedPoolService/WatchPoolEvents", pool_pb.WatchPoolEventsRequest(pool_id="池")),
        ("/agentscope.memory.v1.MemoryService/WatchCompressionEvents",
         mem_pb.WatchCompressionEventsRequest(memory_id="压缩")),
        ("/agentscope.memory.v1.TieredMemoryService/WatchTierEvents", tier_pb.WatchTierEventsRequest(memory_id="分层")),
    ]
    async with grpc.aio.insecure_channel(server.address) as channel:
        before = await _settled()
        calls = []
        for path, request in watches:
            for _ in range(4):
                call = channel.unary_stream(path, request_serializer=lambda m: m.SerializeToString())(
                    request, timeout=0.5)
                calls.append(call)
        for call in calls:
            try:
                async for _ in call:
                    pass
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # Cancelled by the caller, too.
        cancelled = channel.unary_stream(watches[0][0], request_serializer=lambda m: m.SerializeToString())(
            watches[0][1])
        await asyncio.sleep(0.3)
        cancelled.cancel()
        await asyncio.sleep(2.5)
        # Each abandoned watch held at least one task (twelve plus one): all are gone.
        assert await _settled() <= before
