"""`agentscope-memory session import --create`: a JsonSession goes into a memory that does not
exist yet, of the kind its keys name."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.client import MemoryClient, TieredClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.short_term.tiered import TieredConfig
from agentscope_memory_server.cli import main


def test_import_creates_the_missing_memory_only_when_asked(threaded_server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sessions = tmp_path / "sessions"
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("chat")
        client.add_messages("chat", [Msg.create(MsgRole.USER, "你好"), Msg.create(MsgRole.ASSISTANT, "hello")])
        client.create_memory("ac", "AUTO_CONTEXT")
        client.add_messages("ac", [Msg.create(MsgRole.USER, "remember this")])
    common = ["--target", threaded_server.address, "--dir", str(sessions)]
    assert main(["session", "export", "--memory-id", "chat", "--session-id", "plain", *common]) == 0
    assert main(["session", "export", "--memory-id", "ac", "--session-id", "auto", *common]) == 0
    capsys.readouterr()

    assert main(["session", "import", "--memory-id", "new-chat", "--session-id", "plain", *common]) == 1
    assert "new-chat" in capsys.readouterr().err
    assert main(["session", "import", "--memory-id", "new-chat", "--session-id", "plain", "--create", *common]) == 0
    assert main(["session", "import", "--memory-id", "new-ac", "--session-id", "auto", "--create", *common]) == 0
    assert "created new-ac (AUTO_CONTEXT)" in capsys.readouterr().out
    with MemoryClient(threaded_server.address) as client:
        assert client.get_memory("new-chat").kind == "IN_MEMORY"
        assert client.get_messages("new-chat") == client.get_messages("chat")
        assert client.get_memory("new-ac").kind == "AUTO_CONTEXT"
        assert client.get_messages("new-ac") == client.get_messages("ac")
    # An existing memory is loaded as before; --create changes nothing there.
    assert main(["session", "import", "--memory-id", "new-chat", "--session-id", "plain", "--create", *common]) == 0


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_tiered_session_round_trips_byte_for_byte(threaded_server, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A TIERED memory's session (tieredMemory_* keys) used to import as nothing: --create made
    an IN_MEMORY memory, and an existing TIERED memory was loaded with no entries."""
    with TieredClient(threaded_server.address) as tiered:
        tiered.create_memory("层-源")
        tiered.add("层-源", [Msg.create(MsgRole.USER, "第一条 🎈"), Msg.create(MsgRole.ASSISTANT, "好的")])
        tiered.create_memory("层-已有")
    common = ["--target", threaded_server.address, "--session-id", "层"]
    assert main(["session", "export", "--memory-id", "层-源", "--dir", str(tmp_path / "a"), *common]) == 0
    assert main(["session", "import", "--memory-id", "层-新", "--create", "--dir", str(tmp_path / "a"), *common]) == 0
    assert main(["session", "import", "--memory-id", "层-已有", "--dir", str(tmp_path / "a"), *common]) == 0
    assert "created 层-新 (TIERED)" in capsys.readouterr().out
    for copy in ("层-新", "层-已有"):
        assert main(["session", "export", "--memory-id", copy, "--dir", str(tmp_path / copy), *common]) == 0
        assert _files(tmp_path / copy) == _files(tmp_path / "a")
    with MemoryClient(threaded_server.address) as client:
        assert client.get_memory("层-新").kind == "TIERED"
        assert client.get_memory("层-新").message_count == 2


def test_a_session_of_another_kind_leaves_the_memory_unchanged(threaded_server, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Importing a session that holds none of the memory's state keys used to load an empty
    state: the memory was emptied and the command said `loaded nothing` with exit code 0."""
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("平")
        client.add_messages("平", [Msg.create(MsgRole.USER, "你好")])
        client.create_memory("自动", "AUTO_CONTEXT")
        kept = [Msg.create(MsgRole.USER, f"第{i}条") for i in range(3)]
        client.add_messages("自动", kept)
        version = client.get_memory("自动").version
    common = ["--target", threaded_server.address, "--dir", str(tmp_path), "--session-id", "平"]
    assert main(["session", "export", "--memory-id", "平", *common]) == 0
    capsys.readouterr()
    assert main(["session", "import", "--memory-id", "自动", *common]) == 1
    err = capsys.readouterr().err
    assert "memory_messages" in err and "AUTO_CONTEXT" in err and "自动 left unchanged" in err
    assert len(err.strip().splitlines()) == 1
    with MemoryClient(threaded_server.address) as client:
        assert client.get_messages("自动") == kept and client.get_memory("自动").version == version


def test_show_prints_a_tiered_sessions_tiers(threaded_server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`session show` of a TIERED memory's session printed nothing at all (exit 0): its lists are
    tier items wrapping messages, not messages."""
    with TieredClient(threaded_server.address) as tiered:
        tiered.create_memory("层-摘要", TieredConfig(l2_budget=150))  # 22 tokens an item: the 6th reaches 85%
        tiered.add("层-摘要", [Msg.create(MsgRole.USER, f"第{i}条: 部署窗口改到周{i}上午十点") for i in range(1, 7)],
                   importances=[0.9] * 6)
        assert [t.items for t in tiered.status("层-摘要").tiers][:3] == [6, 5, 1]
    sessions = str(tmp_path / "sessions")
    assert main(["session", "export", "--memory-id", "层-摘要", "--session-id", "摘要", "--dir", sessions,
                 "--target", threaded_server.address]) == 0
    capsys.readouterr()
    assert main(["session", "show", "摘要", "--dir", sessions]) == 0
    shown = capsys.readouterr().out
    assert "== tieredMemory_l1 (6 items)" in shown and "== tieredMemory_l2 (5 items)" in shown
    assert shown.count("USER:\n    第6条: 部署窗口改到周6上午十点") == 2
    assert "== tieredMemory_l3 (1 items)\n[summary]:\n    " in shown and "第1条: 部署窗口改到周1上午" in shown.split("tieredMemory_l3")[1]
