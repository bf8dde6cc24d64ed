"""`agentscope-memory session export` replaces a session's files all together: a TIERED memory
is saved under five keys, and an export interrupted between them (Ctrl-C, a failing write) left
the new L1 beside the old stats, a session no memory ever had."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from agentscope_memory.client import MemoryClient, TieredClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.session import json_session
from agentscope_memory_server.cli import main


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _failing_on_third_write(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """Every file write of the session goes through `_write_atomic`: the third one fails."""
    real: Callable[[Path, str], None] = json_session._write_atomic
    calls: list[Path] = []

    def write(path: Path, data: str) -> None:
        calls.append(path)
        if len(calls) == 3:
            raise error
        real(path, data)

    monkeypatch.setattr(json_session, "_write_atomic", write)


@pytest.mark.parametrize("interruption", [KeyboardInterrupt(), OSError(28, "No space left on device")],
                         ids=["ctrl-c", "disk-full"])
def test_an_interrupted_export_leaves_the_session_as_it_was(
        threaded_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interruption: BaseException,
        capsys: pytest.CaptureFixture[str]) -> None:
    sessions = tmp_path / "sessions"
    common = ["--target", threaded_server.address, "--dir", str(sessions), "--session-id", "会话"]
    with TieredClient(threaded_server.address) as tiered:
        tiered.create_memory("分层")
        tiered.add("分层", [Msg.create(MsgRole.USER, "第一条：周二部署网关。")])
    assert main(["session", "export", "--memory-id", "分层", *common]) == 0
    (sessions / json_session.session_dir_name("会话") / "agent_notes.json").write_text("{}", encoding="utf-8")
    before = _files(sessions)
    assert {Path(name).stem for name in before} >= {"tieredMemory_l1", "tieredMemory_stats"}
    with TieredClient(threaded_server.address) as tiered:
        tiered.add("分层", [Msg.create(MsgRole.ASSISTANT, "好的，已记下：李雷负责回滚。")])

    with monkeypatch.context() as patched:
        _failing_on_third_write(patched, interruption)
        code = main(["session", "export", "--memory-id", "分层", *common])
        err = capsys.readouterr().err
        if isinstance(interruption, KeyboardInterrupt):
            assert (code, err) == (130, "agentscope-memory session: interrupted\n")
        else:
            assert code == 1 and "No space left on device" in err
    # Every file as the first export wrote it (and the file it did not write kept), nothing
    # left over beside it.
    assert _files(sessions) == before
    assert main(["session", "list", "--dir", str(sessions)]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == [
        json_session.session_dir_name("会话")]

    # Uninterrupted, the export writes the memory as it is now, keeping the other file.
    assert main(["session", "export", "--memory-id", "分层", *common]) == 0
    after = _files(sessions)
    assert after.keys() == before.keys() and after != before
    assert main(["session", "import", "--memory-id", "分层-副本", "--create", *common]) == 0
    with MemoryClient(threaded_server.address) as client:
        assert client.get_messages("分层-副本") == client.get_messages("分层")
