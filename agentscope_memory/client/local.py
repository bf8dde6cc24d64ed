"""Local mode: the clients' API over an in-process `Service`, with no server and no gRPC (as
qdrant-client's local mode). Same methods, same library types, same errors as the remote
clients; everything lives in the service's store (sqlite under `data_dir` by default).

    async with AsyncMemoryClient.local(ServiceSettings(data_dir=Path("./data"))) as memory:
        await memory.create_memory("chat-1")

Local mode has one tenant (`default`), as a server without API keys has.
"""

from __future__ import annotations

import builtins  # `list` is also a method name of the clients

import asyncio
import functools
import inspect
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Self, Sequence, TypeVar

from agentscope_memory.client._base import closed_error
from agentscope_memory.client._common import LOCAL_TENANT
from agentscope_memory.client._validate import check_request, refuse_unencodable_in
from agentscope_memory.client.messages import MarksUpdated, MessageDeleted, MessagesDeleted, MessagesAdded, MessagesRead, MessagesReplaced, Page, read_consistently
from agentscope_memory.client.long_term import Turn
from agentscope_memory.convert.from_proto import search_options_from_proto
from agentscope_memory.convert.to_proto import kind_to_proto
from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError, UnimplementedError
from agentscope_memory.long_term.engine import HistoryEntry, LongTermEngine, LongTermItem, Scope
from agentscope_memory.long_term.paging import history_page
from agentscope_memory.long_term.modes import Mode, parse_mode
from agentscope_memory.long_term.tools import record_to_memory, retrieve_from_memory
from agentscope_memory.long_term.turns import Turns
from agentscope_memory.message import Msg
from agentscope_memory.short_term.pending_tools import interrupted_results
from agentscope_memory.service import Service, ServiceSettings, build_service
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.short_term.description import MemoryDescription, describe

T = TypeVar("T")


class _ServiceHandle:
    """A service the client may own: started on first use, closed with the client if owned.
    Once the client is closed every use raises the remote clients' `FailedPreconditionError`,
    also when the service is the caller's and still runs."""

    def __init__(self, target: Service | ServiceSettings | None) -> None:
        self._owned = not isinstance(target, Service)
        self._service = target if isinstance(target, Service) else build_service(target)
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    async def get(self) -> Service:
        if self._closed:
            raise closed_error()
        # The service's connections and tasks belong to the loop of the first call (a client
        # built before `asyncio.run` is fine); in another loop they fail obscurely.
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise FailedPreconditionError(
                "the client's in-process service runs in the event loop of its first call, not this one: "
                "make one local client per event loop (or use the blocking client)")
        if self._owned:
            await self._service.start()  # idempotent: only the first call starts it
        return self._service

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owned:
            await self._service.close()


class _LocalClient:
    """What every local client shares: the service it runs on, as the local tenant."""

    def __init__(self, service: Service | ServiceSettings | None = None) -> None:
        self._handle = _ServiceHandle(service)
        self.tenant = LOCAL_TENANT

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Some calls build the remote client's request too (a search's): text protobuf cannot
        # encode is named as the service names it, not a bare UnicodeEncodeError.
        super().__init_subclass__(**kwargs)
        refuse_unencodable_in(cls)

    async def close(self) -> None:
        await self._handle.close()

    async def __aenter__(self) -> Self:
        await self._handle.get()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _part(self, name: str) -> Any:
        """The service's part `name` (`pools`, `scopes`, ...): one the local service always has."""
        part = getattr(await self._handle.get(), name)
        assert part is not None
        return part


class AsyncLocalMemoryClient(_LocalClient):
    """`AsyncMemoryClient`'s methods over an in-process service."""

    async def create_memory(
        self, memory_id: str, kind: str = "IN_MEMORY", *, labels: dict[str, str] | None = None,
        allow_existing: bool = False, auto_context_config: AutoContextConfig | None = None,
        tiered_config: TieredConfig | None = None,
    ) -> MemoryDescription:
        kind_to_proto(kind)  # the same ValueError as the remote client for an unknown kind
        memories = (await self._handle.get()).memories
        config_json = auto_context_config.validate().to_json() if auto_context_config is not None else "{}"
        if tiered_config is not None:
            config_json = tiered_config.validate().to_json()
        info, _ = await memories.create_memory(self.tenant, memory_id, kind.upper(), config_json, labels, allow_existing)
        return describe(info.record, info.message_count)

    async def get_memory(self, memory_id: str) -> MemoryDescription:
        info = await (await self._handle.get()).memories.get_memory(self.tenant, memory_id)
        return describe(info.record, info.message_count)

    async def list_memories(self, page_size: int = 0) -> AsyncIterator[MemoryDescription]:
        memories = (await self._handle.get()).memories
        token = ""
        while True:
            page = await memories.list_memories(self.tenant, page_size, token)
            for info in page.memories:
                yield describe(info.record, info.message_count)
            token = page.next_page_token
            if not token:
                return

    async def delete_memory(self, memory_id: str) -> None:
        service = await self._handle.get()
        if service.scopes is not None:  # a parent with children is refused, as over gRPC
            await service.scopes.delete_memory(self.tenant, memory_id)
        else:
            await service.memories.delete_memory(self.tenant, memory_id)

    async def add_messages(self, memory_id: str, msgs: Sequence[Msg], *, request_id: str | None = None) -> int:
        return (await self.add_messages_with_etags(memory_id, msgs, request_id=request_id)).message_count

    async def add_messages_with_etags(self, memory_id: str, msgs: Sequence[Msg], *,
                                      request_id: str | None = None) -> MessagesAdded:
        result = await (await self._handle.get()).memories.add_messages(self.tenant, memory_id, list(msgs), request_id)
        return MessagesAdded(result.message_count, result.etag, result.previous_etag, result.replayed)

    async def add_message(self, memory_id: str, msg: Msg) -> int:
        return await self.add_messages(memory_id, [msg])

    async def iter_messages(self, memory_id: str, page_size: int = 0) -> AsyncIterator[Msg]:
        memories = (await self._handle.get()).memories
        token = ""
        while True:
            page = await memories.get_messages_page(self.tenant, memory_id, page_size, token)
            for msg in page.messages:
                yield msg
            token = page.next_page_token
            if not token:
                return

    async def get_messages(self, memory_id: str) -> list[Msg]:
        # One store snapshot: a local read cannot be torn between pages.
        return await (await self._handle.get()).memories.get_messages(self.tenant, memory_id)

    async def read_messages(self, memory_id: str, *, if_none_match: str = "", accept_delta: bool = False) -> MessagesRead:
        memories = (await self._handle.get()).memories

        async def fetch(token: str, first: bool) -> Page:
            page = await memories.get_messages_page(self.tenant, memory_id, 0, token,
                                                    if_none_match if first else "", accept_delta and first)
            return Page(page.messages, page.etag, page.next_page_token, page.not_modified, page.delta)

        return await read_consistently(fetch)

    async def close_pending_tool_calls(self, memory_id: str, agent_name: str) -> list[Msg]:
        added = interrupted_results(await self.get_messages(memory_id), agent_name)
        if added:
            await self.add_messages(memory_id, added)
        return added

    async def delete_message(self, memory_id: str, index: int, *, expected_id: str | None = None) -> bool:
        return (await self.delete_message_with_etags(memory_id, index, expected_id=expected_id)).deleted

    async def delete_message_with_etags(self, memory_id: str, index: int, *,
                                        expected_id: str | None = None) -> MessageDeleted:
        if index < 0:
            return MessageDeleted(False, 0, "", "")
        result = await (await self._handle.get()).memories.delete_message(self.tenant, memory_id, index, expected_id)
        return MessageDeleted(result.deleted, result.message_count, result.etag, result.previous_etag)

    async def delete_messages(self, memory_id: str, message_ids: Sequence[str] = (), *, marks: Sequence[str] = (),
                              allow_missing: bool = False) -> MessagesDeleted:
        result = await (await self._handle.get()).memories.delete_messages(
            self.tenant, memory_id, list(message_ids), list(marks), allow_missing)
        return MessagesDeleted(len(result.deleted_ids), result.deleted_ids, result.message_count, result.etag,
                               result.previous_etag)

    async def update_message_marks(self, memory_id: str, new_mark: str | None, *, old_mark: str | None = None,
                                   message_ids: Sequence[str] | None = None, allow_missing: bool = False) -> MarksUpdated:
        result = await (await self._handle.get()).memories.update_message_marks(
            self.tenant, memory_id, None if message_ids is None else list(message_ids), new_mark, old_mark, allow_missing)
        return MarksUpdated(result.updated_count, result.changed_count, result.message_count, result.etag,
                            result.previous_etag)

    async def clear(self, memory_id: str) -> None:
        await self.clear_with_etags(memory_id)

    async def clear_with_etags(self, memory_id: str) -> MessagesReplaced:
        result = await (await self._handle.get()).memories.clear_messages(self.tenant, memory_id)
        return MessagesReplaced(result.etag, result.previous_etag)

    async def save_state(
        self, memory_id: str, *, progress: Callable[[int], None] | None = None
    ) -> tuple[list[StateEntry], int]:
        record, entries = await (await self._handle.get()).memories.save_state(self.tenant, memory_id)
        _report(memory_id, entries, progress)
        return entries, record.version

    async def load_state(
        self, memory_id: str, entries: list[StateEntry], *, expected_version: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        return (await self.load_state_with_etags(memory_id, entries, expected_version=expected_version,
                                                 progress=progress)).version

    async def load_state_with_etags(
        self, memory_id: str, entries: list[StateEntry], *, expected_version: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> MessagesReplaced:
        result = await (await self._handle.get()).memories.load_state(self.tenant, memory_id, entries, expected_version)
        _report(memory_id, entries, progress)
        return MessagesReplaced(result.etag, result.previous_etag, result.version)


def _report(memory_id: str, entries: list[StateEntry], progress: Callable[[int], None] | None) -> None:
    """Tell `progress` the size of each piece the state would be over gRPC, as the remote
    clients do (in-process there are no pieces; the total is the same)."""
    if progress is not None and entries:
        from agentscope_memory.client._requests import load_stream

        for piece in load_stream(memory_id, entries, None):
            progress(piece.ByteSize())


class AsyncLocalLongTermClient(_LocalClient):
    """`AsyncLongTermClient`'s methods over an in-process service."""

    async def _engine(self) -> LongTermEngine:
        engine = (await self._handle.get()).long_term
        if engine is None:
            raise UnimplementedError("long-term memory is switched off (long_term_enabled=false)")
        return engine

    async def _turns(self) -> Turns:
        await self._engine()
        turns = (await self._handle.get()).turns
        assert turns is not None
        return turns

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None = None, *,
                     pinned: bool = False) -> list[LongTermItem]:
        return await (await self._engine()).record(self.tenant, scope.validate(), list(msgs), metadata, pinned=pinned)

    async def retrieve(self, scope: Scope, msg: Msg, limit: int = 5) -> str:
        text, _ = await (await self._engine()).retrieve(self.tenant, scope.validate(), msg, limit)
        return text

    async def record_to_memory(self, scope: Scope, thinking: str, content: Sequence[str]) -> str:
        return await record_to_memory(await self._engine(), self.tenant, scope, thinking, list(content))

    async def retrieve_from_memory(self, scope: Scope, keywords: Sequence[str]) -> str:
        return await retrieve_from_memory(await self._engine(), self.tenant, scope, list(keywords))

    async def list(self, scope: Scope, limit: int = 100) -> list[LongTermItem]:
        return await (await self._engine()).list(self.tenant, scope.validate(), limit)

    async def get(self, memory_id: str) -> LongTermItem:
        return await (await self._engine()).get(self.tenant, memory_id)

    async def search(self, scope: Scope, query: str, *, top_k: int = 0, memory_types: Sequence[str] = (),
                     domains: Sequence[str] = (), route_query: bool = False, ranking: str = "",
                     metadata: dict[str, Any] | None = None, **weights: float | None) -> builtins.list[LongTermItem]:
        from agentscope_memory.client._requests import search as search_request

        # The request the remote client would send, read as the server reads it: the same
        # options (`ranking` included) and the same errors.
        request = search_request(scope, query, top_k, weights, memory_types, domains, route_query, ranking, metadata)
        check_request(request)
        if not query.strip():
            raise InvalidArgumentError("query", "is required")
        engine = await self._engine()
        options = search_options_from_proto(request, engine.rank_defaults)
        items, _ = await engine.search_ranked(self.tenant, scope.validate(), query, options, route=route_query)
        return items

    async def update(self, memory_id: str, text: str | None = None, *, importance: float | None = None,
                     metadata: dict[str, Any] | None = None, pinned: bool | None = None) -> LongTermItem:
        return await (await self._engine()).update(self.tenant, memory_id, text, metadata, importance, pinned)

    async def history(self, memory_id: str) -> builtins.list[HistoryEntry]:
        return await (await self._engine()).history(self.tenant, memory_id)

    async def history_page(self, memory_id: str, page_size: int = 0,
                           page_token: str = "") -> tuple[builtins.list[HistoryEntry], str]:
        engine = await self._engine()
        memories = (await self._handle.get()).memories
        return await history_page(engine, memories.tokens, self.tenant, memory_id, page_size, page_token,
                                  memories.limits.max_page_bytes)

    async def delete(self, memory_id: str) -> None:
        await (await self._engine()).delete(self.tenant, memory_id)

    async def forget(self, scope: Scope, *, force: bool = False) -> int:
        service = await self._handle.get()
        if service.scopes is not None:
            return await service.scopes.delete_long_term_scope(self.tenant, scope, force)
        return await (await self._engine()).delete_scope(self.tenant, scope.validate())

    async def begin_turn(self, memory_id: str, scope: Scope, mode: Mode | str, input_msgs: Sequence[Msg]) -> Turn:
        result = await (await self._turns()).begin_turn(self.tenant, memory_id, scope, _mode(mode), list(input_msgs))
        return Turn(result.input, {t.name: t.parameters for t in result.tools})

    async def end_turn(self, memory_id: str, scope: Scope, mode: Mode | str, *, background: bool = False) -> bool:
        return await (await self._turns()).end_turn(self.tenant, memory_id, scope, _mode(mode), background)


def _mode(mode: Mode | str) -> Mode:
    return mode if isinstance(mode, Mode) else parse_mode(mode.upper())


class Blocking:
    """An asyncio local client's methods, blocking: its service runs on a private event loop
    thread, so blocking programs (and the blocking clients' local mode) can use it."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentscope-memory-local", daemon=True)
        self._thread.start()
        self._client = self._run(self._build(make))

    @staticmethod
    async def _build(make: Callable[[], Any]) -> Any:
        return make()  # on the loop, so the service's asyncio objects belong to it

    def _run(self, coro: Awaitable[T]) -> T:
        if self._loop.is_closed():  # the client was closed: its loop with it
            if inspect.iscoroutine(coro):
                coro.close()  # never awaited, on purpose
            raise closed_error()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()  # type: ignore[arg-type]

    def _iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        while True:
            try:
                yield self._run(agen.__anext__())
            except StopAsyncIteration:
                return

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if inspect.isasyncgenfunction(attr):
            return functools.wraps(attr)(lambda *a, **k: self._iterate(attr(*a, **k)))
        if inspect.iscoroutinefunction(attr):
            return functools.wraps(attr)(lambda *a, **k: self._run(attr(*a, **k)))
        return attr

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> Blocking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
