"""MCP protocol versions and sessions: `2024-11-05` (what AgentScope-Java's client offers) and the
newest the SDK supports are both negotiated and served; concurrent sessions stay apart."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import mcp.types
import pytest
from mcp_helpers import data, http_session

ACCEPT = {"accept": "application/json, text/event-stream"}


def _rpc(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a streamable HTTP response (a JSON body or one SSE event)."""
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return json.loads(line[5:])
    raise AssertionError(response.text)


async def _session(http: httpx.AsyncClient, url: str, version: str) -> tuple[str, dict[str, Any]]:
    response = await http.post(url, headers=ACCEPT, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    result = _rpc(response)["result"]
    session_id = response.headers["mcp-session-id"]
    await http.post(url, headers={**ACCEPT, "mcp-session-id": session_id},
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session_id, result


@pytest.mark.parametrize("offered, agreed", [
    ("2024-11-05", "2024-11-05"),  # AgentScope-Java 1.x's MCP client (MCP Java SDK 0.17)
    (mcp.types.LATEST_PROTOCOL_VERSION, mcp.types.LATEST_PROTOCOL_VERSION),
    ("2099-01-01", mcp.types.LATEST_PROTOCOL_VERSION),  # unknown: the server proposes its newest
])
async def test_protocol_versions_are_negotiated_and_served(server_factory, offered, agreed) -> None:
    server = await server_factory(mcp_port=0)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    async with httpx.AsyncClient(timeout=60) as http:
        session_id, result = await _session(http, url, offered)
        assert result["protocolVersion"] == agreed
        assert result["serverInfo"]["name"] == "agentscope-memory"
        assert {"tools", "resources"} <= set(result["capabilities"])
        if agreed != offered:
            return
        headers = {**ACCEPT, "mcp-session-id": session_id, "mcp-protocol-version": agreed}
        tools = _rpc(await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        assert len(tools["result"]["tools"]) == 9
        call = _rpc(await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "append_working_memory",
            "arguments": {"working_memory_id": f"v-{offered}", "messages": [{"role": "user", "text": "版本"}]}}}))
        assert call["result"]["isError"] is False
        assert json.loads(call["result"]["content"][0]["text"])["total_size"] == 1


async def test_concurrent_sessions_each_get_their_own_answers(server_factory) -> None:
    server = await server_factory(mcp_port=0)

    async def one(i: int) -> list[str]:
        async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
            for j in range(5):
                data(await s.call_tool("append_working_memory", {"working_memory_id": f"chat-{i}", "messages": [
                    {"role": "user", "text": f"会话{i}的第{j}条"}]}))
            page = data(await s.call_tool("read_working_memory", {"working_memory_id": f"chat-{i}", "page_size": 100}))
            return [m["text"] for m in page["messages"]]

    results = await asyncio.gather(*(one(i) for i in range(8)))
    for i, texts in enumerate(results):
        assert texts == [f"会话{i}的第{j}条" for j in range(5)]


async def test_a_failing_call_does_not_end_the_session(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        for _ in range(3):
            assert (await s.call_tool("no_such_tool", {})).isError
            assert (await s.call_tool("read_working_memory", {"working_memory_id": "../etc"})).isError
        assert len((await s.list_tools()).tools) == 9


async def test_a_body_that_is_not_utf8_or_is_nested_too_deeply_is_a_parse_error(server_factory) -> None:
    # The SDK answered both with HTTP 500 ("Error handling POST request"); they are the
    # client's mistake: JSON-RPC -32700 with the reason, and the session goes on.
    server = await server_factory(mcp_port=0)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    async with httpx.AsyncClient(timeout=30) as http:
        session_id, _ = await _session(http, url, mcp.types.LATEST_PROTOCOL_VERSION)
        headers = {**ACCEPT, "mcp-session-id": session_id, "content-type": "application/json"}
        for body, reason in ((b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff"}', "not UTF-8"),
                             (b'{"jsonrpc":"2.0","id":1,"method":"ping","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
                              "nested too deeply")):
            response = await http.post(url, headers=headers, content=body)
            assert response.status_code == 400, response.text
            error = response.json()["error"]
            assert error["code"] == -32700 and reason in error["message"], error
        bad_json = await http.post(url, headers=headers, content=b"{not json")
        assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == -32700
        assert _rpc(await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}))["result"] == {}


@pytest.mark.parametrize("request_id", [None, 1.5, True, {"n": 1}, [1]])
async def test_a_request_with_an_id_mcp_forbids_is_answered_not_ignored(server_factory, request_id) -> None:
    # The SDK took such a request for a notification: HTTP 202 and no answer, ever, so the
    # client waited until its timeout. MCP ids are strings or integers, never null.
    server = await server_factory(mcp_port=0)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    async with httpx.AsyncClient(timeout=30) as http:
        session_id, _ = await _session(http, url, mcp.types.LATEST_PROTOCOL_VERSION)
        headers = {**ACCEPT, "mcp-session-id": session_id}
        response = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": request_id, "method": "ping"})
        assert response.status_code == 400, response.text
        answer = response.json()
        assert answer["id"] is None and answer["error"]["code"] == -32600
        assert "id must be a string or an integer" in answer["error"]["message"]
        # Ids MCP allows, and notifications, are served as before.
        for good in ("请求-1", 7, 0, -3):
            assert _rpc(await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": good, "method": "ping"})) == {
                "jsonrpc": "2.0", "id": good, "result": {}}
        notified = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert notified.status_code == 202


@pytest.mark.parametrize("number, reason", [
    ("NaN", "NaN is not a JSON number"), ("-Infinity", "-Infinity is not a JSON number"),
    ("1e999", "the number 1e999 is out of range"),
])
async def test_a_number_json_does_not_have_is_a_parse_error_not_a_dropped_argument(server_factory, number, reason) -> None:
    # Python's json.dumps writes NaN; the SDK read it (and 1e999) and passed null on, so the
    # importance was dropped without a word and the memory stored without it.
    server = await server_factory(mcp_port=0)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    async with httpx.AsyncClient(timeout=60) as http:
        session_id, _ = await _session(http, url, mcp.types.LATEST_PROTOCOL_VERSION)
        headers = {**ACCEPT, "mcp-session-id": session_id, "content-type": "application/json"}
        body = ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_long_term_memory",'
                '"arguments":{"texts":["Judy 喜欢数学"],"user_id":"judy","importance":%s}}}' % number)
        response = await http.post(url, headers=headers, content=body.encode())
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["code"] == -32700 and error["message"] == f"Parse error: {reason}"
        listed = _rpc(await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "list_long_term_memories", "arguments": {"user_id": "judy"}}}))
        assert listed["result"]["structuredContent"]["memories"] == []
