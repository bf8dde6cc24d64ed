"""Run inside an AgentScope 1.0.21 virtualenv: AgentScope's own MCP clients (HTTP stateful over
streamable HTTP and SSE, HTTP stateless, stdio stateful) list and call the memory tools.

    python agentscope1_mcp_clients.py MCP_BASE_URL API_KEY AGENTSCOPE_MEMORY_EXE DATA_DIR

Prints one JSON object with what each client saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentscope.mcp import HttpStatefulClient, HttpStatelessClient, StdIOStatefulClient
from agentscope.tool import Toolkit


def texts(response: Any) -> list[str]:
    return [block["text"] for block in response.content if block.get("type") == "text"]


async def main(base: str, key: str, exe: str, data_dir: str) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    out: dict[str, Any] = {}

    stateful = HttpStatefulClient(name="memory-http", transport="streamable_http",
                                  url=f"{base}/mcp?user_id=py-user", headers=headers)
    await stateful.connect()
    out["stateful_tools"] = [t.name for t in await stateful.list_tools()]
    toolkit = Toolkit()
    await toolkit.register_mcp_client(stateful)
    out["toolkit_schemas"] = {s["function"]["name"]: s["function"]["parameters"] for s in toolkit.get_json_schemas()}
    add = await stateful.get_callable_function("add_long_term_memory")
    out["added"] = texts(await add(texts=["王五最喜欢的城市是成都"]))
    await stateful.close()

    stateless = HttpStatelessClient(name="memory-stateless", transport="streamable_http",
                                    url=f"{base}/mcp?user_id=py-user", headers=headers)
    out["stateless_tools"] = [t.name for t in await stateless.list_tools()]
    search = await stateless.get_callable_function("search_long_term_memory")
    out["found"] = texts(await search(query="最喜欢的城市", top_k=3))
    bad = await search(query="城市", top_k=0)
    out["bad"] = texts(bad)

    sse = HttpStatefulClient(name="memory-sse", transport="sse", url=f"{base}/sse?user_id=py-user", headers=headers)
    await sse.connect()
    read = await sse.get_callable_function("search_long_term_memory")
    out["sse_found"] = texts(await read(query="成都"))
    await sse.close()

    stdio = StdIOStatefulClient(name="memory-stdio", command=exe,
                                args=["mcp", "--data-dir", data_dir, "--user-id", "py-user"],
                                env={"MEM0_TELEMETRY": "False"})
    await stdio.connect()
    out["stdio_tools"] = [t.name for t in await stdio.list_tools()]
    append = await stdio.get_callable_function("append_working_memory")
    out["stdio_appended"] = texts(await append(working_memory_id="py-chat", messages=[{"role": "user", "text": "你好"}]))
    await stdio.close()

    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
