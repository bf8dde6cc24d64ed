"""Progress of long state transfers: the clients report each piece of a state stream, and
`session export`/`import` draw a bar from it (on stderr, so stdout stays the result), as
`agent-state export`/`import` do for a slot's values and lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.agent_state import Slot
from agentscope_memory.agent_state.json_files import slot_dir
from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.client.agent_state import AgentStateClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory_server.cli import main

MIB = 1024 * 1024


def _big(client: MemoryClient, memory_id: str) -> None:
    client.create_memory(memory_id)
    for i in range(6):
        client.add_message(memory_id, Msg.create(MsgRole.USER, f"{i} " + "记忆" * (MIB // 6)))


def test_blocking_client_reports_every_piece_both_ways(threaded_server) -> None:
    with MemoryClient(threaded_server.address) as client:
        _big(client, "大-1")
        received: list[int] = []
        entries, _ = client.save_state("大-1", progress=received.append)
        sent: list[int] = []
        client.create_memory("大-2")
        client.load_state("大-2", entries, progress=sent.append)
        assert client.get_messages("大-2") == client.get_messages("大-1")
    # About 6 MiB of text moves in pieces of at most 4 MiB: more than one piece each way.
    assert len(received) >= 2 and sum(received) >= 6 * MIB
    assert len(sent) >= 2 and sum(sent) >= 6 * MIB


async def test_asyncio_client_reports_every_piece_both_ways(threaded_server) -> None:
    with MemoryClient(threaded_server.address) as blocking:
        _big(blocking, "大-a")
    async with AsyncMemoryClient(threaded_server.address, timeout=30) as client:
        received: list[int] = []
        entries, _ = await client.save_state("大-a", progress=received.append)
        sent: list[int] = []
        await client.create_memory("大-b")
        await client.load_state("大-b", entries, progress=sent.append)
    assert len(received) >= 2 and sum(received) >= 6 * MIB
    assert len(sent) >= 2 and sum(sent) >= 6 * MIB


def test_export_and_import_draw_a_bar_on_stderr(threaded_server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with MemoryClient(threaded_server.address) as client:
        _big(client, "chat")
    common = ["--target", threaded_server.address, "--dir", str(tmp_path / "sessions"), "--progress"]
    assert main(["session", "export", "--memory-id", "chat", "--session-id", "s", *common]) == 0
    out, err = capsys.readouterr()
    assert "wrote memory_messages" in out and "export chat" not in out
    assert "export chat" in err and "MB" in err
    assert main(["session", "import", "--memory-id", "copy", "--session-id", "s", "--create", *common]) == 0
    assert "import copy" in capsys.readouterr().err
    with MemoryClient(threaded_server.address) as client:
        assert client.get_messages("copy") == client.get_messages("chat")


def test_agent_state_export_and_import_draw_a_bar_on_stderr(threaded_server, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    slot = Slot("用户", "会话")
    memory = ['{"role":"USER","text":"' + "记忆" * 100_000 + f' {i}"}}' for i in range(12)]
    with AgentStateClient(threaded_server.address) as state:
        state.put_value(slot, "agent_meta", '{"name":"助手"}')
        state.put_list(slot, "memory_messages", memory)
    common = ["--target", threaded_server.address, "--dir", str(tmp_path / "state"), "--user-id", "用户", "--progress"]
    assert main(["agent-state", "export", "--session-id", "会话", *common]) == 0
    out, err = capsys.readouterr()
    assert "wrote agent_meta, memory_messages" in out and "export 会话" not in out
    assert "export 会话" in err and "7.20MB" in err  # 12 items of 600,000 bytes, and the value
    # The import's bar knows its total: it reaches it.
    slot_dir(tmp_path / "state", "用户", "会话").rename(slot_dir(tmp_path / "state", "用户", "副本"))
    assert main(["agent-state", "import", "--session-id", "副本", *common]) == 0
    err = capsys.readouterr().err
    assert "import 副本" in err and "7.20M/7.20M" in err
    with AgentStateClient(threaded_server.address) as state:
        assert state.get_list(Slot("用户", "副本"), "memory_messages").items == memory
