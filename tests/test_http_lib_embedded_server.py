"""The embedded HTTP server (uvicorn in the server's loop) and the shared API-key helper."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from agentscope_memory_server.http_server import serve_asgi
from agentscope_memory_server.tenancy import ApiKeys
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentscope_memory.errors import UnauthenticatedError

KEY = "key-for-tenant-a-000000"


def _app(release: asyncio.Event) -> Starlette:
    async def slow(request: Request) -> JSONResponse:
        await release.wait()
        return JSONResponse({"done": "完成"})

    return Starlette(routes=[Route("/slow", slow)])


async def test_stop_lets_a_request_in_flight_finish_then_refuses_connections() -> None:
    release = asyncio.Event()
    server = await serve_asgi(_app(release), "127.0.0.1", 0, name="test")
    assert server.port > 0
    async with httpx.AsyncClient(base_url=server.url) as client:
        in_flight = asyncio.create_task(client.get("/slow"))
        await asyncio.sleep(0.2)
        stopping = asyncio.create_task(server.stop(grace=5))
        await asyncio.sleep(0.2)
        release.set()
        response = await in_flight
        await stopping
    assert response.status_code == 200 and response.json() == {"done": "完成"}
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient(base_url=server.url) as client:
            await client.get("/slow")


async def test_a_taken_port_is_reported() -> None:
    release = asyncio.Event()
    first = await serve_asgi(_app(release), "127.0.0.1", 0, name="first")
    try:
        with pytest.raises(OSError, match="cannot listen"):
            await serve_asgi(_app(release), "127.0.0.1", first.port, name="second")
    finally:
        await first.stop(grace=0)


@pytest.mark.parametrize(
    "headers",
    [{"X-API-Key": KEY}, {"Authorization": f"Token {KEY}"}, {"authorization": f"Bearer {KEY}"}],
)
def test_every_key_header_names_the_tenant(headers: dict[str, str]) -> None:
    assert ApiKeys({KEY: "租户a"}).authenticate(headers) == "租户a"


def test_missing_and_unknown_keys_are_refused_with_the_reason() -> None:
    keys = ApiKeys({KEY: "a"})
    with pytest.raises(UnauthenticatedError, match="missing API key"):
        keys.authenticate({"Authorization": "Basic abc"})
    with pytest.raises(UnauthenticatedError, match="unknown API key"):
        keys.authenticate({"Authorization": "Token wrong-key-000000000"})
    assert ApiKeys({}).authenticate({}) == "default"


async def test_every_http_surface_refuses_a_body_over_the_limit_before_reading_it_all(server_factory) -> None:
    # Before, each surface buffered whatever arrived (a 1 GB body with a wrong key cost the
    # server gigabytes); now a body over grpc_max_receive_bytes is answered 413 as JSON, whether
    # its length was declared or it came chunked, and the server goes on serving.
    limit = 256 * 1024
    server = await server_factory(mem0_rest_port=0, mcp_port=0, inspector_port=0, api_keys={KEY: "tenant-a"},
                                  grpc_max_receive_bytes=limit)
    surfaces = [(server.mem0_rest_port, "/memories", "detail"), (server.mcp_port, "/mcp", "error"),
                (server.inspector_port, "/login", "detail")]

    async def chunked():  # no Content-Length: the limit is found while reading
        yield b'{"messages": "'
        for _ in range(8):
            yield b"x" * (64 * 1024)
        yield b'", "user_id": "alice"}'

    for port, path, key in surfaces:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for body in (b"x" * (limit + 1), chunked()):
                response = await client.post(path, content=body, headers={"X-API-Key": "wrong-key-000000000"})
                assert response.status_code == 413, (path, response.text)
                assert f"larger than {limit} bytes" in response.json()[key], path
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}", timeout=60) as client:
        # A body under the limit still reaches the app whole (here: parsed, then refused on its merits).
        under = await client.post("/search", headers={"X-API-Key": KEY},
                                  json={"query": " " * (limit // 2), "user_id": "alice"})
        assert under.status_code == 400 and under.json()["detail"] == "query: must not be empty", under.text
