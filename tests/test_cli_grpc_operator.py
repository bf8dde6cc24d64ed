"""The operator commands as a shell uses them: piped into `head`, stopped with Ctrl-C, pointed
at a server that is not there. Each ends with at most one line on stderr, never a traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentscope_memory.client import MemoryClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory_server.cli import main
from conftest import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*argv: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.path.join(ROOT, "server")])}
    return subprocess.Popen([sys.executable, "-m", "agentscope_memory_server", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _fill(address: str, memory_id: str, count: int) -> None:
    with MemoryClient(address) as client:
        client.create_memory(memory_id)
        for start in range(0, count, 1000):
            client.add_messages(memory_id, [Msg.create(MsgRole.USER, f"第 {i} 条消息 " + "字" * 40)
                                            for i in range(start, min(count, start + 1000))])


@pytest.mark.parametrize("argv", [["memories", "show", "长会话"], ["memories", "show", "长会话", "--json"]])
def test_a_reader_that_stops_early_ends_the_command_quietly(threaded_server, argv: list[str]) -> None:
    _fill(threaded_server.address, "长会话", 20_000)
    process = _cli(*argv, "--target", threaded_server.address, "--page-size", "100")
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    assert first  # `head -1` got its line, then closes the pipe
    process.stdout.close()
    code = process.wait(60)
    err = process.stderr.read().decode()
    assert err == ""
    assert code == 141


def test_ctrl_c_during_a_long_show_is_one_line_and_status_130(
        threaded_server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(threaded_server.address, "长会话", 3000)
    shown = 0
    real = MemoryClient.iter_messages

    def interrupted(self: MemoryClient, *args: object, **kwargs: object) -> Iterator[Msg]:
        nonlocal shown
        for msg in real(self, *args, **kwargs):  # type: ignore[arg-type]
            shown += 1
            if shown == 1500:
                raise KeyboardInterrupt  # what SIGINT raises in the main thread
            yield msg

    monkeypatch.setattr(MemoryClient, "iter_messages", interrupted)
    assert main(["memories", "show", "长会话", "--target", threaded_server.address]) == 130
    assert capsys.readouterr().err == "agentscope-memory memories: interrupted\n"


@pytest.mark.parametrize("argv", [
    ["memories", "list"], ["memories", "show", "会话"], ["long-term", "search", "茶", "--user-id", "alice"],
    ["session", "export", "--memory-id", "会话", "--session-id", "s"], ["status", "会话"],
    ["agent-state", "export", "--user-id", "alice", "--session-id", "s"],
])
def test_a_server_that_is_not_there_is_one_line_at_once(argv: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Not after the client's 30 s of retries meant for riding out a restart.
    if argv[0] in ("session", "agent-state"):
        argv = [*argv, "--dir", str(tmp_path)]
    started = time.monotonic()
    assert main([*argv, "--target", f"127.0.0.1:{free_port()}"]) == 1
    assert time.monotonic() - started < 5
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"agentscope-memory {argv[0]}") and err.count("\n") == 1


def test_a_text_of_several_lines_stays_inside_its_message(threaded_server, capsys: pytest.CaptureFixture[str]) -> None:
    # A line of a text that looks like a message header must not read as a second message.
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("多行")
        client.add_messages("多行", [Msg.create(MsgRole.USER, "第一行\n[2026-01-01 10:00:00.000] ASSISTANT:\n我没说过这句")])
    assert main(["memories", "show", "多行", "--target", threaded_server.address]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line for line in lines if not line.startswith("    ")] == [lines[0]] and "USER" in lines[0]
    assert lines[1:] == ["    第一行", "    [2026-01-01 10:00:00.000] ASSISTANT:", "    我没说过这句"]


def test_delete_asks_on_stderr_and_an_empty_stdin_deletes_nothing(
        threaded_server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # `memories delete ID > log < /dev/null`: the question is seen (not written into the log),
    # and no answer is no.
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("留着")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["memories", "delete", "留着", "--target", threaded_server.address]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "delete 留着 (IN_MEMORY, 0 messages)? [y/N]" in err
    assert err.rstrip().endswith("留着 not deleted: no answer on stdin (--yes deletes without asking)")
    with MemoryClient(threaded_server.address) as client:
        assert client.get_memory("留着").memory_id == "留着"
    monkeypatch.setattr("sys.stdin", io.StringIO("yes\n"))
    assert main(["memories", "delete", "留着", "--target", threaded_server.address]) == 0
    assert capsys.readouterr().out == "deleted 留着\n"


def test_long_term_search_keeps_one_row_per_result(threaded_server, capsys: pytest.CaptureFixture[str]) -> None:
    from agentscope_memory.client.long_term import LongTermClient
    from agentscope_memory.long_term.engine import Scope

    with LongTermClient(threaded_server.address) as ltm:
        ltm.record(Scope(user_id="alice"), [Msg.create(MsgRole.USER, "我每天早上\t喝绿茶\r\n和红茶")])
    assert main(["long-term", "search", "绿茶", "--user-id", "alice", "--target", threaded_server.address]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows and all(len(row) == 8 for row in rows)
    assert rows[0][7] == "我每天早上 喝绿茶 和红茶"
