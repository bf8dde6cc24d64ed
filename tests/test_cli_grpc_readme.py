"""The command lines the README shows: every flag it names exists, and the ones it tells an
operator to pass to `agentscope-memory serve` do what it says."""

from __future__ import annotations

import argparse
import re
import urllib.request
from pathlib import Path

from agentscope_memory_server.cli import _parser
from conftest import ServerProcess, free_port

README = Path(__file__).resolve().parent.parent / "README.md"
# Flags of other programs the README shows (`pip install --no-deps`).
OTHER_PROGRAMS = {"--no-deps"}


def _every_flag(parser: argparse.ArgumentParser) -> set[str]:
    flags: set[str] = set()
    for action in parser._actions:
        flags.update(o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags |= _every_flag(sub)
    return flags


def test_every_flag_the_readme_names_is_one_of_the_cli() -> None:
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", README.read_text(encoding="utf-8")))
    assert sorted(named - _every_flag(_parser()) - OTHER_PROGRAMS) == []


def test_serve_metrics_port_serves_prometheus_metrics(tmp_path: Path) -> None:
    # The README's tiered section sends operators to `--metrics-port` for the tier gauges.
    metrics_port = free_port()
    server = ServerProcess(tmp_path / "data", None, "--metrics-port", str(metrics_port))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            body = response.read().decode()
        assert "agentscope_memory_rpc_calls_total" in body
    finally:
        server.close()


def test_every_pip_install_of_this_project_names_a_checkout() -> None:
    # agentscope-memory is not on PyPI: `pip install agentscope-memory` finds no distribution
    # (or, one day, somebody else's). Every install of it the README shows is from a path.
    readme = README.read_text(encoding="utf-8")
    commands = re.findall(r"pip install[^`\n]*", readme)
    assert commands
    by_name = [c for c in commands if re.search(r"""(?<![\w/.-])["']?agentscope-memory\b""", c)]
    assert by_name == []
