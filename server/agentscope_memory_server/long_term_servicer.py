"""`agentscope.memory.v1.LongTermMemoryService`: translates requests, calls the long-term memory."""

from __future__ import annotations

from typing import Any, Callable

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.from_proto import (
    mode_from_proto,
    search_options_from_proto,
    msg_from_proto,
    msgs_from_proto,
    parse_json_object,
    scope_from_proto,
)
from agentscope_memory.convert.to_proto import (
    long_term_history_to_proto,
    long_term_item_to_proto,
    long_term_result_to_proto,
    msg_to_proto,
    tool_schema_to_proto,
)
from agentscope_memory.convert.scopes import visibility_from_proto
from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError
from agentscope_memory.lifecycle.compressed import CompressedSearch
from agentscope_memory.scopes.engine import ScopeEngine
from agentscope_memory.long_term.engine import LongTermEngine
from agentscope_memory.long_term.paging import history_page, list_page
from agentscope_memory.paging import PageTokens
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, cut_to_budget
from agentscope_memory.long_term.tools import TOOLS, as_tool_result_text, record_to_memory, retrieve_from_memory
from agentscope_memory.long_term.turns import Turns
from agentscope_memory_server.errors import grpc_errors
from agentscope_memory_server.tenancy import tenant_of


def _tools() -> list[pb.ToolSchema]:
    return [tool_schema_to_proto(t) for t in TOOLS]


def _fit(protos: list[Any], budget: int, extra: Callable[[int], int] = lambda i: 0) -> int:
    """How many leading `protos` (best first) a response of `budget` bytes carries; `extra(i)`
    is what item i adds beside its own message (its line of Retrieve's text). A Record of many
    memories with large metadata, or a search with a large top_k, could otherwise answer more
    than a stock client's 4 MiB; what is cut is the tail (stored all the same, and listed by
    ListLongTermMemories)."""
    sizes = [p.ByteSize() + extra(i) for i, p in enumerate(protos)]
    return cut_to_budget(range(len(protos)), lambda i: sizes[i], budget)


class LongTermServicer(pb_grpc.LongTermMemoryServiceServicer):
    def __init__(self, engine: LongTermEngine, turns: Turns, tokens: PageTokens | None = None,
                 max_page_bytes: int = DEFAULT_PAGE_BYTES, compressed: CompressedSearch | None = None) -> None:
        self.engine = engine
        # Compressed recall (search option `compress`); None where the engine cannot do it.
        self.compressed = compressed
        self.turns = turns
        self.tokens = tokens or PageTokens(None)
        self.max_page_bytes = max_page_bytes
        # Parent/child scopes: records with a visibility (set by the app).
        self.scopes: ScopeEngine | None = None

    @grpc_errors
    async def Record(self, request: pb.RecordRequest, context: grpc.aio.ServicerContext) -> pb.RecordResponse:
        metadata = parse_json_object(request.metadata_json, "metadata_json")
        msgs = msgs_from_proto(request.messages)
        if request.visibility and self.scopes is not None:
            items = await self.scopes.record_long_term(tenant_of(context), scope_from_proto(request.scope), msgs,
                                                       metadata, visibility_from_proto(request.visibility),
                                                       pinned=request.pinned)
        else:
            items = await self.engine.record(tenant_of(context), scope_from_proto(request.scope), msgs, metadata,
                                             pinned=request.pinned)
        memories = [long_term_item_to_proto(i) for i in items]
        return pb.RecordResponse(memories=memories[:_fit(memories, self.max_page_bytes)])

    @grpc_errors
    async def Retrieve(self, request: pb.RetrieveRequest, context: grpc.aio.ServicerContext) -> pb.RetrieveResponse:
        if request.limit < 0:
            raise InvalidArgumentError("limit", "must not be negative")
        msg = msg_from_proto(request.message, "message") if request.HasField("message") else None
        text, items = await self.engine.retrieve(tenant_of(context), scope_from_proto(request.scope), msg,
                                                 request.limit or 5, touch=False)
        memories = [long_term_item_to_proto(i) for i in items]
        # The text repeats each memory's text: both count against the budget.
        kept = _fit(memories, self.max_page_bytes, lambda i: len(items[i].text.encode("utf-8")) + 1)
        if kept < len(items):
            text = "\n".join(i.text for i in items[:kept] if i.text)
        # Recalled is what the answer holds (as for a search).
        self.engine.touch(tenant_of(context), [i.id for i in items[:kept]])
        return pb.RetrieveResponse(text=text, memories=memories[:kept])

    @grpc_errors
    async def RecordToMemory(self, request: pb.RecordToMemoryRequest, context: grpc.aio.ServicerContext) -> pb.RecordToMemoryResponse:
        text = await record_to_memory(
            self.engine, tenant_of(context), scope_from_proto(request.scope), request.thinking, list(request.content)
        )
        return pb.RecordToMemoryResponse(text=text, tool_result_text=as_tool_result_text(text))

    @grpc_errors
    async def RetrieveFromMemory(self, request: pb.RetrieveFromMemoryRequest, context: grpc.aio.ServicerContext) -> pb.RetrieveFromMemoryResponse:
        text = await retrieve_from_memory(self.engine, tenant_of(context), scope_from_proto(request.scope), list(request.keywords))
        return pb.RetrieveFromMemoryResponse(text=text, tool_result_text=as_tool_result_text(text))

    @grpc_errors
    async def ListTools(self, request: pb.ListToolsRequest, context: grpc.aio.ServicerContext) -> pb.ListToolsResponse:
        return pb.ListToolsResponse(tools=_tools())

    @grpc_errors
    async def ListLongTermMemories(self, request: pb.ListLongTermMemoriesRequest, context: grpc.aio.ServicerContext) -> pb.ListLongTermMemoriesResponse:
        items, token = await list_page(
            self.engine, self.tokens, tenant_of(context), scope_from_proto(request.scope), request.page_size,
            request.page_token, self.max_page_bytes, lambda item: long_term_item_to_proto(item).ByteSize())
        return pb.ListLongTermMemoriesResponse(memories=[long_term_item_to_proto(i) for i in items],
                                               next_page_token=token)

    @grpc_errors
    async def GetLongTermMemory(self, request: pb.GetLongTermMemoryRequest, context: grpc.aio.ServicerContext) -> pb.GetLongTermMemoryResponse:
        return pb.GetLongTermMemoryResponse(memory=long_term_item_to_proto(await self.engine.get(tenant_of(context), request.id)))

    @grpc_errors
    async def DeleteLongTermMemory(self, request: pb.DeleteLongTermMemoryRequest, context: grpc.aio.ServicerContext) -> pb.DeleteLongTermMemoryResponse:
        await self.engine.delete(tenant_of(context), request.id)
        return pb.DeleteLongTermMemoryResponse()

    @grpc_errors
    async def DeleteScope(self, request: pb.DeleteScopeRequest, context: grpc.aio.ServicerContext) -> pb.DeleteScopeResponse:
        scope = scope_from_proto(request.scope)
        if self.scopes is not None:
            deleted = await self.scopes.delete_long_term_scope(tenant_of(context), scope, request.force)
        else:
            deleted = await self.engine.delete_scope(tenant_of(context), scope)
        return pb.DeleteScopeResponse(deleted_count=deleted)

    @grpc_errors
    async def BeginTurn(self, request: pb.BeginTurnRequest, context: grpc.aio.ServicerContext) -> pb.BeginTurnResponse:
        result = await self.turns.begin_turn(
            tenant_of(context), request.memory_id, scope_from_proto(request.scope), mode_from_proto(request.mode),
            msgs_from_proto(request.input, "input"),
        )
        return pb.BeginTurnResponse(
            input=[msg_to_proto(m) for m in result.input],
            tools=_tools() if result.tools else [],
        )

    @grpc_errors
    async def EndTurn(self, request: pb.EndTurnRequest, context: grpc.aio.ServicerContext) -> pb.EndTurnResponse:
        recorded = await self.turns.end_turn(
            tenant_of(context), request.memory_id, scope_from_proto(request.scope), mode_from_proto(request.mode), request.async_record
        )
        return pb.EndTurnResponse(recorded=recorded)

    @grpc_errors
    async def SearchLongTermMemories(self, request: pb.SearchLongTermMemoriesRequest, context: grpc.aio.ServicerContext) -> pb.SearchLongTermMemoriesResponse:
        scope = scope_from_proto(request.scope)
        if not request.query.strip():
            raise InvalidArgumentError("query", "is required")
        options = search_options_from_proto(request, self.engine.rank_defaults)
        if request.compress or request.compress_min_results or request.compress_max_chars:
            if not request.compress:
                raise InvalidArgumentError("compress", "must be set when compress_min_results or compress_max_chars is")
            if self.compressed is None:
                raise FailedPreconditionError("compress: compressed recall needs the server's own long-term engine")
            items, domain, summary = await self.compressed.search(
                tenant_of(context), scope, request.query, options, route=request.route_query,
                min_results=request.compress_min_results, max_chars=request.compress_max_chars)
            text = summary.summary if summary else ""
            results = [long_term_result_to_proto(i) for i in items]
            budget = self.max_page_bytes - len(text.encode("utf-8"))
            return pb.SearchLongTermMemoriesResponse(
                results=results[:_fit(results, budget)], routed_domain=domain,
                summary=text, summary_method=summary.method if summary else "")
        items, domain = await self.engine.search_ranked(tenant_of(context), scope, request.query, options,
                                                        route=request.route_query, touch=False)
        results = [long_term_result_to_proto(i) for i in items]
        kept = _fit(results, self.max_page_bytes)
        # What the byte budget cut was not recalled: only what the caller receives is touched.
        self.engine.touch(tenant_of(context), [i.id for i in items[:kept]])
        return pb.SearchLongTermMemoriesResponse(results=results[:kept], routed_domain=domain)

    @grpc_errors
    async def UpdateLongTermMemory(self, request: pb.UpdateLongTermMemoryRequest, context: grpc.aio.ServicerContext) -> pb.UpdateLongTermMemoryResponse:
        metadata = parse_json_object(request.metadata_json, "metadata_json") if request.metadata_json else None
        item = await self.engine.update(
            tenant_of(context), request.id,
            text=request.text if request.HasField("text") else None,
            metadata=metadata,
            importance=request.importance if request.HasField("importance") else None,
            pinned=request.pinned if request.HasField("pinned") else None,
        )
        return pb.UpdateLongTermMemoryResponse(memory=long_term_item_to_proto(item))

    @grpc_errors
    async def GetLongTermMemoryHistory(self, request: pb.GetLongTermMemoryHistoryRequest, context: grpc.aio.ServicerContext) -> pb.GetLongTermMemoryHistoryResponse:
        entries, token = await history_page(
            self.engine, self.tokens, tenant_of(context), request.id, request.page_size, request.page_token,
            self.max_page_bytes, lambda entry: long_term_history_to_proto(entry).ByteSize())
        return pb.GetLongTermMemoryHistoryResponse(entries=[long_term_history_to_proto(e) for e in entries],
                                                   next_page_token=token)
