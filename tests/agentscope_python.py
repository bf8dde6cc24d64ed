"""Virtual environments with a real AgentScope-Python release and this project, for tests.

AgentScope 1.x and 2.x cannot share one environment (and neither belongs in the server's own),
so each version gets its own virtualenv under `.cache/agentscope-python/`, created on first use
and reused while its recipe is unchanged. It holds `agentscope==VERSION` from PyPI and this
project installed editable with `--no-deps` plus only what its client side needs (the pins
named in `CLIENT_REQUIREMENTS`, read from pyproject.toml), which is how a user adds the
adapters to an existing AgentScope application without the server's dependencies.

    python = agentscope_python("1.0.21")        # Path of the venv's python
    subprocess.run([python, "script.py"], check=True)

Creation takes about a minute per version with a warm pip cache; afterwards it is instant.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "agentscope-python"

# The AgentScope releases the adapters support: the last 1.x and the newest 2.x that installs
# here (2.0.11 needs a certifi that PyPI does not have).
AGENTSCOPE_1 = "1.0.21"
AGENTSCOPE_2 = "2.0.10"

# What the client side of this project imports, at the versions pinned in pyproject.toml
# (mcp: AgentScope needs one and 1.30.0 is the one both 1.0.21 and 2.x work with).
CLIENT_REQUIREMENTS = ("grpcio", "protobuf", "pydantic", "httpx", "mcp")
# Extra packages an AgentScope release needs beside its own requirements to import cleanly.
EXTRAS = {AGENTSCOPE_1: ("greenlet", "tqdm")}

# Bump when the recipe below changes in a way the key does not see.
_RECIPE = 1


def _pins() -> list[str]:
    with open(REPO / "pyproject.toml", "rb") as f:
        deps: list[str] = tomllib.load(f)["project"]["dependencies"]
    wanted = []
    for dep in deps:
        name = re.split(r"[\[=<>!~ ]", dep, maxsplit=1)[0].lower()
        if name in CLIENT_REQUIREMENTS:
            wanted.append(dep)
    return sorted(wanted)


def _key(version: str) -> str:
    recipe = {"recipe": _RECIPE, "agentscope": version, "pins": _pins(), "extras": EXTRAS.get(version, ()),
              "python": sys.version_info[:2]}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def _python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def agentscope_python(version: str) -> Path:
    """The python executable of a cached virtualenv with `agentscope==version` and this
    project; creates it if needed (safe to call from several processes at once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = CACHE / f"agentscope-{version}-{_key(version)}"
    ready = venv / ".ready"
    if ready.exists():
        return _python_of(venv)
    with open(CACHE / f"agentscope-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():  # another process built it while we waited
            return _python_of(venv)
        shutil.rmtree(venv, ignore_errors=True)
        _create(venv, version)
        ready.write_text(version)
    return _python_of(venv)


def _run(*args: str | Path) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")


def _create(venv: Path, version: str) -> None:
    _run(sys.executable, "-m", "venv", venv)
    pip = (_python_of(venv), "-m", "pip", "install", "--quiet")
    _run(*pip, f"agentscope=={version}", *EXTRAS.get(version, ()), *_pins())
    # The project's code without the server's dependencies (mem0, qdrant, ...): the adapters
    # and the gRPC client import only what CLIENT_REQUIREMENTS provides.
    _run(*pip, "--no-deps", "-e", REPO)
    # Fail here, with the reason, rather than in the first test that uses the environment.
    _run(_python_of(venv), "-c", "import agentscope, agentscope_memory.client")


if __name__ == "__main__":
    # `python tests/agentscope_python.py [VERSION...]` builds (or finds) the environments.
    for v in sys.argv[1:] or [AGENTSCOPE_1, AGENTSCOPE_2]:
        print(v, agentscope_python(v))
