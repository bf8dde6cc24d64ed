"""MCP over HTTP with API keys: the gRPC keys and tenants, no anonymous access, scope fixed per
connection by the server's `mcp_bind` or the URL, SSE sessions bound to their key."""

from __future__ import annotations

import httpx
import pytest
from mcp_helpers import data, error_text, http_session, sse_session

from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term.engine import Scope

KEY_A = "key-of-tenant-a-0123456789"
KEY_B = "key-of-tenant-b-0123456789"
KEYS = {KEY_A: "tenant-a", KEY_B: "tenant-b"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}}}
ACCEPT = {"accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("headers, reason", [
    ({}, "missing API key"),
    ({"authorization": "Bearer wrong-key-0123456789"}, "unknown API key"),
    ({"x-api-key": "wrong-key-0123456789"}, "unknown API key"),
    ({"authorization": "Basic dXNlcjpwdw=="}, "missing API key"),
])
async def test_no_anonymous_access_when_keys_are_configured(server_factory, headers, reason) -> None:
    server = await server_factory(mcp_port=0, api_keys=KEYS)
    async with httpx.AsyncClient() as http:
        for path in ("/mcp", "/sse"):
            method = "POST" if path == "/mcp" else "GET"
            response = await http.request(method, f"http://127.0.0.1:{server.mcp_port}{path}", json=INIT if method == "POST" else None,
                                          headers={**ACCEPT, **headers})
            assert response.status_code == 401
            assert reason in response.json()["error"]
            assert response.headers["www-authenticate"].startswith("Bearer")


async def test_each_key_sees_its_own_tenant_only(server_factory) -> None:
    server = await server_factory(mcp_port=0, api_keys=KEYS)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    async with http_session(url, {"authorization": f"Bearer {KEY_A}"}) as a:
        added = data(await a.call_tool("add_long_term_memory", {"texts": ["Carol 住在杭州"], "user_id": "carol"}))
        memory_id = added["stored"][0]["id"]
        data(await a.call_tool("append_working_memory", {"working_memory_id": "shared-name", "messages": [
            {"role": "user", "text": "only tenant a"}]}))
    # The same tenant over gRPC sees it.
    async with AsyncLongTermClient(server.address, api_key=KEY_A) as client:
        assert [i.text for i in await client.list(Scope(user_id="carol"))] == ["Carol 住在杭州"]
    # `Token` as mem0's clients send it, for tenant B: nothing of A's, and A's id is "not found".
    async with http_session(url, {"authorization": f"Token {KEY_B}"}) as b:
        for tool in ("get_long_term_memory", "update_long_term_memory", "delete_long_term_memory",
                     "get_long_term_memory_history"):
            args = {"memory_id": memory_id, **({"text": "hijacked"} if tool.startswith("update") else {})}
            assert error_text(await b.call_tool(tool, args)).startswith("Not found:"), tool
        assert data(await b.call_tool("search_long_term_memory", {"query": "杭州", "user_id": "carol"}))["results"] == []
        assert error_text(await b.call_tool("read_working_memory", {"working_memory_id": "shared-name"})).startswith("Not found:")
        with pytest.raises(Exception, match="does not exist"):
            await b.read_resource("agentscope-memory://working-memory/shared-name")
    # Nothing of A's changed.
    async with http_session(url, {"x-api-key": KEY_A}) as a:
        assert data(await a.call_tool("get_long_term_memory", {"memory_id": memory_id}))["memory"]["text"] == "Carol 住在杭州"


async def test_scope_fixed_by_server_setting_and_url(server_factory) -> None:
    server = await server_factory(mcp_port=0, mcp_bind={"agent_name": "assistant"})
    base = f"http://127.0.0.1:{server.mcp_port}/mcp"
    async with http_session(f"{base}?user_id=dave") as dave:
        schema = {t.name: t.inputSchema for t in (await dave.list_tools()).tools}["search_long_term_memory"]
        assert set(schema["properties"]) == {"query", "top_k", "filters", "run_name"}
        added = data(await dave.call_tool("add_long_term_memory", {"texts": ["Dave 喜欢爵士乐"]}))
        assert added["stored"][0]["scope"] == {"user_id": "dave", "agent_name": "assistant"}
        dave_id = added["stored"][0]["id"]
        moved = error_text(await dave.call_tool("search_long_term_memory", {"query": "音乐", "user_id": "erin"}))
        assert moved == "Invalid argument user_id: is fixed to 'dave' for this connection; leave it out"
    async with http_session(f"{base}?user_id=erin") as erin:
        assert data(await erin.call_tool("search_long_term_memory", {"query": "爵士乐"}))["results"] == []
        # Another user's memory by id is reported like a missing one, and stays unchanged.
        assert error_text(await erin.call_tool("delete_long_term_memory", {"memory_id": dave_id})).startswith("Not found:")
    async with http_session(f"{base}?user_id=dave") as dave:
        assert data(await dave.call_tool("get_long_term_memory", {"memory_id": dave_id}))["memory"]["text"] == "Dave 喜欢爵士乐"
    async with httpx.AsyncClient() as http:
        for query, message in (("agent_name=other", "is fixed to 'assistant'"), ("userid=x", "is not a connection parameter")):
            response = await http.post(f"{base}?{query}", json=INIT, headers=ACCEPT)
            assert response.status_code == 400 and message in response.json()["error"]


async def test_sse_for_older_clients_keeps_its_key_and_scope(server_factory) -> None:
    server = await server_factory(mcp_port=0, api_keys=KEYS)
    url = f"http://127.0.0.1:{server.mcp_port}/sse?user_id=frank"
    async with sse_session(url, {"x-api-key": KEY_A}) as s:
        added = data(await s.call_tool("add_long_term_memory", {"texts": ["Frank drives an electric car"]}))
        assert added["stored"][0]["scope"] == {"user_id": "frank"}
        found = data(await s.call_tool("search_long_term_memory", {"query": "what car", "top_k": 1}))
        assert found["results"][0]["text"] == "Frank drives an electric car"
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp?user_id=frank", {"x-api-key": KEY_B}) as other:
        assert data(await other.call_tool("search_long_term_memory", {"query": "what car"}))["results"] == []


async def test_a_session_serves_only_the_tenant_that_opened_it(server_factory) -> None:
    # A session id travels in a header and logs; another tenant's key that learns it must
    # neither end the session (DELETE), take its event stream (GET) nor post into it.
    server = await server_factory(mcp_port=0, api_keys=KEYS)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    async with httpx.AsyncClient(timeout=30) as http:
        opened = await http.post(url, json=INIT, headers={**ACCEPT, "x-api-key": KEY_A})
        session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        b = {**ACCEPT, **session, "authorization": f"Bearer {KEY_B}"}
        assert (await http.delete(url, headers=b)).status_code == 404
        assert (await http.post(url, json=ping, headers=b)).status_code == 404
        assert (await http.get(url, headers=b)).status_code == 404
        # The session is still A's and still open.
        answer = await http.post(url, json=ping, headers={**ACCEPT, **session, "x-api-key": KEY_A})
        assert answer.status_code == 200 and '"result":{}' in answer.text
        assert (await http.delete(url, headers={**ACCEPT, **session, "authorization": f"Token {KEY_A}"})).status_code == 200


@pytest.mark.parametrize("query, message", [
    # A URL templated with a user that was missing: the scope must not be left open.
    ("user_id=", "user_id: must not be empty"),
    ("user_id=alice&agent_name=", "agent_name: must not be empty"),
    # Which user was meant? The last one used to win silently.
    ("user_id=alice&user_id=mallory", "user_id: is given more than once"),
    # Not UTF-8: it used to become U+FFFD, a user nobody meant.
    ("user_id=%FF", "invalid MCP URL"),
])
async def test_a_url_that_does_not_say_one_scope_is_refused(server_factory, query, message) -> None:
    server = await server_factory(mcp_port=0)
    async with httpx.AsyncClient() as http:
        response = await http.post(f"http://127.0.0.1:{server.mcp_port}/mcp?{query}", json=INIT, headers=ACCEPT)
        assert response.status_code == 400 and message in response.json()["error"], response.text
