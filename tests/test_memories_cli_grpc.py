"""`agentscope-memory memories list|show|delete` against a real server: paged, per tenant,
readable, and a delete that asks first."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from agentscope_memory.client import MemoryClient
from agentscope_memory.errors import NotFoundError
from agentscope_memory.message import Msg, MsgRole, ToolResultBlock, ToolUseBlock, TextBlock, msg_from_dict
from agentscope_memory_server.cli import main
from conftest import ServerThread, make_settings


def test_list_pages_through_every_memory_and_show_renders_messages(threaded_server, capsys: pytest.CaptureFixture[str]) -> None:
    target = ["--target", threaded_server.address]
    with MemoryClient(threaded_server.address) as client:
        for i in range(5):
            client.create_memory(f"会话-{i}")
        client.add_messages("会话-0", [
            Msg.create(MsgRole.USER, "巴黎天气怎么样?"),
            Msg.create(MsgRole.ASSISTANT, content=[ToolUseBlock(id="call_1", name="get_weather", input={"city": "Paris"})],
                       name="Assistant"),
            Msg.create(MsgRole.TOOL, content=[ToolResultBlock(id="call_1", name="get_weather",
                                                              output=[TextBlock(text="sunny, 21°C")])], name="Assistant"),
        ])
    assert main(["memories", "list", "--page-size", "2", *target]) == 0
    out, err = capsys.readouterr()
    rows = [line.split("\t") for line in out.splitlines()[1:]]
    assert sorted(r[0] for r in rows) == [f"会话-{i}" for i in range(5)]
    assert {r[0]: r[2] for r in rows}["会话-0"] == "3" and "5 memories" in err

    assert main(["memories", "show", "会话-0", "--page-size", "1", *target]) == 0
    out = capsys.readouterr().out
    assert "会话-0: IN_MEMORY, 3 messages" in out and "巴黎天气怎么样?" in out
    assert "-> get_weather(" in out and "<- get_weather [call_1]: sunny, 21°C" in out

    assert main(["memories", "show", "会话-0", "--json", *target]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [m["role"] for m in lines] == ["USER", "ASSISTANT", "TOOL"]
    assert lines[0]["content"][0]["text"] == "巴黎天气怎么样?"


def test_show_json_writes_each_message_as_agentscope_does(threaded_server, capsys: pytest.CaptureFixture[str]) -> None:
    # AgentScope-Java writes a message without a name as "name":null (reference: agentscope-java
    # core, "User message with no name"), compact; the lines were Python's json.dumps form.
    nameless = '{"id":"m2","name":null,"role":"USER","content":[{"type":"text","text":"ok"}],"metadata":{},' \
               '"timestamp":"2025-01-01 10:00:00.000"}'
    named = '{"id":"m3","name":"助手","role":"ASSISTANT","content":[{"type":"text","text":"好的，明天见。"}],' \
            '"metadata":{"来源":"测试"},"timestamp":"2025-01-01 10:00:01.000"}'
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("无名")
        client.add_messages("无名", [msg_from_dict(json.loads(nameless)), msg_from_dict(json.loads(named))])
    assert main(["memories", "show", "无名", "--json", "--target", threaded_server.address]) == 0
    assert capsys.readouterr().out.splitlines() == [nameless, named]


def test_delete_asks_first_and_a_missing_memory_is_named(threaded_server, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    target = ["--target", threaded_server.address]
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("keep-me")
        client.add_message("keep-me", Msg.create(MsgRole.USER, "hello"))
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert main(["memories", "delete", "keep-me", *target]) == 1
    out, err = capsys.readouterr()
    assert "delete keep-me (IN_MEMORY, 1 messages)?" in err and "keep-me not deleted" in err and out == ""
    with MemoryClient(threaded_server.address) as client:
        assert client.get_memory("keep-me").message_count == 1
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["memories", "delete", "keep-me", *target]) == 0
    with MemoryClient(threaded_server.address) as client, pytest.raises(NotFoundError):
        client.get_memory("keep-me")
    assert main(["memories", "show", "keep-me", *target]) == 1
    assert "keep-me" in capsys.readouterr().err


def test_each_key_sees_only_its_tenant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = {"tenant-a-key-0000001": "tenant-a", "tenant-b-key-0000001": "tenant-b"}
    server = ServerThread(make_settings(tmp_path / "data", api_keys=keys))
    try:
        with MemoryClient(server.address, api_key="tenant-a-key-0000001") as a:
            a.create_memory("a-only")
        assert main(["memories", "list", "--target", server.address, "--api-key", "tenant-b-key-0000001"]) == 0
        assert "a-only" not in capsys.readouterr().out
        assert main(["memories", "delete", "a-only", "--yes", "--target", server.address,
                     "--api-key", "tenant-b-key-0000001"]) == 1
        assert main(["memories", "list", "--target", server.address]) == 1
        err = capsys.readouterr().err
        assert "missing API key" in err and err.rstrip().endswith("--api-key or $AGENTSCOPE_MEMORY_API_KEY")
        with MemoryClient(server.address, api_key="tenant-a-key-0000001") as a:
            assert a.get_memory("a-only").memory_id == "a-only"
    finally:
        server.stop()


def test_every_command_that_calls_a_server_takes_its_key_from_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A key given as --api-key shows in `ps` and in the shell's history; the environment does not.
    keys = {"tenant-a-key-0000001": "tenant-a"}
    server = ServerThread(make_settings(tmp_path / "data", api_keys=keys))
    try:
        with MemoryClient(server.address, api_key="tenant-a-key-0000001") as a:
            a.create_memory("a-only")
            a.add_messages("a-only", [Msg.create(MsgRole.USER, "hello")])
        target = ["--target", server.address]
        monkeypatch.setenv("AGENTSCOPE_MEMORY_API_KEY", "tenant-a-key-0000001")
        assert main(["memories", "list", *target]) == 0
        assert "a-only" in capsys.readouterr().out
        assert main(["session", "export", "--memory-id", "a-only", "--session-id", "s",
                     "--dir", str(tmp_path / "sessions"), *target]) == 0
        assert main(["memory", "close-tool-calls", "--memory-id", "a-only", "--agent-name", "A", *target]) == 0
        # --api-key still wins over the environment.
        assert main(["memories", "list", "--api-key", "tenant-x-key-0000001", *target]) == 1
        assert "unknown API key" in capsys.readouterr().err
    finally:
        server.stop()


def test_python_dash_m_runs_the_same_command() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "agentscope_memory_server", "memories", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage: agentscope-memory memories" in done.stdout
