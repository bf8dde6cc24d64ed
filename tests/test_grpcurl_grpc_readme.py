"""The README's grpcurl session, run against a real server: every command's printed output must
equal the README's text, except for what differs between runs (times, etags, uuids)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GRPCURL = Path(sys.executable).parent / "grpcurl"
README = Path(__file__).resolve().parent.parent / "README.md"
README_ADDRESS = "127.0.0.1:50051"

pytestmark = pytest.mark.needs(GRPCURL.exists() or shutil.which("grpcurl") is not None, "grpcurl not installed")

_VARYING = [
    (re.compile(r'"(createTime|updateTime)": "[^"]*"'), r'"\1": "<time>"'),
    (re.compile(r'"(etag|previousEtag|nextPageToken)": "[^"]*"'), r'"\1": "<etag>"'),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
]


def normalise(text: str) -> str:
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return text.strip()


def readme_session(heading: str = "## Debugging with grpcurl") -> list[tuple[str, str]]:
    """(command, expected output) pairs of the first console block under `heading`."""
    section = README.read_text(encoding="utf-8").split(heading, 1)[1]
    block = section.split("```console\n", 1)[1].split("\n```", 1)[0]
    session: list[tuple[str, str]] = []
    command: list[str] | None = None
    output: list[str] = []
    for line in block.splitlines():
        if command is not None and _open(command):
            command.append(line)
            continue
        if line.startswith("$ "):
            if command is not None:
                session.append(("\n".join(command), "\n".join(output)))
            command, output = [line[2:]], []
        else:
            output.append(line)
    if command is not None:
        session.append(("\n".join(command), "\n".join(output)))
    return session


def _open(lines: list[str]) -> bool:
    """Whether a command goes on past its last line (a trailing backslash or an open quote)."""
    text = "\n".join(lines)
    if text.endswith("\\"):
        return True
    try:
        shlex.split(text)
    except ValueError:
        return True
    return False


def test_the_readme_session_prints_what_the_readme_says(threaded_server) -> None:
    session = readme_session()
    assert len(session) >= 5 and all(expected for _, expected in session)
    grpcurl = str(GRPCURL if GRPCURL.exists() else shutil.which("grpcurl"))
    for command, expected in session:
        argv = shlex.split(command.replace("\\\n", " "))
        assert argv[0] == ".venv/bin/grpcurl", command
        argv = [grpcurl] + [threaded_server.address if a == README_ADDRESS else a for a in argv[1:]]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert normalise(done.stdout) == normalise(expected), command
