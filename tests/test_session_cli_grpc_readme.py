"""The README's `session` command lines ("Sessions and state"), run in order as written against a
real server holding the quick start's `chat-42`: only the server address is added, to the
commands that call a server."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from agentscope_memory.client import MemoryClient
from agentscope_memory.message import Msg, MsgRole
from conftest import ServerThread

README = Path(__file__).resolve().parent.parent / "README.md"


def session_commands() -> list[list[str]]:
    section = README.read_text(encoding="utf-8").split("\n## Sessions and state\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)\n```", section, re.DOTALL)
    assert block, "no bash block under 'Sessions and state'"
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines() if line.strip()]


def test_session_commands_run_in_order(threaded_server: ServerThread, tmp_path: Path) -> None:
    with MemoryClient(threaded_server.address) as memory:
        memory.create_memory("chat-42", allow_existing=True)
        memory.add_messages("chat-42", [Msg.create(MsgRole.USER, "部署窗口是周二上午十点"),
                                        Msg.create(MsgRole.ASSISTANT, "记住了。")])
    outputs = []
    for argv in session_commands():
        assert argv[:2] == ["agentscope-memory", "session"], argv
        command = [sys.executable, "-m", "agentscope_memory_server.cli", *argv[1:]]
        if argv[2] in ("export", "import"):
            command += ["--target", threaded_server.address]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, f"{shlex.join(argv)}: {done.stderr}"
        outputs.append(done.stdout)
    with MemoryClient(threaded_server.address) as memory:
        for memory_id in ("chat-42", "chat-43"):
            assert [m.text_content for m in memory.get_messages(memory_id)] == ["部署窗口是周二上午十点", "记住了。"]
    assert "部署窗口是周二上午十点" in outputs[-1]
