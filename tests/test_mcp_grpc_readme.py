"""The README's MCP setup, as written: the generic JSON client configuration (stdio and HTTP
entries) is run with the SDK's clients, and the Java blocks are the example file the Java tests
run. (The AgentScope Python block runs in test_mcp_grpc_agentscope_python.py.)"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import data, http_session

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
JAVA_EXAMPLE = REPO / "clients/java/agentscope1/src/test/java/dev/agentscopememory/examples/McpMemoryExample.java"
KEY = "readme-key-0123456789abcdef"


def readme_block(name: str) -> str:
    """The fenced block right after `<!-- name -->` in the README."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- {re.escape(name)} -->\n```\w*\n(.*?)\n```", text, re.DOTALL)
    assert match, f"README has no block {name}"
    return match.group(1)


def test_readme_java_blocks_are_the_example_the_java_tests_run() -> None:
    source = JAVA_EXAMPLE.read_text(encoding="utf-8")
    for name in ("mcp-java-http", "mcp-java-stdio"):
        region = re.search(rf"// README:{name}-begin\n(.*?)\n\s*// README:{name}-end", source, re.DOTALL)
        assert region, name
        assert textwrap.dedent(region.group(1)) == readme_block(name)


async def test_readme_json_config_works_for_stdio_and_http(server_factory, tmp_path) -> None:
    config = json.loads(readme_block("mcp-json-config"))["mcpServers"]

    stdio = config["agentscope-memory"]
    assert stdio["command"] == "agentscope-memory"
    args = [str(tmp_path / "data") if a == "./data" else a for a in stdio["args"]]
    params = StdioServerParameters(command=str(BIN / stdio["command"]), args=args,
                                   env={**os.environ, "MEM0_TELEMETRY": "False"})
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            added = data(await s.call_tool("add_long_term_memory", {"texts": ["Alice 喜欢乌龙茶"]}))
            assert added["stored"][0]["scope"] == {"user_id": "alice"}

    http = config["agentscope-memory-http"]
    server = await server_factory(mcp_port=0, api_keys={KEY: "readme"})
    url = http["url"].replace("127.0.0.1:8765", f"127.0.0.1:{server.mcp_port}")
    headers = {k: v.replace("<your API key>", KEY) for k, v in http["headers"].items()}
    async with http_session(url, headers) as s:
        added = data(await s.call_tool("add_long_term_memory", {"texts": ["Alice 喜欢乌龙茶"]}))
        assert added["stored"][0]["scope"] == {"user_id": "alice"}
        found = data(await s.call_tool("search_long_term_memory", {"query": "乌龙茶"}))
        assert found["results"][0]["text"] == "Alice 喜欢乌龙茶"
