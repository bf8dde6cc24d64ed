"""A collector that accepts connections and never answers holds up neither the calls nor the
server's stop."""

from __future__ import annotations

import asyncio
import socket
import time

from agentscope_memory.client import AsyncMemoryClient


async def test_a_hung_collector_delays_a_stop_by_seconds_not_minutes(server_factory) -> None:
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(100)  # connections are accepted by the kernel, and never read or answered
        server = await server_factory(otlp_endpoint=f"http://127.0.0.1:{hung.getsockname()[1]}")
        async with AsyncMemoryClient(server.address, timeout=10) as client:
            started = time.monotonic()
            for i in range(400):  # more spans than one export batch holds
                await client.create_memory(f"会话-{i}")
            assert time.monotonic() - started < 20  # the calls never wait for the exporter
        await asyncio.sleep(1.5)  # the exporter is now waiting on the collector
        started = time.monotonic()
        await asyncio.wait_for(server.stop(0), 30)
        assert time.monotonic() - started < 8
