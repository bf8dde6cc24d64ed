"""MCP over HTTP: streamable HTTP at `/mcp` and, for older clients, SSE at `/sse` (messages
posted to `/messages/`), as one ASGI app served on the optional `mcp_port`.

Every request is authenticated like a gRPC call (same API keys, same tenants; with keys
configured, a request without a known key gets 401 and nothing runs). The URL's query string
may fix the connection's scope (`/mcp?user_id=alice&agent_name=assistant`), within what the
server's `mcp_bind` setting already fixes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Message, Receive, Scope, Send

from agentscope_memory.errors import InvalidArgumentError, UnauthenticatedError
from agentscope_memory.memory_tools import Connection, ServiceAccess
from agentscope_memory.service import Service
from agentscope_memory_server.mcp_server import (
    REQUEST_STATE_KEY,
    Binding,
    build_server,
    session_binding,
)
from agentscope_memory_server.auth_failures import TooManyFailedAuthentications
from agentscope_memory_server.tenancy import ApiKeys

log = logging.getLogger("agentscope_memory_server.mcp")

STREAMABLE_PATH = "/mcp"
SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"

async def _json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())] + (headers or [])})
    await send({"type": "http.response.body", "body": data})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


class _NotJsonNumber(ValueError):
    pass


# Python reads NaN, Infinity and 1e999 where JSON has no such numbers; the SDK then passed them
# on as null, so an argument (an importance, a metadata value) was silently dropped.
def _not_json_number(constant: str) -> float:
    raise _NotJsonNumber(f"{constant} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _NotJsonNumber(f"the number {text[:40]} is out of range")
    return value


def _invalid_id(message: Any) -> str:
    """Why a request's id is not one MCP allows ("" when it is, or the message is no request).
    The SDK took a request with a null, fractional, boolean or structured id for a notification
    (202, no answer), so its client waited for an answer that never came."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return ""
    value = message["id"]
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return ""
    shown = json.dumps(value)
    return f"id must be a string or an integer, not {shown[:40]}; a notification has no id"


class McpHttpApp:
    """The ASGI app. `lifespan()` must run around serving (it runs the streamable HTTP session
    manager's task group)."""

    def __init__(self, service: Service, keys: ApiKeys, bind: Connection | None = None) -> None:
        self.service = service
        self.keys = keys
        self.bind = bind or Connection()
        self.server: Server[Any, Any] = build_server()
        self.manager = StreamableHTTPSessionManager(app=self.server)
        self.sse = SseServerTransport(MESSAGES_PATH)

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    def _binding(self, scope: Scope) -> Binding | tuple[int, str, list[tuple[bytes, bytes]]]:
        client = scope.get("client")
        try:
            tenant = self.keys.authenticate(_headers(scope), client[0] if client else None)
        except UnauthenticatedError as exc:
            return 401, str(exc), [(b"www-authenticate", b'Bearer realm="agentscope-memory"')]
        except TooManyFailedAuthentications as exc:
            return 429, str(exc), [(b"retry-after", str(exc.retry_after).encode())]
        try:
            raw = scope.get("query_string", b"").decode("utf-8")
            pairs = parse_qsl(raw, keep_blank_values=True, errors="strict")
            names = [name for name, _ in pairs]
            twice = next((name for name in names if names.count(name) > 1), None)
            if twice is not None:  # which one was meant? (the last used to win silently)
                raise InvalidArgumentError(twice, "is given more than once")
            params = dict(pairs)
            conn = self.bind.narrowed(Connection.from_params(params, ignore=("session_id",)))
        except (InvalidArgumentError, UnicodeDecodeError) as exc:
            return 400, f"invalid MCP URL: {exc}", []
        return Binding(ServiceAccess(self.service, tenant), conn, tenant)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.rstrip("/") not in (STREAMABLE_PATH, SSE_PATH, MESSAGES_PATH.rstrip("/")):
            await _json(send, 404, {"error": f"no MCP endpoint at {path}; use {STREAMABLE_PATH} (streamable HTTP) or {SSE_PATH} (SSE)"})
            return
        bound = self._binding(scope)
        if not isinstance(bound, Binding):
            status, message, extra = bound
            await _json(send, status, {"error": message}, extra)
            return
        scope.setdefault("state", {})[REQUEST_STATE_KEY] = bound
        # The SDK's transports remember who opened a session and answer 404 to anyone else, but
        # only for an authenticated user in the scope: without it, any key that knew a session
        # id could end (DELETE) or take over the event stream (GET) of another tenant's session.
        scope["user"] = AuthenticatedUser(AccessToken(token="", client_id=bound.tenant, scopes=[]))
        if path.rstrip("/") == STREAMABLE_PATH:
            if scope.get("method") == "POST":
                checked = await self._checked_body(receive, send)
                if checked is None:
                    return
                receive = checked
            await self.manager.handle_request(scope, receive, send)
        elif path.rstrip("/") == SSE_PATH:
            await self._sse_session(bound, scope, receive, send)
        else:
            await self.sse.handle_post_message(scope, receive, send)

    async def _checked_body(self, receive: Receive, send: Send) -> Receive | None:
        """The POSTed body, read whole and replayed to the SDK; None once a JSON-RPC parse
        error or an invalid request id is answered. The SDK catches only JSONDecodeError: a body that is not UTF-8 or
        is nested past Python's recursion limit became an HTTP 500 there."""
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        code = -32700
        try:
            parsed = json.loads(body, parse_constant=_not_json_number, parse_float=_finite_float)
        except _NotJsonNumber as exc:
            reason = str(exc)
        except UnicodeDecodeError as exc:
            reason = f"the body is not UTF-8 ({exc.reason} at byte {exc.start})"
        except RecursionError:
            reason = "the body is nested too deeply"
        except ValueError:
            reason = ""  # plain bad JSON: the SDK's own parse error says where
        else:
            reason = _invalid_id(parsed)
            code = -32600
        if reason:
            kind = "Parse error" if code == -32700 else "Invalid Request"
            await _json(send, 400, {"jsonrpc": "2.0", "id": None,
                                    "error": {"code": code, "message": f"{kind}: {reason}"}})
            return None
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> Message:
            return replay.pop() if replay else await receive()

        return replayed

    async def _sse_session(self, bound: Binding, scope: Scope, receive: Receive, send: Send) -> None:
        # The messages of an SSE session arrive as separate POSTs that carry only the session
        # id, so the session keeps the binding (tenant and scope) of the request that opened it.
        token = session_binding.set(bound)
        try:
            async with self.sse.connect_sse(scope, receive, send) as (read, write):
                await self.server.run(read, write, self.server.create_initialization_options())
        finally:
            session_binding.reset(token)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        async with self.lifespan():
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
            assert message["type"] == "lifespan.shutdown"
        await send({"type": "lifespan.shutdown.complete"})
