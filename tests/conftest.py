"""Shared fixtures: real servers on ephemeral ports, in-process or in a thread or a process."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, NoReturn

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory_server.app import RunningServer, start_server
from agentscope_memory_server.config import Settings

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
# Set by .ci/run: a test whose outside dependency (PostgreSQL, openssl, grpcurl) is missing
# fails instead of being skipped, so a broken install step cannot leave CI green.
REQUIRE_DEPENDENCIES = os.environ.get("ASM_TEST_REQUIRE_DEPENDENCIES") == "1"


@contextmanager
def small_tmpfs(size: str, prefix: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. "3m") mounted for a test that fills a disk; skipped where this
    process may not mount (not root, or a container without the right)."""
    if os.geteuid() != 0:
        pytest.skip("mounting the test's small tmpfs needs root")
    mount = Path(tempfile.mkdtemp(prefix=prefix))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        mount.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)
        mount.rmdir()


@contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """`paths` made immutable (`chattr +i`) for a test of a store that cannot be written: root
    ignores file modes, not this. Skipped where it cannot be set (not root, a file system
    without the attribute)."""
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True)
    try:
        if done.returncode != 0:
            pytest.skip(f"cannot make files immutable here: {done.stderr.decode().strip()}")
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)


def missing_dependency(reason: str) -> NoReturn:
    """Skip the test for want of an outside dependency, or fail it where all are required."""
    if REQUIRE_DEPENDENCIES:
        pytest.fail(f"{reason} (ASM_TEST_REQUIRE_DEPENDENCIES=1: every test dependency must be installed)")
    pytest.skip(reason)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # `@pytest.mark.needs(available, reason)`: a test (or module) that needs something outside
    # Python, decided by `missing_dependency`.
    for mark in item.iter_markers("needs"):
        available, reason = mark.args
        if not available:
            missing_dependency(reason)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's own AGENTSCOPE_MEMORY_* or OpenAI settings must not leak into tests.
    for name in list(os.environ):
        if name.startswith("AGENTSCOPE_MEMORY_") or name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENROUTER_API_KEY"):
            monkeypatch.delenv(name, raising=False)


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "data_dir": data_dir,
        "log_format": "text",
        "shutdown_grace_s": 2.0,
        # Tests that need long-term memory load it on first use; the rest never pay for it.
        "long_term_preload": False,
    }
    values.update(overrides)
    return Settings(**values)


ServerFactory = Callable[..., Awaitable[RunningServer]]


@pytest.fixture
async def server_factory(tmp_path: Path) -> AsyncIterator[ServerFactory]:
    """`await server_factory(**settings)`: a real server in this event loop, stopped afterwards."""
    servers: list[RunningServer] = []

    async def factory(**overrides: Any) -> RunningServer:
        overrides.setdefault("data_dir", tmp_path / f"data-{len(servers)}")
        running = await start_server(make_settings(**overrides))
        servers.append(running)
        return running

    yield factory
    for running in servers:
        await running.stop(0)


@pytest.fixture
async def server(server_factory: ServerFactory) -> RunningServer:
    return await server_factory()


@pytest.fixture
async def aclient(server: RunningServer) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(server.address, timeout=10) as client:
        yield client


async def _finish_tasks() -> None:
    """Let what the server's stop cancelled (streams still open) finish before the loop closes."""
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


class ServerThread:
    """A real server running its own event loop in a thread, for blocking clients and tools."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.running: RunningServer = asyncio.run_coroutine_threadsafe(
            start_server(settings), self._loop
        ).result(30)

    @property
    def address(self) -> str:
        return self.running.address

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.running.stop(0), self._loop).result(30)
        asyncio.run_coroutine_threadsafe(_finish_tasks(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def threaded_server(tmp_path: Path) -> Iterator[ServerThread]:
    server = ServerThread(make_settings(tmp_path / "data"))
    yield server
    server.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """`agentscope-memory serve` as a separate process (for kill -9 and signal tests)."""

    def __init__(self, data_dir: Path, port: int | None = None, *extra: str) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log_path = data_dir.parent / f"server-{self.port}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSCOPE_MEMORY_")}
        self.proc = subprocess.Popen(
            [str(VENV_BIN / "agentscope-memory"), "serve", "--port", str(self.port),
             "--data-dir", str(data_dir), "--log-format", "text", *extra],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
        )
        self.wait_ready()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited: {self.log_path.read_text()}")
                try:
                    if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == 1:
                        return
                except grpc.RpcError:
                    time.sleep(0.1)
        raise TimeoutError(f"server not ready: {self.log_path.read_text()}")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def terminate(self, timeout: float = 20.0) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self._log.close()


def private_postgres() -> Iterator[Any]:
    """A PostgreSQL server of the caller's own, stopped when the caller is done (see
    `missing_dependency` where none is installed)."""
    from postgres_server import PostgresServer

    try:
        server = PostgresServer()
    except FileNotFoundError as exc:
        missing_dependency(str(exc))
    yield server
    server.stop()


@pytest.fixture
def receiver() -> Iterator[Any]:
    """A real OTLP/HTTP trace receiver (`tests/otlp_receiver.py`), started; `.endpoint` is the
    server's `otlp_endpoint`."""
    from otlp_receiver import OtlpReceiver

    running = OtlpReceiver()
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Any]:
    """A private PostgreSQL server for the whole test session."""
    yield from private_postgres()


@pytest.fixture
def postgres_dsn(postgres: Any) -> str:
    """A fresh database per test."""
    import uuid

    return postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
