"""The README's mem0 REST and AgentScope-Python examples, run as written (only the address
changes to the test server's)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
README_URL = "http://127.0.0.1:8000"


def readme_example(name: str) -> str:
    """The code block after `<!-- readme-example: NAME -->` in the README."""
    match = re.search(rf"<!-- readme-example: {re.escape(name)} -->\n```\w*\n(.*?)```", README.read_text(), re.DOTALL)
    assert match, f"README has no example {name!r}"
    return match.group(1)


@pytest.mark.needs(shutil.which("curl") is not None, "curl is not installed")
async def test_readme_curl_session(server_factory) -> None:
    server = await server_factory(mem0_rest_port=0)
    script = readme_example("curl").replace(README_URL, f"http://127.0.0.1:{server.mem0_rest_port}")
    proc = await asyncio.create_subprocess_exec("bash", "-euo", "pipefail", "-c", script, env=dict(os.environ),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    # curl -s prints each answer without a newline: read the JSON values one after another.
    decoder, text, values = json.JSONDecoder(), out.decode().strip(), []
    while text:
        value, end = decoder.raw_decode(text)
        values.append(value)
        text = text[end:].strip()
    added, found = values
    assert [r["memory"] for r in added["results"]] == ["I like green tea"]
    assert found["results"][0]["memory"] == "I like green tea"
