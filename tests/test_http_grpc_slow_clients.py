"""Slow and greedy HTTP clients: a connection that never completes its request head (sends
nothing, or trickles its headers a byte at a time) is closed after a while, other clients are
served meanwhile, and a surface with `http_max_connections` open answers the next one 503."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agentscope_memory_server import http_guard

TIMEOUT_S = 1.0


@pytest.fixture(autouse=True)
def _short_header_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real 10 s would make the test wait 10 s; what is checked does not depend on it.
    monkeypatch.setattr(http_guard, "HEADER_TIMEOUT_S", TIMEOUT_S)


async def _closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    try:
        while await asyncio.wait_for(reader.read(4096), within):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


async def test_a_client_trickling_its_headers_is_cut_off_while_others_are_served(server_factory) -> None:
    server = await server_factory(mem0_rest_port=0, long_term_enabled=False)
    port = server.mem0_rest_port
    loop = asyncio.get_running_loop()
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /v1/ping/ HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
    started = loop.time()
    cut_off = False
    async with httpx.AsyncClient(timeout=5) as http:
        while loop.time() - started < TIMEOUT_S * 4:
            try:
                writer.write(b"a")  # a byte every 100 ms: never a whole head
                await writer.drain()
            except ConnectionError:
                cut_off = True
                break
            answer = await http.get(f"http://127.0.0.1:{port}/v1/ping/")
            assert answer.status_code == 200, answer.text
            try:
                if await asyncio.wait_for(reader.read(4096), 0.1) == b"":
                    cut_off = True
                    break
            except TimeoutError:
                pass
            except ConnectionError:
                cut_off = True
                break
    assert cut_off, "a connection trickling its headers was held open"
    assert loop.time() - started >= TIMEOUT_S * 0.9
    # The one that sent nothing at all is closed too.
    assert await _closed_by_server(idle_reader, TIMEOUT_S * 2)
    writer.close()
    idle_writer.close()
    # A client that keeps its connection alive between requests is not cut off while it asks.
    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(3):
            assert (await http.get(f"http://127.0.0.1:{port}/v1/ping/")).status_code == 200
            await asyncio.sleep(TIMEOUT_S / 2)


async def test_connections_beyond_the_limit_are_answered_503(server_factory) -> None:
    server = await server_factory(metrics_port=0, http_max_connections=2)
    port = server.metrics_port
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = await asyncio.wait_for(reader.read(4096), 5)
    assert answer.startswith(b"HTTP/1.1 503 ") and b"too many open connections" in answer
    assert await _closed_by_server(reader, 5)
    writer.close()
    # Once the idle ones are cut off, there is room again.
    for idle_reader, idle_writer in held:
        assert await _closed_by_server(idle_reader, TIMEOUT_S * 3)
        idle_writer.close()
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.get(f"http://127.0.0.1:{port}/metrics")).status_code == 200
