"""A Python client loop rides out kill -9 and a restart of the server within the call's deadline:
the next turn succeeds with no action by the caller, and nothing is stored twice."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.message import Msg, MsgRole
from conftest import ServerProcess, free_port


def _start(data: Path, port: int, config: Path) -> ServerProcess:
    return ServerProcess(data, port, "--config", str(config))


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "server.toml"
    config.write_text("long_term_enabled = false\n")
    return config


@pytest.mark.slow
async def test_an_async_client_loop_rides_out_kill_and_restart(tmp_path: Path) -> None:
    port, data, config = free_port(), tmp_path / "data", _config(tmp_path)
    server = _start(data, port, config)
    restarted: ServerProcess | None = None
    try:
        async with AsyncMemoryClient(f"127.0.0.1:{port}", timeout=30) as client:
            await client.create_memory("loop", allow_existing=True)
            said: list[str] = []
            for turn in range(3):
                said.append(f"turn {turn} 第{turn}轮")
                await client.add_message("loop", Msg.create(MsgRole.USER, said[-1]))
                assert [m.text_content for m in await client.get_messages("loop")] == said

            server.kill()
            killed = time.monotonic()
            # The operator restarts the server at once; the caller just goes on with its loop.
            back_at: list[float] = []

            def restart() -> ServerProcess:
                started = _start(data, port, config)
                back_at.append(time.monotonic())
                return started

            restarting = asyncio.create_task(asyncio.to_thread(restart))
            said.append("after the crash 崩溃之后")
            await client.add_message("loop", Msg.create(MsgRole.USER, said[-1]))
            done = time.monotonic()
            restarted = await restarting
            assert [m.text_content for m in await client.get_messages("loop")] == said
            print(f"ride-through: next turn done {done - killed:.2f} s after kill -9; the server was up after "
                  f"{back_at[0] - killed:.2f} s, the turn {done - back_at[0]:.2f} s after that")
    finally:
        server.close()
        if restarted is not None:
            restarted.close()


@pytest.mark.slow
def test_a_blocking_client_rides_out_kill_and_restart(tmp_path: Path) -> None:
    port, data, config = free_port(), tmp_path / "data", _config(tmp_path)
    server = _start(data, port, config)
    restarted: list[ServerProcess] = []
    try:
        with MemoryClient(f"127.0.0.1:{port}", timeout=30) as client:
            client.create_memory("loop", allow_existing=True)
            client.add_message("loop", Msg.create(MsgRole.USER, "before"))
            server.kill()
            starter = threading.Thread(target=lambda: restarted.append(_start(data, port, config)))
            starter.start()
            try:
                assert [m.text_content for m in client.get_messages("loop")] == ["before"]
                client.add_message("loop", Msg.create(MsgRole.USER, "after"))
            finally:
                starter.join()
            assert [m.text_content for m in client.get_messages("loop")] == ["before", "after"]
    finally:
        server.close()
        for one in restarted:
            one.close()
