"""AgentScope Python 1.0.21's own MCP clients (unchanged, in their own virtualenv) against the
server: HTTP stateful (streamable HTTP and SSE), HTTP stateless and stdio list and call the
tools; and the README's AgentScope Python block runs as written."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from agentscope_python import AGENTSCOPE_1, agentscope_python
from test_mcp_grpc_readme import readme_block

from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term.engine import Scope

pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parent / "agentscope_scripts"
EXE = str(Path(sys.executable).with_name("agentscope-memory"))
KEY = "agentscope-python-key-0123456789"
TOOLS = ["add_long_term_memory", "search_long_term_memory", "list_long_term_memories", "get_long_term_memory",
         "update_long_term_memory", "delete_long_term_memory", "get_long_term_memory_history",
         "read_working_memory", "append_working_memory"]


async def _run(python: Path, *args: str, timeout: float = 300) -> str:
    process = await asyncio.create_subprocess_exec(
        str(python), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode == 0, err.decode(errors="replace")[-4000:]
    return out.decode()


@pytest.fixture(scope="module")
def python() -> Path:
    return agentscope_python(AGENTSCOPE_1)


async def test_agentscope_mcp_clients_list_and_call_the_tools(server_factory, python, tmp_path) -> None:
    server = await server_factory(mcp_port=0, api_keys={KEY: "aspy"})
    out = json.loads((await _run(python, str(SCRIPTS / "agentscope1_mcp_clients.py"),
                                 f"http://127.0.0.1:{server.mcp_port}", KEY, EXE, str(tmp_path / "stdio-data"))).splitlines()[-1])
    assert out["stateful_tools"] == TOOLS and out["stateless_tools"] == TOOLS and out["stdio_tools"] == TOOLS
    # What the model gets from AgentScope's Toolkit: our schema, the fixed user left out.
    add = out["toolkit_schemas"]["add_long_term_memory"]
    assert add["required"] == ["texts"] and "user_id" not in add["properties"]
    assert json.loads(out["added"][0])["stored"][0]["text"] == "王五最喜欢的城市是成都"
    assert json.loads(out["found"][0])["results"][0]["text"] == "王五最喜欢的城市是成都"
    assert json.loads(out["sse_found"][0])["results"][0]["text"] == "王五最喜欢的城市是成都"
    assert out["bad"] == ["Invalid argument top_k: is 0; must be from 1 to 50"]
    assert json.loads(out["stdio_appended"][0])["total_size"] == 1
    # Stored for the key's tenant, in the connection's scope.
    async with AsyncLongTermClient(server.address, api_key=KEY) as client:
        assert [i.text for i in await client.list(Scope(user_id="py-user"))] == ["王五最喜欢的城市是成都"]


async def test_readme_agentscope_python_block_runs_as_written(server_factory, python, tmp_path) -> None:
    key = "readme-python-key-0123456789"
    server = await server_factory(mcp_port=0, api_keys={key: "readme"})
    code = (readme_block("mcp-agentscope-python")
            .replace("127.0.0.1:8765", f"127.0.0.1:{server.mcp_port}")
            .replace("<your API key>", key))
    script = tmp_path / "readme_example.py"
    script.write_text(code, encoding="utf-8")
    out = await _run(python, str(script))
    assert "Alice 喜欢乌龙茶" in out
    async with AsyncLongTermClient(server.address, api_key=key) as client:
        assert [i.text for i in await client.list(Scope(user_id="alice"))] == ["Alice 喜欢乌龙茶"]
