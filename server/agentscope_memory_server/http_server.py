"""Serves an ASGI app (the mem0 REST facade, MCP) on its own port inside the server's asyncio
loop, beside grpc.aio: one process, one loop, the same `Service`.

uvicorn runs programmatically. The gRPC server owns the process's signals, so uvicorn's own
signal capture is switched off; `HttpServer.stop` is called from `RunningServer.stop` and lets
requests in flight finish within the grace period before closing their connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from agentscope_memory_server.http_guard import guarded_protocol

log = logging.getLogger("agentscope_memory_server.http")


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its host (the gRPC server's loop)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class HttpServer:
    """A started HTTP server. `port` is the bound port (useful when 0 was asked for)."""

    name: str
    host: str
    port: int
    _server: _EmbeddedServer
    _task: asyncio.Task[None]
    _socket: socket.socket

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def stop(self, grace: float = 10.0) -> None:
        """Stop accepting, give requests in flight up to `grace` seconds, then close."""
        if self._task.done():
            return
        self._server.config.timeout_graceful_shutdown = _whole_seconds(grace)
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace + 5.0)
        except TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        finally:
            self._socket.close()
        log.info("http stopped", extra={"fields": {"name": self.name}})


class BodyLimit:
    """ASGI middleware: a request body larger than `limit` bytes is answered 413 with a JSON
    error (`error_key`: message) before the app sees it, whatever the route, key or content
    type; the app gets the body as one buffered message, so memory per request is bounded.

    Without it every HTTP surface read whatever arrived into memory before authenticating or
    validating (a 1 GB body with a wrong key cost the server gigabytes)."""

    def __init__(self, app: Any, limit: int, error_key: str = "detail") -> None:
        self.app = app
        self.limit = limit
        self.error_key = error_key

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = next((v for k, v in scope.get("headers", []) if k.lower() == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(receive, send, more=True)
            return
        chunks: list[bytes] = []
        size = 0
        pending: list[dict[str, Any]] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)  # the client left; the app finds out as usual
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = bool(message.get("more_body", False))
            if size > self.limit:
                await self._refuse(receive, send, more=more)
                return
            if not more:
                pending.append({"type": "http.request", "body": b"".join(chunks), "more_body": False})
                break

        async def replay() -> Any:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, receive: Any, send: Any, *, more: bool) -> None:
        # Read (and drop) the rest, so the client is not cut off mid-send and gets the answer.
        while more:
            message = await receive()
            more = message["type"] == "http.request" and bool(message.get("more_body", False))
        detail = f"request body: is larger than {self.limit} bytes, the limit (grpc_max_receive_bytes)"
        data = json.dumps({self.error_key: detail}).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})


def _whole_seconds(grace: float) -> int:
    # uvicorn takes whole seconds and reads 0 as "already late" (logging an error); requests
    # in flight are all it waits for, so an idle server still stops at once.
    return max(1, math.ceil(grace))


def _bind(host: str, port: int, setting: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        # The setting that asked for the port, so an operator knows which one to change.
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        owner = f" ({setting})" if setting else ""
        raise OSError(f"cannot listen on {where}{owner}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_asgi(app: Any, host: str, port: int, *, name: str, grace: float = 10.0,
                     max_body_bytes: int | None = None, error_key: str = "detail", setting: str = "",
                     tls: tuple[Path, Path] | None = None, max_connections: int = 512) -> HttpServer:
    """Start serving `app` on host:port (0 picks a free port) and return once it accepts
    connections. The app's lifespan (if any) has run its startup by then. With
    `max_body_bytes`, larger request bodies get 413 (`{error_key: message}`). `setting`: the
    setting that chose the port, named when it cannot be bound. `tls`: (certificate chain,
    private key) PEM files, to speak HTTPS only, as gRPC does with them. `max_connections`:
    open connections beyond it are answered 503 and closed (`http_guard`)."""
    sock = _bind(host, port, setting)
    if max_body_bytes is not None:
        app = BodyLimit(app, max_body_bytes, error_key)
    config = uvicorn.Config(
        app,
        lifespan="auto",
        log_config=None,  # the server's structured logging stays in charge
        access_log=False,
        timeout_graceful_shutdown=_whole_seconds(grace),
        server_header=False,
        # h11 always (httptools, if installed, would bypass the guard): a request head must
        # arrive within a time limit, and open connections are limited.
        http=guarded_protocol(max_connections),
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )
    server = _EmbeddedServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"http:{name}")
    while not server.started:
        if task.done():
            sock.close()
            # A failed startup (e.g. the app's lifespan raised) ends the task; say why.
            exc = task.exception() if not task.cancelled() else None
            raise RuntimeError(f"{name} HTTP server failed to start") from exc
        await asyncio.sleep(0.01)
    bound = sock.getsockname()[1]
    log.info("http listening", extra={"fields": {"name": name, "address": f"{host}:{bound}"}})
    return HttpServer(name, host, bound, server, task, sock)
