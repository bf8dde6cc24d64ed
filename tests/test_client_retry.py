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


def _marked(i: int, marks: list[str]) -> Msg:
    return Msg.create(MsgRole.USER, f"第{i}条", id=f"消息-{i}", metadata={"agentscope_python": {"marks": marks}})


async def test_async_deletes_and_mark_changes_that_are_safe_to_repeat_wait_for_the_server(server_factory,
                                                                                          tmp_path) -> None:
    port, data = free_port(), tmp_path / "data"
    first = await server_factory(port=port, data_dir=data)
    async with AsyncMemoryClient(f"127.0.0.1:{port}", retries=8, timeout=5) as client:
        await client.create_memory("标记")
        await client.add_messages("标记", [_marked(0, []), _marked(1, ["临时"]), _marked(2, ["临时"]), _marked(3, [])])
        await first.stop(0)
        with pytest.raises(UnavailableError):
            # By ids without allow_missing a repeat of a delete that landed would fail NOT_FOUND.
            await client.delete_messages("标记", ["消息-0"])

        async def ride_out(call):
            async def start_later():
                await asyncio.sleep(0.5)
                return await server_factory(port=port, data_dir=data)

            starting = asyncio.create_task(start_later())
            began = time.monotonic()
            answer = await call()
            assert time.monotonic() - began >= 0.4
            await (await starting).stop(0)
            return answer

        updated = await ride_out(lambda: client.update_message_marks("标记", "重要", message_ids=["消息-3"]))
        assert updated.changed_count == 1
        deleted = await ride_out(lambda: client.delete_messages("标记", marks=["临时"]))
        assert deleted.deleted_ids == ["消息-1", "消息-2"]
        deleted = await ride_out(lambda: client.delete_messages("标记", ["消息-0", "没有这条"], allow_missing=True))
        assert deleted.deleted_ids == ["消息-0"]
        await server_factory(port=port, data_dir=data)
        [kept] = await client.get_messages("标记")
        assert (kept.id, kept.metadata["agentscope_python"]["marks"]) == ("消息-3", ["重要"])


def test_blocking_mark_changes_and_deletes_by_mark_wait_for_the_server(tmp_path) -> None:
    port, data = free_port(), tmp_path / "data"
    servers = [ServerThread(make_settings(data, port=port))]
    try:
        with MemoryClient(f"127.0.0.1:{port}", retries=8, timeout=5) as memory:
            memory.create_memory("标记")
            memory.add_messages("标记", [_marked(0, ["旧"]), _marked(1, [])])
            servers.pop().stop()
            starter = threading.Timer(0.5, lambda: servers.append(ServerThread(make_settings(data, port=port))))
            starter.start()
            try:
                assert memory.update_message_marks("标记", None, old_mark="旧").changed_count == 1
            finally:
                starter.join()
            assert [m.metadata["agentscope_python"]["marks"] for m in memory.get_messages("标记")] == [[], []]
    finally:
        for one in servers:
            one.stop()
