"""Memories as MCP resources: templates, listing (paged by cursor), reading pages through
`next_page_uri`, the connection's fixed scope, and errors for unknown or malformed URIs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import ClientSession
from mcp.shared.exceptions import McpError
from mcp_helpers import data, http_session

from agentscope_memory.client import AsyncMemoryClient


async def _read(s: ClientSession, uri: str) -> dict[str, Any]:
    result = await s.read_resource(uri)  # type: ignore[arg-type]
    content = result.contents[0]
    assert content.mimeType == "application/json"
    return json.loads(content.text)  # type: ignore[union-attr]


async def test_templates_and_working_memory_pages(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        templates = {t.uriTemplate for t in (await s.list_resource_templates()).resourceTemplates}
        assert templates == {"agentscope-memory://working-memory/{working_memory_id}",
                             "agentscope-memory://long-term{?user_id,agent_name,run_name}"}
        data(await s.call_tool("append_working_memory", {"working_memory_id": "chat.1", "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "text": f"消息 {i}"} for i in range(7)]}))
        uri = "agentscope-memory://working-memory/chat.1?page_size=3"
        texts: list[str] = []
        pages = 0
        while uri:
            page = await _read(s, uri)
            assert page["total_size"] == 7 and page["working_memory_id"] == "chat.1"
            texts += [m["text"] for m in page["messages"]]
            pages += 1
            uri = page.get("next_page_uri", "")
        assert (pages, texts) == (3, [f"消息 {i}" for i in range(7)])
        whole = await _read(s, "agentscope-memory://working-memory/chat.1")
        assert whole["messages"][-1] == {**whole["messages"][-1], "role": "user", "text": "消息 6"}
        assert "next_page_uri" not in whole


async def test_long_term_pages_and_listing(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with AsyncMemoryClient(server.address) as client:
        for i in range(105):
            await client.create_memory(f"m-{i:03d}")
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp?user_id=grace") as s:
        data(await s.call_tool("add_long_term_memory", {"texts": [f"Grace 的第{i}个偏好" for i in range(5)]}))
        listed = await s.list_resources()
        uris = [str(r.uri) for r in listed.resources]
        assert uris[0] == "agentscope-memory://long-term?user_id=grace"
        assert uris[1] == "agentscope-memory://working-memory/m-000" and len(uris) == 101
        assert listed.nextCursor
        rest = await s.list_resources(listed.nextCursor)
        assert [str(r.uri) for r in rest.resources] == [f"agentscope-memory://working-memory/m-{i}" for i in (100, 101, 102, 103, 104)]
        assert rest.nextCursor is None

        uri = "agentscope-memory://long-term?user_id=grace&page_size=2"
        texts: list[str] = []
        while uri:
            page = await _read(s, uri)
            assert page["scope"] == {"user_id": "grace"}
            texts += [m["text"] for m in page["memories"]]
            uri = page.get("next_page_uri", "")
        assert sorted(texts) == sorted(f"Grace 的第{i}个偏好" for i in range(5))
        # This connection is grace's: another user's scope is not there.
        with pytest.raises(McpError, match="no long-term memories for user_id='heidi'"):
            await _read(s, "agentscope-memory://long-term?user_id=heidi")


BAD_URIS = [
    ("agentscope-memory://working-memory/missing", "Not found: memory 'missing' does not exist"),
    ("agentscope-memory://working-memory/chat?page_size=0", "page_size: is '0'; must be a whole number from 1 to 100"),
    ("agentscope-memory://working-memory/chat?page_token=forged", "Invalid argument page_token"),
    ("agentscope-memory://working-memory/chat?limit=3", "Invalid argument limit: is not a parameter"),
    ("agentscope-memory://working-memory/%2E%2E", "Invalid argument working_memory_id"),
    ("agentscope-memory://working-memory/%ff%fe", "Invalid argument working_memory_id: is not percent-encoded UTF-8"),
    ("agentscope-memory://working-memory/chat%E4", "Invalid argument working_memory_id: is not percent-encoded UTF-8"),
    ("agentscope-memory://long-term", "Invalid argument uri: at least one of agent_name, user_id or run_name"),
    ("agentscope-memory://long-term?user_id=u&page_token=forged", "Invalid argument page_token"),
    ("agentscope-memory://elsewhere/x", "Not found: unknown resource"),
    ("file:///etc/passwd", "Not found: unknown resource"),
]


async def test_bad_resource_uris_are_errors_not_crashes(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        data(await s.call_tool("append_working_memory", {"working_memory_id": "chat", "messages": [{"role": "user", "text": "x"}]}))
        for uri, message in BAD_URIS:
            with pytest.raises(McpError) as raised:
                await _read(s, uri)
            assert message in raised.value.error.message, uri
        assert len((await s.list_tools()).tools) == 9


async def test_a_forged_cursor_is_refused_by_its_mcp_name(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        with pytest.raises(McpError) as raised:
            await s.list_resources("not-a-cursor")
        # The client sent `cursor`; the message used to name `page_token`, which it never sent.
        assert raised.value.error.message.startswith("Invalid argument cursor: invalid or expired"), raised.value.error
        assert (await s.list_resources()).nextCursor is None
