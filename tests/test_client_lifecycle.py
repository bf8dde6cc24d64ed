"""A client's life: an asyncio client built before the event loop opens its channel in the loop
of its first call (as AgentScope applications build agents before `asyncio.run`), and every call
on a closed client, in every mode, raises `FailedPreconditionError` saying the client is closed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agentscope_memory.client import AsyncLongTermClient, AsyncMemoryClient, AsyncPoolClient, LongTermClient, MemoryClient
from agentscope_memory.client.scopes import AsyncScopeClient
from agentscope_memory.errors import FailedPreconditionError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings


def _async_client(mode: str, address: str, data: Path) -> Any:
    if mode == "remote":
        return AsyncMemoryClient(address)
    if mode == "given-channel":
        import grpc

        return AsyncMemoryClient(channel=grpc.aio.insecure_channel(address))
    return AsyncMemoryClient.local(ServiceSettings(data_dir=data))


@pytest.mark.parametrize("mode", ["remote", "given-channel", "local"])
def test_every_call_on_a_closed_asyncio_client_raises_failed_precondition(threaded_server, tmp_path, mode) -> None:
    async def use() -> None:
        client = _async_client(mode, threaded_server.address, tmp_path / "local")
        await client.create_memory("会话")
        await client.close()
        await client.close()  # closing again is harmless
        for call in (client.get_memory("会话"), client.add_messages("会话", [Msg.create(MsgRole.USER, "你好")]),
                     client.read_messages("会话")):
            with pytest.raises(FailedPreconditionError, match="client is closed"):
                await call
        with pytest.raises(FailedPreconditionError, match="client is closed"):
            [m async for m in client.list_memories()]

    asyncio.run(use())


@pytest.mark.parametrize("mode", ["remote", "local"])
def test_every_call_on_a_closed_blocking_client_raises_failed_precondition(threaded_server, tmp_path, mode) -> None:
    client = MemoryClient(threaded_server.address) if mode == "remote" else MemoryClient.local(
        ServiceSettings(data_dir=tmp_path / "local"))
    client.create_memory("会话")
    client.close()
    client.close()
    for call in (lambda: client.get_memory("会话"), lambda: client.read_messages("会话"),
                 lambda: list(client.list_memories())):
        with pytest.raises(FailedPreconditionError, match="client is closed"):
            call()
    long_term = LongTermClient(threaded_server.address) if mode == "remote" else LongTermClient.local(
        ServiceSettings(data_dir=tmp_path / "local-ltm"))
    long_term.close()
    with pytest.raises(FailedPreconditionError, match="client is closed"):
        long_term.list(Scope("代理", "用户"))


def test_a_closed_scope_client_refuses_its_message_reads_too(threaded_server) -> None:
    async def use() -> None:
        client = AsyncScopeClient(threaded_server.address)
        await client.close()
        with pytest.raises(FailedPreconditionError, match="client is closed"):
            await client._messages.get_messages("会话")  # the inner client on the scope client's channel

    asyncio.run(use())


def test_an_asyncio_client_built_before_the_loop_works_in_asyncio_run(threaded_server) -> None:
    """Built outside any loop, a client's channel belonged to no loop it was used in: the first
    call inside `asyncio.run` failed. Now it opens in the loop of its first call; a later
    `asyncio.run` (the first loop is closed by then) opens a new one."""
    memory = AsyncMemoryClient(threaded_server.address)
    pools = AsyncPoolClient(threaded_server.address)
    long_term = AsyncLongTermClient(threaded_server.address)

    async def first() -> None:
        await memory.create_memory("会话")
        await memory.add_messages("会话", [Msg.create(MsgRole.USER, "我住在北京")])
        assert await pools.list_entries("团队") == []
        assert await long_term.list(Scope("代理", "用户")) == []

    async def second() -> list[str]:
        try:
            return [m.text_content for m in await memory.get_messages("会话")]
        finally:
            await memory.close()

    async def close_the_others() -> None:  # their channels are of the first, closed loop
        await pools.close()
        await long_term.close()

    asyncio.run(first())
    assert asyncio.run(second()) == ["我住在北京"]
    asyncio.run(close_the_others())
    with pytest.raises(FailedPreconditionError, match="client is closed"):
        asyncio.run(pools.list_entries("团队"))


def test_an_asyncio_client_used_from_two_live_loops_says_so(threaded_server) -> None:
    client = AsyncMemoryClient(threaded_server.address)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(client.create_memory("会话"))

        async def elsewhere() -> None:
            with pytest.raises(FailedPreconditionError, match="another event loop"):
                await client.get_memory("会话")

        asyncio.run(elsewhere())
        assert loop.run_until_complete(client.get_memory("会话")).memory_id == "会话"  # its own loop still works
        loop.run_until_complete(client.close())
    finally:
        loop.close()


def test_a_local_client_built_before_the_loop_works_in_it_and_names_a_second_loop(tmp_path) -> None:
    """Local mode: built outside any loop, the client starts its service in the loop of its
    first call; a call from a later loop raised `RuntimeError: Event loop is closed` from deep
    in the store, and now says what is wrong."""
    client = AsyncMemoryClient.local(ServiceSettings(data_dir=tmp_path / "local"))

    async def first() -> int:
        await client.create_memory("会话")
        return await client.add_messages("会话", [Msg.create(MsgRole.USER, "你好")])

    async def second() -> None:
        with pytest.raises(FailedPreconditionError, match="event loop of its first call"):
            await client.get_messages("会话")

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(first()) == 1
        asyncio.run(second())
        loop.run_until_complete(client.close())
    finally:
        loop.close()
