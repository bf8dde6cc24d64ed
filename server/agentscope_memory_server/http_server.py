"""Serves an ASGI app (the mem0 REST facade, MCP) on its own port inside the server's asyncio
loop, beside grpc.aio: one process, one loop, the same `Service`.

uvicorn runs programmatically. The gRPC server owns the process's signals, so uvicorn's own
signal capture is switched off; `HttpServer.stop` is called from `RunningServer.stop` and lets
requests in flight finish within the grace period before closing their connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass
from typing import Any, Iterator

import uvicorn

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
        self._server.config.timeout_graceful_shutdown = grace
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace + 5.0)
        except asyncio.TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        finally:
            self._socket.close()
        log.info("http stopped", extra={"fields": {"name": self.name}})


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc}") from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_asgi(app: Any, host: str, port: int, *, name: str, grace: float = 10.0) -> HttpServer:
    """Start serving `app` on host:port (0 picks a free port) and return once it accepts
    connections. The app's lifespan (if any) has run its startup by then."""
    sock = _bind(host, port)
    config = uvicorn.Config(
        app,
        lifespan="auto",
        log_config=None,  # the server's structured logging stays in charge
        access_log=False,
        timeout_graceful_shutdown=grace,
        server_header=False,
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
