"""A message holding a lone surrogate (text AgentScope keeps: its JSONSession reads with
`surrogatepass`) sent by the gRPC clients: refused with the same InvalidArgumentError, naming
the field, as the local mode refuses it, never a bare UnicodeEncodeError; nothing is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.local import AsyncLocalLongTermClient, AsyncLocalMemoryClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.client.scopes import AsyncLocalScopeClient, AsyncScopeClient
from agentscope_memory.client.sync import MemoryClient
from agentscope_memory.client.auto_context import AsyncAutoContextClient, AsyncLocalAutoContextClient
from agentscope_memory.client.tiered import AsyncLocalTieredClient, AsyncTieredClient
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole, TextBlock
from agentscope_memory.service import ServiceSettings, build_service

SCOPE = Scope(agent_name="助手", user_id="用户")
BAD = {
    "text": Msg.create(MsgRole.USER, "茶\ud83d"),
    "name": Msg(id="m-1", name="小\udc00明", role=MsgRole.USER, content=[TextBlock("你好")], metadata={}),
    "metadata": Msg(id="m-2", name="小明", role=MsgRole.USER, content=[TextBlock("你好")],
                    metadata={"备注": "\ud800"}),
}

Call = Callable[[dict[str, Any], Msg], Awaitable[object]]
CALLS: dict[str, Call] = {
    "add_messages": lambda c, m: c["memory"].add_messages("会话", [Msg.create(MsgRole.USER, "ok"), m]),
    "record": lambda c, m: c["long_term"].record(SCOPE, [m]),
    "retrieve": lambda c, m: c["long_term"].retrieve(SCOPE, m),
    "begin_turn": lambda c, m: c["long_term"].begin_turn("会话", SCOPE, "static_control", [m]),
    "tiered add": lambda c, m: c["tiered"].add("分层", [m]),
    "scoped add_messages": lambda c, m: c["scopes"].add_messages("会话", [m]),
    "auto-context add_messages": lambda c, m: c["auto"].add_messages("自动", [m]),
}


async def _refusal(clients: dict[str, Any], call: Call, msg: Msg) -> InvalidArgumentError:
    with pytest.raises(InvalidArgumentError) as raised:
        await call(clients, msg)
    return raised.value


@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("where", list(BAD))
async def test_a_lone_surrogate_is_refused_naming_the_field_as_in_local_mode(server, tmp_path: Path, call: str,
                                                                            where: str) -> None:
    remote = {"memory": AsyncMemoryClient(server.address, timeout=10),
              "long_term": AsyncLongTermClient(server.address, timeout=10),
              "tiered": AsyncTieredClient(server.address, timeout=10),
              "scopes": AsyncScopeClient(server.address, timeout=10),
              "auto": AsyncAutoContextClient(server.address, timeout=10)}
    async with build_service(ServiceSettings(data_dir=tmp_path / "local")) as service:
        local = {"memory": AsyncLocalMemoryClient(service), "long_term": AsyncLocalLongTermClient(service),
                 "tiered": AsyncLocalTieredClient(service), "scopes": AsyncLocalScopeClient(service),
                 "auto": AsyncLocalAutoContextClient(service)}
        for clients in (remote, local):
            await clients["memory"].create_memory("会话")
            await clients["tiered"].create_memory("分层")
            await clients["auto"].create_memory("自动")
        refused = await _refusal(remote, CALLS[call], BAD[where])
        expected = await _refusal(local, CALLS[call], BAD[where])
    assert (refused.field, refused.reason) == (expected.field, expected.reason)
    assert "surrogate" in refused.reason
    assert await remote["memory"].get_messages("会话") == []
    assert await remote["long_term"].list(SCOPE) == []
    for client in remote.values():
        await client.close()


async def test_a_projections_shared_context_with_one_is_refused_naming_it(server) -> None:
    # The local mode projects such a message as it is (it is never stored); it cannot be sent.
    async with AsyncTieredClient(server.address, timeout=10) as client:
        await client.create_memory("分层")
        with pytest.raises(InvalidArgumentError) as raised:
            await client.project("分层", "概括", shared_context=[Msg.create(MsgRole.USER, "ok"), BAD["text"]])
    assert raised.value.field == "shared_context[1].content[0].text.text"


def test_the_blocking_client_refuses_it_too(threaded_server) -> None:
    with MemoryClient(threaded_server.address, timeout=10) as client:
        client.create_memory("会话")
        with pytest.raises(InvalidArgumentError) as raised:
            client.add_message("会话", BAD["text"])
        assert raised.value.field == "messages[0].content[0].text.text"
        assert client.get_messages("会话") == []


# An id (or any other text argument) holding a lone surrogate: every remote client, asyncio and
# blocking, raises the local mode's InvalidArgumentError naming it, wherever its request is built
# (a coroutine, an async or plain generator, a watch), never protobuf's UnicodeEncodeError.
BAD_ID = "会话\ud800"


async def _drain(items: Any) -> list[Any]:
    return [item async for item in items]


ID_CALLS: dict[str, Call] = {
    "get_memory": lambda c, _: c["memory"].get_memory(BAD_ID),
    "create_memory": lambda c, _: c["memory"].create_memory(BAD_ID),
    "get_messages": lambda c, _: c["memory"].get_messages(BAD_ID),
    "iter_messages": lambda c, _: _drain(c["memory"].iter_messages(BAD_ID)),
    "add_messages request_id": lambda c, _: c["memory"].add_messages(
        "会话", [Msg.create(MsgRole.USER, "好")], request_id=BAD_ID),
    "long-term get": lambda c, _: c["long_term"].get(BAD_ID),
    "long-term list": lambda c, _: c["long_term"].list(Scope(agent_name="助手", user_id=BAD_ID)),
    "long-term history": lambda c, _: c["long_term"].history(BAD_ID),
    "long-term history_page": lambda c, _: c["long_term"].history_page(BAD_ID),
    "long-term update": lambda c, _: c["long_term"].update(BAD_ID, "新的"),
    "long-term delete": lambda c, _: c["long_term"].delete(BAD_ID),
    "long-term search": lambda c, _: c["long_term"].search(Scope(agent_name=BAD_ID), "茶"),
    "lineage": lambda c, _: c["scopes"].lineage(BAD_ID),
    "iter_children": lambda c, _: _drain(c["scopes"].iter_children(BAD_ID)),
    "set_parent": lambda c, _: c["scopes"].set_parent("会话", BAD_ID),
    "tiered create_memory": lambda c, _: c["tiered"].create_memory(BAD_ID),
    "auto-context create_memory": lambda c, _: c["auto"].create_memory(BAD_ID),
    "auto-context get_events": lambda c, _: c["auto"].get_events(BAD_ID),
    "auto-context iter_original_messages": lambda c, _: _drain(c["auto"].iter_original_messages(BAD_ID)),
    "reload_context uuid": lambda c, _: c["auto"].reload_context("会话", BAD_ID),
}


@pytest.mark.parametrize("call", list(ID_CALLS))
async def test_an_id_with_a_lone_surrogate_is_refused_naming_it_as_in_local_mode(server, tmp_path: Path,
                                                                                 call: str) -> None:
    remote = {"memory": AsyncMemoryClient(server.address, timeout=10),
              "long_term": AsyncLongTermClient(server.address, timeout=10),
              "tiered": AsyncTieredClient(server.address, timeout=10),
              "scopes": AsyncScopeClient(server.address, timeout=10),
              "auto": AsyncAutoContextClient(server.address, timeout=10)}
    async with build_service(ServiceSettings(data_dir=tmp_path / "local")) as service:
        local = {"memory": AsyncLocalMemoryClient(service), "long_term": AsyncLocalLongTermClient(service),
                 "tiered": AsyncLocalTieredClient(service), "scopes": AsyncLocalScopeClient(service),
                 "auto": AsyncLocalAutoContextClient(service)}
        for clients in (remote, local):
            await clients["memory"].create_memory("会话")
        refused = await _refusal(remote, ID_CALLS[call], BAD["text"])
        expected = await _refusal(local, ID_CALLS[call], BAD["text"])
    assert (refused.field, refused.reason) == (expected.field, expected.reason)
    # A request id's own rule (printable ASCII) is what both say of one.
    assert "surrogate" in refused.reason or refused.field == "request_id"
    assert await remote["memory"].get_messages("会话") == []
    for client in remote.values():
        await client.close()


async def test_a_watch_and_the_blocking_clients_refuse_an_id_with_a_lone_surrogate_naming_it(server) -> None:
    from agentscope_memory.client import AgentStateClient, AsyncPoolClient
    from agentscope_memory.agent_state import Slot

    async with AsyncPoolClient(server.address, timeout=10) as pools:
        with pytest.raises(InvalidArgumentError) as raised:
            await anext(aiter(pools.watch(BAD_ID)))
        assert raised.value.field == "pool_id" and "lone surrogate" in raised.value.reason

    def blocking() -> list[InvalidArgumentError]:
        refusals = []
        with MemoryClient(server.address, timeout=10) as client:
            for call in (lambda: client.get_memory(BAD_ID), lambda: list(client.iter_messages(BAD_ID))):
                with pytest.raises(InvalidArgumentError) as raised:
                    call()
                refusals.append(raised.value)
        state = AgentStateClient(server.address, timeout=10)
        try:
            with pytest.raises(InvalidArgumentError) as raised:
                state.get_value(Slot("用户", BAD_ID), "键")
            refusals.append(raised.value)
        finally:
            state.close()
        return refusals

    import asyncio
    refusals = await asyncio.to_thread(blocking)
    assert [r.field for r in refusals] == ["memory_id", "memory_id", "slot.session_id"]
    assert all("lone surrogate" in r.reason for r in refusals)
