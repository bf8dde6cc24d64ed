"""The MCP server object (official `mcp` SDK, low-level API): lists and routes tools and
resources to `agentscope_memory.memory_tools`, whatever the transport (HTTP, SSE, stdio).

Every call finds out whom it serves through `Binding`: set per HTTP request by the ASGI app
(tenant from the API key, connection from the URL) or per session (SSE, stdio). Library errors
become tool results with `isError` and the error's message; anything unexpected becomes an
`isError` result with an incident id that is in the server log with its traceback, so a session
never ends because a call failed.
"""

from __future__ import annotations

import contextvars
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from agentscope_memory import errors
from agentscope_memory.memory_tools import Connection, MemoryAccess, MemoryTools
from agentscope_memory.memory_tools import resources as res

log = logging.getLogger("agentscope_memory_server.mcp")

SERVER_NAME = "agentscope-memory"
INSTRUCTIONS = (
    "Long-term memory across conversations and the working memory of a conversation. Search "
    "long-term memory before answering questions that may depend on what the user said before; "
    "add facts worth keeping; correct or delete memories that are outdated."
)


@dataclass(frozen=True)
class Binding:
    """Whom a call serves: the tenant's access to the service and what the connection fixes."""

    access: MemoryAccess
    conn: Connection
    tenant: str


# Set for a whole session by transports that have one binding per session (SSE, stdio).
session_binding: contextvars.ContextVar[Binding | None] = contextvars.ContextVar("mcp_session_binding", default=None)
# Where the ASGI app leaves a request's binding in the request's state.
REQUEST_STATE_KEY = "mcp_binding"


class BindingError(Exception):
    """The request and its session disagree (e.g. another tenant's key on an SSE session)."""


def _message_for(exc: BaseException) -> str | None:
    """The text a model reads for a library error: what was wrong and what to do."""
    if isinstance(exc, errors.InvalidArgumentError):
        return f"Invalid argument {exc.field}: {exc.reason}" if exc.field else f"Invalid arguments: {exc.reason}"
    if isinstance(exc, errors.ResourceExhaustedError):
        return f"Too large: {exc.field}: {exc.reason}" if exc.field else f"Limit exceeded: {exc.reason}"
    if isinstance(exc, errors.NotFoundError):
        return f"Not found: {exc}"
    if isinstance(exc, errors.UnauthenticatedError):
        return f"Not authenticated: {exc}. Configure a valid API key for this MCP server."
    if isinstance(exc, errors.PermissionDeniedError):
        return f"Permission denied: {exc}"
    if isinstance(exc, (errors.UnavailableError, errors.DeadlineExceededError)):
        return f"The memory service is unavailable ({exc}); try again in a moment."
    if isinstance(exc, errors.UnimplementedError):
        return f"Not available: {exc}"
    if isinstance(exc, errors.MemoryServiceError):
        return str(exc)
    return None


def _incident(what: str) -> str:
    incident = uuid.uuid4().hex[:12]
    log.exception("unexpected error in MCP %s (incident %s)", what, incident)
    return f"Internal error (incident {incident}); the server log has the details. Try again or report it."


def build_server() -> Server[Any, Any]:
    server: Server[Any, Any] = Server(SERVER_NAME, version=_version(), instructions=INSTRUCTIONS)

    def binding() -> Binding:
        request = server.request_context.request
        for_session = session_binding.get()
        state = getattr(request, "state", None) if request is not None else None
        for_request: Binding | None = getattr(state, REQUEST_STATE_KEY, None) if state is not None else None
        if for_session is not None:
            if for_request is not None and for_request.tenant != for_session.tenant:
                raise BindingError("this session belongs to another API key; open a new session with yours")
            return for_session
        if for_request is None:
            raise BindingError("no binding for this request")  # a transport wiring error
        return for_request

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        conn = binding().conn
        from agentscope_memory.memory_tools import tool_definitions

        return [
            types.Tool(
                name=d.name,
                title=d.title,
                description=d.description,
                inputSchema=d.input_schema,
                annotations=types.ToolAnnotations(
                    title=d.title, readOnlyHint=d.read_only, destructiveHint=d.destructive,
                    idempotentHint=d.read_only, openWorldHint=False,
                ),
            )
            for d in tool_definitions(conn)
        ]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        # Arguments are checked by the tools themselves: their messages name the argument and
        # say what to send, which a model acts on better than a JSON-schema validator's.
        try:
            bound = binding()
            result = await MemoryTools(bound.access, bound.conn).call(name, arguments)
        except BindingError as exc:
            return _error(f"Not authorised: {exc}")
        except Exception as exc:  # noqa: BLE001 - every failure is a tool error, never a dead session
            message = _message_for(exc)
            return _error(message if message is not None else _incident(f"tool {name}"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structuredContent=result,
            isError=False,
        )

    @server.list_resources()
    async def list_resources(request: types.ListResourcesRequest) -> types.ListResourcesResult:
        cursor = request.params.cursor if request.params is not None else None
        bound = _bound_or_mcp_error(binding)
        try:
            infos, next_cursor = await res.list_resources(bound.access, bound.conn, cursor or "")
        except Exception as exc:  # noqa: BLE001
            raise _mcp_error(exc, "resources/list") from None
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=AnyUrl(i.uri), name=i.name, description=i.description, mimeType=res.MIME)
                for i in infos
            ],
            nextCursor=next_cursor or None,
        )

    @server.list_resource_templates()
    async def list_templates() -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uriTemplate=res.WORKING_TEMPLATE, name="working memory",
                description="A conversation's messages, oldest first (newest last). Add ?page_size=N "
                            "(1-100, default 50); each page names the next in next_page_uri.",
                mimeType=res.MIME,
            ),
            types.ResourceTemplate(
                uriTemplate=res.LONG_TERM_TEMPLATE, name="long-term memories",
                description="The long-term memories of a scope (at least one of user_id, agent_name, "
                            "run_name), oldest first; each page names the next in next_page_uri.",
                mimeType=res.MIME,
            ),
        ]

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        bound = _bound_or_mcp_error(binding)
        try:
            data = await res.read_resource(bound.access, bound.conn, str(uri))
        except Exception as exc:  # noqa: BLE001
            raise _mcp_error(exc, "resources/read") from None
        return [ReadResourceContents(content=res.resource_text(data), mime_type=res.MIME)]

    return server


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], isError=True)


def _bound_or_mcp_error(binding: Any) -> Binding:
    try:
        bound: Binding = binding()
    except BindingError as exc:
        raise McpError(types.ErrorData(code=types.INVALID_REQUEST, message=f"Not authorised: {exc}")) from None
    return bound


# JSON-RPC code MCP uses for an unknown resource.
RESOURCE_NOT_FOUND = -32002


def _mcp_error(exc: Exception, what: str) -> McpError:
    message = _message_for(exc)
    if message is None:
        return McpError(types.ErrorData(code=types.INTERNAL_ERROR, message=_incident(what)))
    code = RESOURCE_NOT_FOUND if isinstance(exc, errors.NotFoundError) else types.INVALID_PARAMS
    return McpError(types.ErrorData(code=code, message=message))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentscope-memory")
    except PackageNotFoundError:
        return "0"
