"""No MCP answer exceeds 4 MiB, whatever is stored: listings page by bytes as well as by count,
echoes and searches cut their tail (and say so), and following the pages still gives everything
once."""

from __future__ import annotations

import json
from typing import Any

import httpx

LIMIT = 4 * 1024 * 1024
ACCEPT = {"accept": "application/json, text/event-stream"}
# 65,536 characters whose JSON is six times as long in a tool result (`\"` in the structured
# content, `\\\"` in the text content): 384 KiB each, so a dozen outgrow 4 MiB.
QUOTES = '"' * (64 * 1024 - 8)


class RawSession:
    """A streamable HTTP session that sees each answer's size on the wire."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url, self.headers, self.next_id = http, url, dict(ACCEPT), 1

    async def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
        self.next_id += 1
        response = await self.http.post(self.url, json={"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                                        "params": params}, headers=self.headers)
        assert response.status_code == 200, response.text[:300]
        body = response.text
        if response.headers["content-type"].startswith("text/event-stream"):
            body = next(line[len("data: "):] for line in body.splitlines() if line.startswith("data: ") and '"id"' in line)
        answer = json.loads(body)
        assert "error" not in answer, answer["error"]
        return answer["result"], len(body.encode("utf-8"))

    async def open(self) -> None:
        result, _ = await self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                      "clientInfo": {"name": "limits", "version": "1"}})
        assert result["serverInfo"]["name"] == "agentscope-memory"

    async def call(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
        result, size = await self.request("tools/call", {"name": tool, "arguments": arguments})
        assert not result["isError"], result["content"][0]["text"][:300]
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        return result["structuredContent"], size


async def _session(http: httpx.AsyncClient, url: str) -> RawSession:
    session = RawSession(http, url)
    response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "limits", "version": "1"}}},
        headers=ACCEPT)
    session.headers.update({"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
    return session


async def test_no_tool_answer_or_resource_page_exceeds_4_mib(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    texts = [f"{i:02d}{QUOTES}" for i in range(12)]
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=600)) as http:
        s = await _session(http, url)
        added, size = await s.call("add_long_term_memory", {"texts": texts, "user_id": "ivan"})
        assert size <= LIMIT
        assert added["stored_count"] == 12 and 0 < len(added["stored"]) < 12
        assert "list_long_term_memories lists them all" in added["note"]

        found, size = await s.call("search_long_term_memory", {"query": "quotes", "user_id": "ivan", "top_k": 50})
        assert size <= LIMIT and 0 < len(found["results"]) < 12 and "top_k" in found["note"]

        listed: list[str] = []
        token, pages = "", 0
        while True:
            page, size = await s.call("list_long_term_memories", {"user_id": "ivan", "page_size": 100,
                                                                  **({"page_token": token} if token else {})})
            assert size <= LIMIT
            listed += [m["text"] for m in page["memories"]]
            pages += 1
            token = page["next_page_token"]
            if not token:
                break
        assert pages > 1 and sorted(listed) == texts

        uri, read = "agentscope-memory://long-term?user_id=ivan&page_size=100", []
        while uri:
            result, size = await s.request("resources/read", {"uri": uri})
            assert size <= LIMIT
            content = json.loads(result["contents"][0]["text"])
            read += [m["text"] for m in content["memories"]]
            uri = content.get("next_page_uri", "")
        assert sorted(read) == texts

        # A history of long updates, and a conversation of long messages.
        memory_id = added["stored"][0]["id"]
        for i in range(6):
            await s.call("update_long_term_memory", {"memory_id": memory_id, "text": f"v{i}{QUOTES}"})
        for i in range(12):
            await s.call("append_working_memory", {"working_memory_id": "长对话", "messages": [
                {"role": "user", "text": f"{i:02d}{QUOTES}"}]})
        changes, token = [], ""
        while True:
            page, size = await s.call("get_long_term_memory_history", {"memory_id": memory_id,
                                                                       **({"page_token": token} if token else {})})
            assert size <= LIMIT
            # (background importance scoring adds ASSESS entries of its own)
            changes += [(c["event"], (c["new_text"] or "")[:2]) for c in page["history"] if c["event"] != "ASSESS"]
            token = page["next_page_token"]
            if not token:
                break
        assert changes == [("ADD", "00")] + [("UPDATE", f"v{i}") for i in range(6)]
        said, token = [], ""
        while True:
            page, size = await s.call("read_working_memory", {"working_memory_id": "长对话", "page_size": 100,
                                                              **({"page_token": token} if token else {})})
            assert size <= LIMIT and page["total_size"] == 12
            said += [m["text"][:2] for m in page["messages"]]
            token = page["next_page_token"]
            if not token:
                break
        assert said == [f"{i:02d}" for i in range(12)]
        uri, said = "agentscope-memory://working-memory/%E9%95%BF%E5%AF%B9%E8%AF%9D?page_size=100", []
        while uri:
            result, size = await s.request("resources/read", {"uri": uri})
            assert size <= LIMIT
            content = json.loads(result["contents"][0]["text"])
            said += [m["text"][:2] for m in content["messages"]]
            uri = content.get("next_page_uri", "")
        assert said == [f"{i:02d}" for i in range(12)]


async def test_a_message_too_large_for_one_answer_comes_cut_and_marked(server_factory) -> None:
    # gRPC takes a message of almost 4 MiB; as MCP JSON (twice, once inside a string) its text
    # costs several times that. A page always carries its first message, so the text is cut.
    from agentscope_memory.client import AsyncMemoryClient
    from agentscope_memory.message import Msg, MsgRole

    server = await server_factory(mcp_port=0)
    huge = '"' * 3_000_000
    async with AsyncMemoryClient(server.address, timeout=60) as client:
        await client.create_memory("大文件")
        await client.add_messages("大文件", [Msg.create(MsgRole.USER, "before"), Msg.create(MsgRole.TOOL, huge),
                                           Msg.create(MsgRole.USER, "after")])
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, read=600)) as http:
        s = await _session(http, f"http://127.0.0.1:{server.mcp_port}/mcp")
        seen, token = [], ""
        while True:
            page, size = await s.call("read_working_memory", {"working_memory_id": "大文件",
                                                              **({"page_token": token} if token else {})})
            assert size <= LIMIT
            seen += page["messages"]
            token = page["next_page_token"]
            if not token:
                break
        assert [m["text"][:6] for m in seen] == ["before", '""""""', "after"]
        big = seen[1]
        assert big["text_truncated"] is True and big["text_length"] == len(huge)
        assert 100_000 < len(big["text"]) < len(huge) and huge.startswith(big["text"])
        assert "text_truncated" not in seen[0] and "text_truncated" not in seen[2]
        uri, read = "agentscope-memory://working-memory/%E5%A4%A7%E6%96%87%E4%BB%B6", []
        while uri:
            result, size = await s.request("resources/read", {"uri": uri})
            assert size <= LIMIT
            content = json.loads(result["contents"][0]["text"])
            read += content["messages"]
            uri = content.get("next_page_uri", "")
        assert [m.get("text_truncated", False) for m in read] == [False, True, False]


def _wire_size(result: Any) -> int:
    """A result's bytes as the MCP server writes it (JSON, not ASCII-escaped)."""
    return len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True),
                          ensure_ascii=False).encode("utf-8"))


async def test_pages_through_target_are_cut_to_4_mib_as_in_process_ones(server_factory) -> None:
    # `mcp --target` forwards to a gRPC server whose pages are sized for gRPC (stored bytes), not
    # for MCP's JSON: they are cut again, and following the pages gives everything once.
    from mcp_helpers import data
    from test_mcp_grpc_stdio import stdio_session

    from agentscope_memory.client import AsyncLongTermClient, AsyncMemoryClient
    from agentscope_memory.long_term import Scope
    from agentscope_memory.message import Msg, MsgRole

    server = await server_factory()
    async with AsyncMemoryClient(server.address, timeout=60) as memories, \
            AsyncLongTermClient(server.address, timeout=60) as long_term:
        await memories.create_memory("长对话")
        for i in range(12):
            await memories.add_message("长对话", Msg.create(MsgRole.USER, f"{i:02d}{QUOTES}"))
        [memory] = await long_term.record(Scope(user_id="ivan"), [Msg.create(MsgRole.USER, f"00{QUOTES}")])
        for i in range(6):
            await long_term.update(memory.id, f"v{i}{QUOTES}")
    async with stdio_session("--target", server.address) as s:
        said, token, pages = [], "", 0
        while True:
            result = await s.call_tool("read_working_memory", {"working_memory_id": "长对话", "page_size": 100,
                                                               **({"page_token": token} if token else {})})
            assert _wire_size(result) <= LIMIT
            page = data(result)
            assert page["total_size"] == 12
            said += [m["text"][:2] for m in page["messages"]]
            token, pages = page["next_page_token"], pages + 1
            if not token:
                break
        assert said == [f"{i:02d}" for i in range(12)] and pages > 1
        from mcp_helpers import error_text
        forged = error_text(await s.call_tool("read_working_memory", {"working_memory_id": "长对话",
                                                                      "page_token": "~99~"}))
        assert "page_token" in forged and "invalid or expired" in forged
        uri, said = "agentscope-memory://working-memory/%E9%95%BF%E5%AF%B9%E8%AF%9D?page_size=100", []
        while uri:
            read = await s.read_resource(uri)  # type: ignore[arg-type]
            assert _wire_size(read) <= LIMIT
            content = json.loads(read.contents[0].text)  # type: ignore[union-attr]
            said += [m["text"][:2] for m in content["messages"]]
            uri = content.get("next_page_uri", "")
        assert said == [f"{i:02d}" for i in range(12)]
        changes, token = [], ""
        while True:
            result = await s.call_tool("get_long_term_memory_history", {"memory_id": memory.id,
                                                                         **({"page_token": token} if token else {})})
            assert _wire_size(result) <= LIMIT
            page = data(result)
            changes += [(c["event"], (c["new_text"] or "")[:2]) for c in page["history"] if c["event"] != "ASSESS"]
            token = page["next_page_token"]
            if not token:
                break
        assert changes == [("ADD", "00")] + [("UPDATE", f"v{i}") for i in range(6)]
