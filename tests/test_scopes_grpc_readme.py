"""The README's parent/child scopes grpcurl session, run against a real server: every command's
output must equal the README's text, except for what differs between runs (times, etags)."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest

from test_grpcurl_grpc_readme import GRPCURL, README_ADDRESS, normalise, readme_session

pytestmark = pytest.mark.needs(GRPCURL.exists() or shutil.which("grpcurl") is not None, "grpcurl not installed")




def test_the_readme_scopes_session_prints_what_the_readme_says(threaded_server) -> None:
    session = readme_session("## Parent/child scopes")
    assert len(session) >= 6 and all(expected for _, expected in session)
    grpcurl = str(GRPCURL if GRPCURL.exists() else shutil.which("grpcurl"))
    for command, expected in session:
        argv = shlex.split(command.replace("\\\n", " "))
        assert argv[0] == ".venv/bin/grpcurl", command
        argv = [grpcurl] + [threaded_server.address if a == README_ADDRESS else a for a in argv[1:]]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert normalise(done.stdout) == normalise(expected), command
