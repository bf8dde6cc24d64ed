"""The clients' one retry rule (`client/_retry.py`): safe calls ride out a server that is not
there yet; unsafe ones fail at once with the library's error."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agentscope_memory.client import AsyncMemoryClient, LongTermClient, MemoryClient
from agentscope_memory.errors import UnavailableError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from conftest import ServerThread, free_port, make_settings


async def test_async_reads_and_idempotent_adds_wait_for_the_server(server_factory, tmp_path) -> None:
    port = free_port()
    async with AsyncMemoryClient(f"127.0.0.1:{port}", retries=8, timeout=5) as client:
        with pytest.raises(UnavailableError):
            await client.delete_memory("chat")  # not safe to repeat: one attempt only

        async def start_later():
            await asyncio.sleep(0.5)
            return await server_factory(port=port, data_dir=tmp_path / "data")

        starting = asyncio.create_task(start_later())
        began = time.monotonic()
        await client.create_memory("chat", allow_existing=True)  # retried until the server is up
        assert time.monotonic() - began >= 0.4
        await starting
        assert await client.add_message("chat", Msg.create(MsgRole.USER, "hi")) == 1


def test_blocking_clients_share_the_rule(tmp_path) -> None:
    port = free_port()
    servers: list[ServerThread] = []
    starter = threading.Timer(0.5, lambda: servers.append(ServerThread(make_settings(tmp_path / "data", port=port))))
    with MemoryClient(f"127.0.0.1:{port}", retries=8, timeout=5) as memory, \
            LongTermClient(f"127.0.0.1:{port}", retries=0, timeout=5) as ltm:
        with pytest.raises(UnavailableError):
            ltm.list(Scope(user_id="u"))  # retries=0: the first failure is final
        starter.start()
        try:
            memory.create_memory("chat", allow_existing=True)
            assert memory.get_memory("chat").message_count == 0
        finally:
            starter.join()
            for server in servers:
                server.stop()
