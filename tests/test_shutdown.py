"""Graceful shutdown: in-flight calls finish, new ones are refused, stores close last."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msg_to_proto
from conftest import ServerProcess


class GatedStore:
    """Wraps the real store; write transactions wait at a gate so a call stays in flight."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()
        self.closed = False

    async def run(self, tenant, fn, *, write=True, small=False):
        if write:
            self.waiting.set()
            await self.gate.wait()
        return await self.inner.run(tenant, fn, write=write, small=small)

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()


async def test_in_flight_call_finishes_during_shutdown(server_factory) -> None:
    server = await server_factory()
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        gated = GatedStore(server.store)
        server.service.memories.store = gated
        server.service.store = gated
        request = pb.AddMessagesRequest(
            memory_id="m", messages=[msg_to_proto(Msg.create(MsgRole.USER, "in flight"))])

        async def add():
            return await stub.AddMessages(request, timeout=10)

        call = asyncio.create_task(add())
        await asyncio.wait_for(gated.waiting.wait(), 5)
        stopping = asyncio.create_task(server.stop(5))
        await asyncio.sleep(0.3)
        # Health reports the shutdown; new calls are refused while the old one is still running.
        assert not call.done() and not gated.closed
        async with grpc.aio.insecure_channel(server.address) as fresh:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await pb_grpc.MemoryServiceStub(fresh).GetMemory(pb.GetMemoryRequest(memory_id="m"), timeout=2)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        gated.gate.set()
        response = await call
        assert response.message_count == 1
        await stopping
        assert gated.closed


async def test_health_serves_every_service(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", "agentscope.memory.v1.MemoryService", "agentscope.memory.v1.LongTermMemoryService",
                     "agentscope.memory.v1.StateService"):
            status = await health.Check(health_pb2.HealthCheckRequest(service=name))
            assert status.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.slow
def test_sigterm_stops_the_process_cleanly(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data")
    try:
        assert server.terminate() == 0
        log = server.log_path.read_text()
        assert "shutting down" in log and "stopped" in log
    finally:
        server.close()


async def test_prometheus_metrics_count_calls_by_method_and_code(server_factory) -> None:
    import httpx

    server = await server_factory(metrics_port=0)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetMemory(pb.GetMemoryRequest(memory_id="missing"))
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics")).text
    assert 'agentscope_memory_rpc_calls_total{code="OK",method="/agentscope.memory.v1.MemoryService/CreateMemory"} 1.0' in text
    assert 'code="NOT_FOUND",method="/agentscope.memory.v1.MemoryService/GetMemory"' in text
    assert "agentscope_memory_rpc_seconds_bucket" in text
