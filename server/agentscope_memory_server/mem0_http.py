"""The mem0-compatible REST facade: mem0's routes over `agentscope_memory.mem0_api.Mem0Api`.

Served on the optional `mem0_rest_port`, with the gRPC server's tenants and API keys
(`X-API-Key`, `Authorization: Token` or `Bearer`). Routes:
- mem0's OSS server, which AgentScope-Java's Mem0Client uses in SELF_HOSTED mode: `POST
  /memories`, `POST /search`, `GET /memories`, `GET|PUT|DELETE /memories/{id}`, `GET
  /memories/{id}/history`, `DELETE /memories`;
- mem0's platform, used by Mem0Client in PLATFORM mode and by mem0's Python `MemoryClient`:
  `POST /v1/memories/`, `POST /v2/memories/search/` (a bare array: AgentScope parses any v2
  search answer as one), `GET /v1/ping/`, `POST /v3/memories/add/`, `POST
  /v3/memories/search/`, `POST /v3/memories/`, `GET|PUT|DELETE /v1/memories/{id}/`, `GET
  /v1/memories/{id}/history/`, `DELETE /v1/memories/`.
Errors are mem0's `{"detail": "..."}` with 400 (bad input), 401, 404, 501 (long-term memory
off), 503/504 (a dependency); never 500 for anything the client sent. OpenAPI at `/docs`.

This module authenticates, parses and maps errors; what a request means is `Mem0Api`'s job.
"""

from __future__ import annotations

import ast
import json
import logging
import uuid
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentscope_memory import errors
from agentscope_memory.long_term.engine import LongTermEngine
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES
from agentscope_memory.scopes.engine import ScopeEngine
from agentscope_memory.mem0_api import (
    AddRequest,
    Ids,
    ListRequest,
    Mem0Api,
    SearchRequest,
    UpdateRequest,
)
from agentscope_memory_server.auth_failures import TooManyFailedAuthentications
from agentscope_memory_server.tenancy import ApiKeys

log = logging.getLogger("agentscope_memory_server.mem0_rest")

# The largest `page` of `POST /v3/memories/`: its offset stays far inside SQL's 64-bit integers.
MAX_PAGE_NUMBER = 1_000_000

_STATUS: list[tuple[type[Exception], int]] = [
    (TooManyFailedAuthentications, 429),
    (errors.InvalidArgumentError, 400),
    (errors.ResourceExhaustedError, 400),
    (errors.UnauthenticatedError, 401),
    (errors.PermissionDeniedError, 403),
    (errors.NotFoundError, 404),
    (errors.AlreadyExistsError, 409),
    (errors.FailedPreconditionError, 409),
    (errors.AbortedError, 409),
    (errors.UnimplementedError, 501),
    (errors.UnavailableError, 503),
    (errors.DeadlineExceededError, 504),
]


def _error(status: int, detail: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Token"} if status == 401 else None
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _validation_detail(exc: RequestValidationError) -> str:
    """The first problem as `field: reason`, e.g. `messages: Field required`."""
    problems = []
    for err in exc.errors()[:3]:
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        if err.get("type") == "json_invalid":
            problems.append(f"the request body is not valid JSON ({err.get('ctx', {}).get('error', 'parse error')})")
        elif err.get("type") == "model_attributes_type" or not loc:
            problems.append(f"the request body must be a JSON object ({err.get('msg')})")
        else:
            # A validator's own reason reads as the others do ("Value error, " is pydantic's).
            problems.append(f"{'.'.join(loc)}: {str(err.get('msg')).removeprefix('Value error, ')}")
    return "; ".join(problems) or "invalid request"


def _unparsable_body(cause: BaseException) -> str:
    """Why FastAPI could not read a body it calls only "There was an error parsing the body":
    what its JSON decoding raised other than a syntax error (those come as `json_invalid`)."""
    if isinstance(cause, UnicodeDecodeError):
        return f"the request body is not UTF-8 (byte 0x{cause.object[cause.start]:02x} at offset {cause.start}: {cause.reason})"
    if isinstance(cause, RecursionError):
        return "the request body is not valid JSON this server can read (nested too deeply)"
    return f"the request body is not valid JSON this server can read ({cause})"


def _query_filters(raw: str | None) -> dict[str, Any] | None:
    """`filters` from a query string: JSON, or the Python dict mem0's MemoryClient.delete_all
    sends (httpx writes a dict parameter with `str()`, so `{'user_id': 'alice'}` arrives)."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        try:
            value = ast.literal_eval(raw)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            value = None
    if not isinstance(value, dict):
        raise errors.InvalidArgumentError("query.filters", 'must be a JSON object, e.g. {"user_id": "alice"}')
    return value


def create_app(engine: LongTermEngine | None, keys: ApiKeys, max_page_bytes: int = DEFAULT_PAGE_BYTES,
               scopes: ScopeEngine | None = None) -> FastAPI:
    """The facade as an ASGI app; `engine` None means long-term memory is off (501).
    `max_page_bytes` bounds the memories or changes of one answer (add, search, list, history);
    `scopes`, the server's scope hierarchy, makes forgetting a parent scope need `force` as
    over gRPC."""
    app = FastAPI(
        title="agentscope-memory: mem0-compatible REST API",
        description="mem0's memory routes over the agentscope-memory long-term engine. "
        "Authenticate with `X-API-Key: KEY`, `Authorization: Token KEY` or `Authorization: Bearer KEY` "
        "when the server has API keys. `infer: true` extracts facts with the server's LLM; "
        "a server without an LLM stores the messages verbatim and answers `inferred: false`.",
        version="1",
    )
    api = Mem0Api(engine, max_page_bytes, scopes) if engine is not None else None

    @app.exception_handler(errors.MemoryServiceError)
    async def _library_error(request: Request, exc: errors.MemoryServiceError) -> JSONResponse:
        status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
        response = _error(status, str(exc))
        if isinstance(exc, TooManyFailedAuthentications):
            response.headers["retry-after"] = str(exc.retry_after)
        return response

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, _validation_detail(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.__cause__ is not None:
            return _error(400, _unparsable_body(exc.__cause__))
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        incident = uuid.uuid4().hex[:12]
        log.error("unexpected error in %s %s (incident %s)", request.method, request.url.path, incident, exc_info=exc)
        return _error(500, f"internal error (incident {incident}); see the server log")

    def tenant(request: Request) -> str:
        return keys.authenticate(request.headers, request.client.host if request.client else None)

    def memories() -> Mem0Api:
        if api is None:
            raise errors.UnimplementedError("long-term memory is switched off on this server (long_term_enabled=false)")
        return api

    Tenant = Depends(tenant)
    Api = Depends(memories)

    # Adding.
    @app.post("/memories", tags=["mem0 OSS server"], summary="Remember messages")
    @app.post("/v1/memories/", tags=["mem0 platform"], summary="Remember messages")
    @app.post("/v3/memories/add/", tags=["mem0 platform"], summary="Remember messages")
    async def add(body: AddRequest, t: str = Tenant, m: Mem0Api = Api) -> dict[str, Any]:
        return await m.add(t, body)

    # Searching.
    @app.post("/search", tags=["mem0 OSS server"], summary="Search memories")
    @app.post("/v3/memories/search/", tags=["mem0 platform"], summary="Search memories")
    async def search(body: SearchRequest, t: str = Tenant, m: Mem0Api = Api) -> dict[str, Any]:
        return {"results": await m.search(t, body)}

    @app.post("/v2/memories/search/", tags=["mem0 platform"], summary="Search memories (a bare array)")
    async def search_v2(body: SearchRequest, t: str = Tenant, m: Mem0Api = Api) -> list[dict[str, Any]]:
        return await m.search(t, body)

    # Listing and deleting a scope.
    @app.get("/memories", tags=["mem0 OSS server"], summary="List a scope's memories")
    async def list_memories(
        user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
        top_k: int | None = None, t: str = Tenant, m: Mem0Api = Api,
    ) -> dict[str, Any]:
        try:
            request = ListRequest.model_validate({"user_id": user_id, "agent_id": agent_id, "run_id": run_id, "top_k": top_k})
        except ValidationError as exc:
            # The query string broke the model's limits (top_k=0): a client error like any other.
            raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]) from None
        return {"results": await m.list_memories(t, request)}

    @app.post("/v3/memories/", tags=["mem0 platform"], summary="List memories matching filters")
    async def list_v3(
        request: Request, body: ListRequest,
        page: int = Query(1, ge=1, le=MAX_PAGE_NUMBER, description="1-indexed page number"),
        page_size: int | None = Query(None, ge=1, le=1000, description="memories per page (default 100)"),
        offset: int | None = Query(None, ge=0, le=MAX_PAGE_NUMBER * 1000,
                                   description="start after this many matches instead of at `page` (what `next` "
                                   "gives after a page the 4 MiB answer limit cut short)"),
        t: str = Tenant, m: Mem0Api = Api,
    ) -> dict[str, Any]:
        # mem0's MemoryClient.get_all sends `page` and `page_size` in the query string; `next`
        # and `previous` are the neighbouring pages' URLs, null at either end; `count` is all
        # that match. After a page cut short (its memories outgrew one answer) or one asked for
        # by `offset`, they are offsets, so following `next` misses nothing.
        got = await m.list_page(t, body, page, page_size, offset)
        end = got.start + len(got.results)
        by_offset = offset is not None or got.cut

        def url(start: int, number: int) -> str:
            if by_offset:
                return str(request.url.remove_query_params("page").include_query_params(offset=start, page_size=got.size))
            return str(request.url.include_query_params(page=number, page_size=got.size))

        return {"count": got.count, "next": url(end, page + 1) if end < got.count else None,
                "previous": url(max(0, got.start - got.size), page - 1) if got.start > 0 else None,
                "results": got.results}

    @app.delete("/memories", tags=["mem0 OSS server"], summary="Forget a scope")
    @app.delete("/v1/memories/", tags=["mem0 platform"], summary="Forget a scope")
    async def delete_all(
        user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None,
        force: bool = False,
        filters: str | None = Query(None, description='whose memories, e.g. {"user_id": "alice"} (JSON)'),
        t: str = Tenant, m: Mem0Api = Api,
    ) -> dict[str, Any]:
        # mem0 has no `force`: ours, as DeleteScope's, for a scope other scopes inherit from.
        ids = Ids(user_id=user_id, agent_id=agent_id, run_id=run_id)
        return await m.delete_all(t, ids, force, _query_filters(filters))

    # One memory.
    @app.get("/memories/{memory_id}", tags=["mem0 OSS server"], summary="Get a memory")
    @app.get("/v1/memories/{memory_id}/", tags=["mem0 platform"], summary="Get a memory")
    async def get(memory_id: str, t: str = Tenant, m: Mem0Api = Api) -> dict[str, Any]:
        return await m.get(t, memory_id)

    @app.put("/memories/{memory_id}", tags=["mem0 OSS server"], summary="Change a memory")
    @app.put("/v1/memories/{memory_id}/", tags=["mem0 platform"], summary="Change a memory")
    async def update(memory_id: str, body: UpdateRequest, t: str = Tenant, m: Mem0Api = Api) -> dict[str, Any]:
        return await m.update(t, memory_id, body)

    @app.delete("/memories/{memory_id}", tags=["mem0 OSS server"], summary="Forget a memory")
    @app.delete("/v1/memories/{memory_id}/", tags=["mem0 platform"], summary="Forget a memory")
    async def delete(
        memory_id: str,
        delete_linked: bool = Query(False, description="also forget the older memories it links to "
                                    "(metadata.linked_memory_ids), transitively"),
        t: str = Tenant, m: Mem0Api = Api,
    ) -> dict[str, Any]:
        return await m.delete(t, memory_id, delete_linked)

    @app.get("/memories/{memory_id}/history", tags=["mem0 OSS server"], summary="A memory's changes")
    @app.get("/v1/memories/{memory_id}/history/", tags=["mem0 platform"], summary="A memory's changes")
    async def history(memory_id: str, t: str = Tenant, m: Mem0Api = Api) -> list[dict[str, Any]]:
        return await m.history(t, memory_id)

    @app.get("/v1/ping/", tags=["mem0 platform"], summary="Check the API key")
    async def ping(t: str = Tenant) -> dict[str, Any]:
        # mem0's MemoryClient needs an organisation and a project: the key's tenant, and one project.
        return {"status": "ok", "org_id": t, "project_id": "default", "user_email": None}

    return app
