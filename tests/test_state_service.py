"""StateService: save/load in AgentScope's session keys, atomic loads, versions, export/import."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as sgrpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import AbortedError, InvalidArgumentError, NotFoundError
from agentscope_memory.message import (
    Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock, msg_to_dict, msg_to_json,
)
from agentscope_memory.session import JsonSession, StateEntry
from agentscope_memory_server.cli import main as cli_main

GOLDEN = Path(__file__).parent / "golden"


def conversation() -> list[Msg]:
    return [
        Msg.create(MsgRole.USER, "What's the weather in Paris?"),
        Msg.create(MsgRole.ASSISTANT, content=[ToolUseBlock("call_1", "get_weather", {"city": "Paris"}, None, {})],
                   name="Assistant"),
        Msg.create(MsgRole.TOOL, content=[ToolResultBlock("call_1", "get_weather", [TextBlock('"Sunny"')], {})],
                   name="Assistant"),
        Msg.create(MsgRole.ASSISTANT, "Sunny, 21C.", name="Assistant", metadata={"n": 1, "f": 1.5}),
    ]


async def test_save_state_uses_agentscope_keys_and_json(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m")
    msgs = conversation()
    await aclient.add_messages("m", msgs)
    entries, version = await aclient.save_state("m")
    assert [e.key for e in entries] == ["memory_messages"] and entries[0].is_list
    assert [json.dumps(i) for i in entries[0].items] == [json.dumps(msg_to_dict(m)) for m in msgs]
    assert version == (await aclient.get_memory("m")).version


async def test_empty_memory_still_saves_its_list(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m")
    entries, _ = await aclient.save_state("m")
    assert entries == [StateEntry("memory_messages", items=[])]


async def test_round_trip_memory_state_session_memory(aclient: AsyncMemoryClient, tmp_path: Path) -> None:
    await aclient.create_memory("a")
    await aclient.create_memory("b")
    msgs = conversation()
    await aclient.add_messages("a", msgs)
    entries, _ = await aclient.save_state("a")
    session = JsonSession(tmp_path)
    for entry in entries:
        session.save_list("sess", entry.key, entry.items)
    loaded = [StateEntry("memory_messages", items=session.get_list("sess", "memory_messages"))]
    await aclient.add_message("b", Msg.create(MsgRole.USER, "will be replaced"))
    await aclient.load_state("b", loaded)
    assert await aclient.get_messages("b") == msgs


async def test_loading_a_java_session_directory(aclient: AsyncMemoryClient, tmp_path: Path) -> None:
    shutil.copytree(GOLDEN / "user_1", tmp_path / "user_1")
    items = JsonSession(tmp_path).get_list("user_1", "memory_messages")
    await aclient.create_memory("m")
    await aclient.load_state("m", [StateEntry("memory_messages", items=items)])
    got = await aclient.get_messages("m")
    assert [msg_to_json(m) for m in got] == (tmp_path / "user_1" / "memory_messages.jsonl").read_text().splitlines()


async def test_missing_key_loads_empty_like_load_from(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m")
    await aclient.add_message("m", Msg.create(MsgRole.USER, "x"))
    await aclient.load_state("m", [])
    assert await aclient.get_messages("m") == []


async def test_a_failed_load_changes_nothing(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m")
    before = conversation()
    await aclient.add_messages("m", before)
    version = (await aclient.get_memory("m")).version
    good = msg_to_dict(Msg.create(MsgRole.USER, "ok"))
    bad_cases = [
        ([StateEntry("memory_messages", items=[good, {"role": "user"}])], "memory_messages[1].role"),
        ([StateEntry("memory_messages", items=[good, {"content": [{"type": "nope"}]}])], "memory_messages[1].content[0].type"),
        ([StateEntry("memory_messages", items=[good]), StateEntry("agent_meta", value={})], "agent_meta"),
        ([StateEntry("memory_messages", value={"not": "a list"})], "memory_messages"),
    ]
    for entries, field in bad_cases:
        with pytest.raises(InvalidArgumentError) as err:
            await aclient.load_state("m", entries)
        assert field in str(err.value)
    assert await aclient.get_messages("m") == before
    assert (await aclient.get_memory("m")).version == version


async def test_malformed_json_in_an_entry_is_named(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = sgrpc.StateServiceStub(channel)
        async with AsyncMemoryClient(server.address) as client:
            await client.create_memory("m")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.LoadState(spb.LoadStateRequest(memory_id="m", entries=[
                spb.StateEntry(key="memory_messages", list=spb.JsonList(items=['{"id":"a"}', '{"id":']))]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "entries[0].list.items[1]" in err.value.details()


async def test_stale_expected_version_is_aborted(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m")
    entries, version = await aclient.save_state("m")
    await aclient.add_message("m", Msg.create(MsgRole.USER, "concurrent change"))
    with pytest.raises(AbortedError, match="version"):
        await aclient.load_state("m", entries, expected_version=version)
    assert len(await aclient.get_messages("m")) == 1
    _, current = await aclient.save_state("m")
    new_version = await aclient.load_state("m", entries, expected_version=current)
    assert new_version == current + 1 and await aclient.get_messages("m") == []


async def test_unknown_memory(aclient: AsyncMemoryClient) -> None:
    with pytest.raises(NotFoundError):
        await aclient.save_state("ghost")
    with pytest.raises(NotFoundError):
        await aclient.load_state("ghost", [])


async def test_concurrent_loads_and_appends_never_mix(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m")
    states = {
        name: [StateEntry("memory_messages", items=[msg_to_dict(Msg.create(MsgRole.USER, f"{name}{i}")) for i in range(20)])]
        for name in ("A", "B")
    }

    async def loader(name: str) -> None:
        for _ in range(10):
            await aclient.load_state("m", states[name])

    async def appender() -> None:
        for i in range(30):
            await aclient.add_message("m", Msg.create(MsgRole.USER, f"x{i}"))

    async def checker() -> None:
        for _ in range(30):
            texts = [m.text_content for m in await aclient.get_messages("m")]
            loaded = [t for t in texts if not t.startswith("x")]
            # Every snapshot holds one whole state (or none yet), never a mix or a part.
            assert loaded in ([], [f"A{i}" for i in range(20)], [f"B{i}" for i in range(20)])

    await asyncio.gather(loader("A"), loader("B"), appender(), checker())


async def test_export_and_import_a_session_on_the_server(server_factory, tmp_path: Path) -> None:
    server = await server_factory(data_dir=tmp_path / "data")
    async with AsyncMemoryClient(server.address) as client, grpc.aio.insecure_channel(server.address) as channel:
        stub = sgrpc.StateServiceStub(channel)
        await client.create_memory("chat", labels={"session_id": "user/1"})
        msgs = conversation()
        await client.add_messages("chat", msgs)
        exported = await stub.ExportSession(spb.ExportSessionRequest(session_id="user/1"))
        directory = Path(exported.directory)
        assert directory == tmp_path / "data" / "sessions" / "default" / "dXNlci8x"
        assert list(exported.keys) == ["memory_messages"]
        assert (directory / "memory_messages.jsonl").read_text().splitlines() == [msg_to_json(m) for m in msgs]
        await client.create_memory("restored")
        imported = await stub.ImportSession(spb.ImportSessionRequest(session_id="user/1", memory_id="restored"))
        assert list(imported.keys) == ["memory_messages"]
        assert await client.get_messages("restored") == msgs
        # A traversal attempt stays inside the sessions root.
        escaped = await stub.ExportSession(spb.ExportSessionRequest(session_id="../../etc", memory_ids=["chat"]))
        assert Path(escaped.directory).parent == tmp_path / "data" / "sessions" / "default"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ImportSession(spb.ImportSessionRequest(session_id="nobody", memory_id="restored"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ExportSession(spb.ExportSessionRequest(session_id="s", memory_ids=["chat", "restored"]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "both write" in err.value.details()


def test_cli_export_import_list_show(threaded_server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentscope_memory.client import MemoryClient

    with MemoryClient(threaded_server.address) as client:
        client.create_memory("chat")
        client.add_messages("chat", conversation())
        client.create_memory("copy")
    sessions = tmp_path / "sessions"
    common = ["--target", threaded_server.address, "--dir", str(sessions), "--session-id", "alice"]
    assert cli_main(["session", "export", "--memory-id", "chat", *common]) == 0
    assert (sessions / "alice" / "memory_messages.jsonl").is_file()
    assert cli_main(["session", "import", "--memory-id", "copy", *common]) == 0
    with MemoryClient(threaded_server.address) as client:
        assert client.get_messages("copy") == client.get_messages("chat")
    capsys.readouterr()
    assert cli_main(["session", "list", "--dir", str(sessions)]) == 0
    assert "alice\tmemory_messages.jsonl" in capsys.readouterr().out
    assert cli_main(["session", "show", "alice", "--dir", str(sessions)]) == 0
    shown = capsys.readouterr().out
    assert "USER:\n    What's the weather in Paris?" in shown
    assert "-> get_weather({'city': 'Paris'}) [call_1]" in shown and "<- get_weather [call_1]: \"Sunny\"" in shown
    assert cli_main(["session", "show", "nobody", "--dir", str(sessions)]) == 1
