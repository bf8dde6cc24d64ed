"""A dead network path to PostgreSQL (packets dropped, nothing refused): connection attempts give
up after `connect_timeout` and pooled connections are probed by TCP keepalive, unless the DSN
says otherwise, so a server uses its database again soon after the path is back."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import threading
import time
from typing import Any, Iterator

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import UnavailableError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store.postgres import PostgresStore


def _socket_options(store: PostgresStore) -> dict[str, int | str]:
    with store._pool.connection() as conn:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
        try:
            return {
                "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                "interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                "user_timeout": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
                "connect_timeout": conn.info.get_parameters().get("connect_timeout", ""),
            }
        finally:
            sock.close()


async def test_connections_have_timeouts_and_keepalives_and_the_dsns_own_values_win(postgres_dsn) -> None:
    store = PostgresStore(postgres_dsn)
    try:
        # Without them the kernel probes an idle connection after two hours (7200 s).
        assert _socket_options(store) == {"keepalive": 1, "idle": 30, "interval": 10, "count": 3,
                                          "user_timeout": 60000, "connect_timeout": "10"}
    finally:
        await store.close()
    store = PostgresStore(postgres_dsn + "?connect_timeout=3&keepalives_idle=7&tcp_user_timeout=0")
    try:
        assert _socket_options(store) == {"keepalive": 1, "idle": 7, "interval": 10, "count": 3,
                                          "user_timeout": 0, "connect_timeout": "3"}
    finally:
        await store.close()


class _BlackHoleProxy:
    """127.0.0.1 forwarding to PostgreSQL, until `cut`: then every forwarded connection is
    closed and new ones are accepted and never answered nor closed (a path that drops packets),
    until `restore`."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._cut = False
        self._forwarded: list[socket.socket] = []
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    self._held.append(client)
                    continue
                upstream = socket.create_connection(("127.0.0.1", self._upstream))
                self._forwarded += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for sock in self._forwarded:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            self._forwarded.clear()

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._held + self._forwarded:
                sock.close()


@pytest.fixture
def proxy(postgres: Any) -> Iterator[_BlackHoleProxy]:
    hole = _BlackHoleProxy(postgres.port)
    yield hole
    hole.close()


@pytest.mark.slow
async def test_the_server_uses_its_database_soon_after_a_dead_path_is_back(server_factory, postgres_dsn,
                                                                           proxy) -> None:
    dsn = postgres_dsn.replace(postgres_dsn.split("@")[1].split("/")[0], f"127.0.0.1:{proxy.port}")
    server = await server_factory(store="postgres", postgres_dsn=dsn)
    memory = AsyncMemoryClient(server.address, retries=0, timeout=30)
    try:
        await memory.create_memory("黑洞")
        await memory.add_message("黑洞", Msg.create(MsgRole.USER, "before"))

        proxy.cut()
        started = time.monotonic()
        with pytest.raises(UnavailableError, match="PostgreSQL is unavailable"):
            await memory.add_message("黑洞", Msg.create(MsgRole.USER, "lost"))
        assert time.monotonic() - started < 20

        # The attempts begun while the path was dead must give up (connect_timeout), not hang
        # for psycopg's 130 s while the database is reachable again.
        proxy.restore()
        restored = time.monotonic()
        while True:
            try:
                assert await memory.add_message("黑洞", Msg.create(MsgRole.USER, "after")) == 2
                break
            except UnavailableError:
                assert time.monotonic() - restored < 40, "the database is back but the server does not use it"
                await asyncio.sleep(1)
        assert [m.text_content for m in await memory.get_messages("黑洞")] == ["before", "after"]
    finally:
        await memory.close()


@pytest.mark.slow
def test_a_server_whose_database_is_behind_a_dead_path_says_so_and_exits(tmp_path, proxy) -> None:
    from conftest import VENV_BIN

    proxy.cut()
    started = time.monotonic()
    done = subprocess.run([str(VENV_BIN / "agentscope-memory"), "serve", "--port", "0", "--data-dir", str(tmp_path),
                           "--store", "postgres", "--postgres-dsn", f"postgresql://postgres@127.0.0.1:{proxy.port}/x"],
                          capture_output=True, text=True, timeout=120)
    # Its 30 s wait for a database started with it, then the start-up line.
    assert done.returncode == 1 and time.monotonic() - started < 60
    lines = [line for line in done.stderr.splitlines() if line.startswith("agentscope-memory")]
    assert lines == ["agentscope-memory: PostgreSQL is unavailable: no database connection within 10 s (PostgreSQL is"
                     " unreachable, or every connection is busy); retry later"], done.stderr
    assert "Traceback" not in done.stderr
