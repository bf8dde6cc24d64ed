"""Helpers for the MCP tests: the `mcp` SDK's own clients against a real server."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult


@contextlib.asynccontextmanager
async def http_session(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """An initialised MCP session over streamable HTTP."""
    async with (
        httpx.AsyncClient(headers=headers or {}, timeout=httpx.Timeout(60, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@contextlib.asynccontextmanager
async def sse_session(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    async with sse_client(url, headers=headers, timeout=30) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def data(result: CallToolResult) -> Any:
    """A successful tool result's JSON (text and structured content agree)."""
    assert not result.isError, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    parsed = json.loads(text)
    assert parsed == result.structuredContent
    return parsed


def error_text(result: CallToolResult) -> str:
    assert result.isError, result
    return result.content[0].text  # type: ignore[union-attr]
