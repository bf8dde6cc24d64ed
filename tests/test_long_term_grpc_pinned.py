"""Pinning long-term memories through the Python clients (remote asyncio and blocking over real
gRPC, and local mode): record pinned, pin and unpin by update, an update that does not name the
pin keeps it, the history says each change; and the web inspector marks a pinned memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import httpx
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncLongTermClient, LongTermClient, _requests
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings

SCOPE = Scope(agent_name="助手", user_id="用户-钉")


def _pins(history: list) -> list[dict]:
    return [h.detail["pinned"] for h in history if h.event == "UPDATE" and "pinned" in h.detail]


async def _exercise(ltm) -> None:
    [pinned] = await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "我对青霉素过敏，请永远记住。")], pinned=True)
    [plain] = await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "今天天气不错。")])
    assert (pinned.pinned, plain.pinned) == (True, False)
    assert {i.id: i.pinned for i in await ltm.list(SCOPE)} == {pinned.id: True, plain.id: False}
    # An update that does not name the pin keeps it.
    kept = await ltm.update(pinned.id, metadata={"类别": "健康"})
    assert kept.pinned and kept.metadata["类别"] == "健康"
    assert (await ltm.update(pinned.id, pinned=False)).pinned is False
    assert (await ltm.get(pinned.id)).pinned is False
    assert (await ltm.update(plain.id, pinned=True)).pinned is True
    assert (await ltm.get(plain.id)).pinned is True
    assert _pins(await ltm.history(pinned.id)) == [{"old": True, "new": False}]
    assert _pins(await ltm.history(plain.id)) == [{"old": False, "new": True}]
    found = await ltm.search(SCOPE, "天气")
    assert {i.id: i.pinned for i in found}[plain.id] is True
    with pytest.raises(InvalidArgumentError) as refused:
        await ltm.update(pinned.id)
    assert refused.value.field == "text" and "pinned" in str(refused.value)


async def test_remote_async_client(server) -> None:
    async with AsyncLongTermClient(server.address) as ltm:
        await _exercise(ltm)


async def test_local_mode(tmp_path: Path) -> None:
    async with AsyncLongTermClient.local(ServiceSettings(data_dir=tmp_path)) as ltm:
        await _exercise(ltm)


async def test_blocking_client(server) -> None:
    def run() -> None:
        with LongTermClient(server.address) as ltm:
            [item] = ltm.record(SCOPE, [Msg.create(MsgRole.USER, "My blood type is O negative.")], pinned=True)
            assert item.pinned and ltm.get(item.id).pinned
            assert ltm.update(item.id, pinned=False).pinned is False
            assert ltm.update(item.id, importance=0.8).pinned is False
            assert ltm.update(item.id, pinned=True).pinned is True
            assert _pins(ltm.history(item.id)) == [{"old": True, "new": False}, {"old": False, "new": True}]

    await asyncio.to_thread(run)


async def test_the_wire_pin_is_optional_on_update(server) -> None:
    # A client that predates pinning sends no `pinned`: its updates leave a pin alone.
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.LongTermMemoryServiceStub(channel)
        request = _requests.record(Scope(agent_name="助手", user_id="旧客户端"),
                                   [Msg.create(MsgRole.USER, "紧急联系人是妈妈。")], None, pinned=True)
        recorded = await stub.Record(request)
        [item] = recorded.memories
        assert item.pinned
        changed = await stub.UpdateLongTermMemory(pb.UpdateLongTermMemoryRequest(id=item.id, importance=0.7))
        assert changed.memory.pinned
        unpinned = await stub.UpdateLongTermMemory(pb.UpdateLongTermMemoryRequest(id=item.id, pinned=False))
        assert not unpinned.memory.pinned
        got = await stub.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=item.id))
        assert not got.memory.pinned


async def test_record_pinned_pins_a_text_the_scope_holds_already(server) -> None:
    # A user says "remember this for ever" about what the service already knows: Record pins
    # that memory, answers with it among what it changed, and its history says so.
    scope = Scope(agent_name="助手", user_id="用户-再钉")
    allergy = "我对青霉素过敏，请永远记住。"
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.LongTermMemoryServiceStub(channel)
        [held] = (await stub.Record(_requests.record(scope, [Msg.create(MsgRole.USER, allergy)], None))).memories
        assert not held.pinned
        again = await stub.Record(_requests.record(scope, [Msg.create(MsgRole.USER, allergy),
                                                           Msg.create(MsgRole.USER, "我住在杭州。")], None, pinned=True))
        assert [(m.id == held.id, m.memory, m.pinned) for m in again.memories] == [
            (True, allergy, True), (False, "我住在杭州。", True)]
        assert (await stub.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=held.id))).memory.pinned
        # A client that predates pinning records the text again: the pin stays.
        assert not (await stub.Record(_requests.record(scope, [Msg.create(MsgRole.USER, allergy)], None))).memories
    async with AsyncLongTermClient(server.address) as ltm:
        assert (await ltm.get(held.id)).pinned
        assert _pins(await ltm.history(held.id)) == [{"old": False, "new": True}]
        # Pinned already: nothing to change, nothing reported.
        assert await ltm.record(scope, [Msg.create(MsgRole.USER, allergy)], pinned=True) == []
        assert _pins(await ltm.history(held.id)) == [{"old": False, "new": True}]
        assert len(await ltm.list(scope)) == 2


async def test_the_inspector_marks_a_pinned_memory(server_factory) -> None:
    key = "inspector-pin-key-0001"
    server = await server_factory(inspector_port=0, api_keys={key: "tenant-a"})
    async with AsyncLongTermClient(server.address, api_key=key, timeout=30) as ltm, \
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.inspector_port}", headers={"X-API-Key": key},
                              timeout=60) as http:
        await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "我对花生过敏")], pinned=True)
        await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "我喜欢吃花生糖")])
        page = await http.get("/long-term", params={"agent_name": "助手", "user_id": "用户-钉", "query": "花生"})
        assert page.status_code == 200
        rows = {r.split("</td>")[0]: r for r in page.text.split("<tr><td>")[1:]}
        [pinned_row] = [r for r in rows if "我对花生过敏" in r]
        [plain_row] = [r for r in rows if "我喜欢吃花生糖" in r]
        assert 'class="pinned"' in pinned_row and 'class="pinned"' not in plain_row
