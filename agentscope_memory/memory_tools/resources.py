"""Memories as MCP resources: the URI scheme and what reading one returns.

    agentscope-memory://working-memory/{working_memory_id}[?page_size=N&page_token=T]
        a working memory's messages, oldest first (newest last), a page at a time
    agentscope-memory://long-term?user_id=U&agent_name=A&run_name=R[&page_size=N&page_token=T]
        a scope's long-term memories, oldest first, a page at a time

Ids are percent-encoded (UTF-8). A page's JSON names the URI of the next page
(`next_page_uri`, absent on the last page), so a client pages by reading it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.ids import check_id
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.memory_tools.access import MemoryAccess
from agentscope_memory.memory_tools.budget import RESULT_BUDGET, fit_text, resource_cost
from agentscope_memory.memory_tools.connection import Connection
from agentscope_memory.memory_tools.tools import (
    MAX_PAGE_SIZE,
    item_json,
    list_page,
    message_json,
)

SCHEME = "agentscope-memory"
WORKING = "working-memory"
LONG_TERM = "long-term"
WORKING_TEMPLATE = f"{SCHEME}://{WORKING}/{{working_memory_id}}"
LONG_TERM_TEMPLATE = f"{SCHEME}://{LONG_TERM}{{?user_id,agent_name,run_name}}"
DEFAULT_PAGE_SIZE = 50
MIME = "application/json"


@dataclass(frozen=True)
class ResourceInfo:
    uri: str
    name: str
    description: str


def working_memory_uri(memory_id: str, page_size: int = 0, page_token: str = "") -> str:
    query = {k: v for k, v in (("page_size", str(page_size) if page_size else ""), ("page_token", page_token)) if v}
    return f"{SCHEME}://{WORKING}/{quote(memory_id, safe='')}" + (f"?{urlencode(query)}" if query else "")


def long_term_uri(scope: Scope, page_size: int = 0, page_token: str = "") -> str:
    query = {k: v for k, v in (
        ("user_id", scope.user_id), ("agent_name", scope.agent_name), ("run_name", scope.run_name),
        ("page_size", str(page_size) if page_size else ""), ("page_token", page_token),
    ) if v}
    return f"{SCHEME}://{LONG_TERM}?{urlencode(query)}"


def _page_size(params: dict[str, str]) -> int:
    raw = params.get("page_size", "")
    if not raw:
        return DEFAULT_PAGE_SIZE
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE_SIZE:
        raise InvalidArgumentError("page_size", f"is {raw!r}; must be a whole number from 1 to {MAX_PAGE_SIZE}")
    return int(raw)


async def read_resource(access: MemoryAccess, conn: Connection, uri: str) -> dict[str, Any]:
    """The JSON of one resource page. Raises `NotFoundError` for a URI outside this scheme or
    outside the connection's fixed scope, `InvalidArgumentError` for a malformed one."""
    parts = urlsplit(uri)
    if parts.scheme != SCHEME:
        raise NotFoundError(f"unknown resource {uri!r}; URIs start with {SCHEME}://")
    try:
        params = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query), errors="strict"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError("uri", f"has a malformed query: {exc}") from exc
    allowed_paging = {"page_size", "page_token"}
    if parts.netloc == WORKING:
        try:
            memory_id = unquote(parts.path.lstrip("/"), errors="strict")
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError("working_memory_id", f"is not percent-encoded UTF-8 ({exc.reason})") from exc
        check_id(memory_id, "working_memory_id")
        if conn.working_memory_id and memory_id != conn.working_memory_id:
            raise NotFoundError(f"working memory {memory_id!r} does not exist")
        for name in set(params) - allowed_paging:
            raise InvalidArgumentError(name, "is not a parameter of working-memory URIs; use page_size and page_token")
        size = _page_size(params)
        page = await access.read_messages(memory_id, size, params.get("page_token", ""),
                                          (lambda m: resource_cost(message_json(m)), RESULT_BUDGET))
        out: dict[str, Any] = {
            "working_memory_id": memory_id,
            "messages": [fit_text(message_json(m), resource_cost) for m in page.messages],
            "total_size": page.total_size,
        }
        if page.next_page_token:
            out["next_page_uri"] = working_memory_uri(memory_id, size, page.next_page_token)
        return out
    if parts.netloc == LONG_TERM and parts.path in ("", "/"):
        for name in set(params) - allowed_paging - {"user_id", "agent_name", "run_name"}:
            raise InvalidArgumentError(name, "is not a parameter of long-term URIs; use user_id, agent_name, run_name, page_size, page_token")
        values = {k: params.get(k, "") for k in ("user_id", "agent_name", "run_name")}
        for name, fixed in conn.fixed_scope.items():
            if values[name] and values[name] != fixed:
                raise NotFoundError(f"no long-term memories for {name}={values[name]!r} on this connection")
            values[name] = fixed
        scope = Scope(values["agent_name"], values["user_id"], values["run_name"]).validate("uri")
        size = _page_size(params)
        items, token = await list_page(access, scope, size, params.get("page_token", ""), resource_cost)
        out = {"scope": {k: v for k, v in values.items() if v}, "memories": [item_json(i) for i in items]}
        if token:
            out["next_page_uri"] = long_term_uri(scope, size, token)
        return out
    raise NotFoundError(f"unknown resource {uri!r}; see the resource templates for the URI scheme")


def resource_text(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1)


async def list_resources(access: MemoryAccess, conn: Connection, cursor: str) -> tuple[list[ResourceInfo], str]:
    """The connection's memories as concrete resources: its fixed scope's long-term memories
    (when the scope is fixed) and its working memories (only the fixed one, when fixed)."""
    out: list[ResourceInfo] = []
    if not cursor and conn.fixed_scope:
        fixed = conn.fixed_scope
        scope = Scope(fixed.get("agent_name", ""), fixed.get("user_id", ""), fixed.get("run_name", ""))
        label = ", ".join(f"{k}={v}" for k, v in fixed.items())
        out.append(ResourceInfo(long_term_uri(scope), f"long-term memories ({label})",
                                "The long-term memories of this connection's scope, oldest first, paged."))
    if conn.working_memory_id:
        if not cursor:
            out.append(ResourceInfo(working_memory_uri(conn.working_memory_id), f"working memory {conn.working_memory_id}",
                                    "The conversation's messages, oldest first, paged."))
        return out, ""
    try:
        page = await access.list_working_memories(100, cursor)
    except InvalidArgumentError as exc:
        if exc.field != "page_token":
            raise
        # The client sent MCP's `cursor`; a message naming `page_token` would leave it guessing.
        raise InvalidArgumentError("cursor", f"{exc.reason}; send the nextCursor of the previous page, "
                                             "or none for the first") from None
    for m in page.memories:
        out.append(ResourceInfo(working_memory_uri(m.memory_id), f"working memory {m.memory_id}",
                                f"{m.message_count} messages ({m.kind}), oldest first, paged."))
    return out, page.next_page_token
