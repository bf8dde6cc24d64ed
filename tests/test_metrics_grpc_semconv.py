"""Prometheus metrics in OpenTelemetry's RPC convention (`rpc.server.call.duration`), streaming
calls included, beside the server's own per-method counters."""

from __future__ import annotations

import httpx
import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import NotFoundError
from agentscope_memory.message import Msg, MsgRole


async def test_call_duration_by_service_method_and_status_code(server_factory) -> None:
    server = await server_factory(metrics_port=0)
    async with AsyncMemoryClient(server.address, timeout=10) as client:
        await client.create_memory("指标-1")
        await client.add_message("指标-1", Msg.create(MsgRole.USER, "hello"))
        entries, _ = await client.save_state("指标-1")  # a server-streaming call
        assert entries
        await client.load_state("指标-1", entries)  # a client-streaming call
        with pytest.raises(NotFoundError):
            await client.get_memory("missing")
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics")).text

    def count(service: str, method: str, code: int) -> float:
        prefix = "rpc_server_call_duration_seconds_count{"
        labels = (f'rpc_grpc_status_code="{code}",rpc_method="{method}",'
                  f'rpc_service="{service}",rpc_system="grpc"}}')
        for line in text.splitlines():
            if line.startswith(prefix + labels):
                return float(line.split()[-1])
        return 0.0

    assert count("agentscope.memory.v1.MemoryService", "CreateMemory", 0) == 1
    assert count("agentscope.memory.v1.MemoryService", "AddMessages", 0) == 1
    assert count("agentscope.memory.v1.MemoryService", "GetMemory", 5) == 1
    assert count("agentscope.memory.v1.StateService", "StreamSaveState", 0) == 1
    assert count("agentscope.memory.v1.StateService", "StreamLoadState", 0) == 1
    # The server's own names stay (dashboards built on them keep working).
    assert 'agentscope_memory_rpc_calls_total{code="NOT_FOUND",method="/agentscope.memory.v1.MemoryService/GetMemory"} 1.0' in text


async def test_metrics_want_a_configured_key_when_keys_are_on(server_factory) -> None:
    keys = {"metrics-key-tenant-a-0001": "tenant-a", "metrics-key-tenant-b-0002": "tenant-b"}
    server = await server_factory(metrics_port=0, api_keys=keys)
    async with AsyncMemoryClient(server.address, api_key="metrics-key-tenant-a-0001", timeout=10) as client:
        await client.create_memory("secret-memory")
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    async with httpx.AsyncClient() as http:
        missing = await http.get(url)
        unknown = await http.get(url, headers={"Authorization": "Bearer not-a-configured-key-000"})
        # Prometheus' `authorization` scrape setting sends Bearer; any tenant's key may read.
        scraped = await http.get(url, headers={"Authorization": "Bearer metrics-key-tenant-b-0002"})
        by_header = await http.get(url, headers={"x-api-key": "metrics-key-tenant-a-0001"})
    assert missing.status_code == 401 and "missing API key" in missing.text
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert unknown.status_code == 401 and "unknown API key" in unknown.text
    assert "agentscope_memory_rpc" not in missing.text + unknown.text
    assert scraped.status_code == 200 and by_header.status_code == 200
    assert 'method="/agentscope.memory.v1.MemoryService/CreateMemory"' in scraped.text
    assert "tenant-a" not in scraped.text and "secret-memory" not in scraped.text
