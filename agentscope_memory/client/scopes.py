"""Clients of parent/child scopes (`ScopeService`, and the visibility fields of `AddMessages`,
`DeleteMemory`, `Record` and `SearchLongTermMemories`): asyncio, blocking and local mode, in
library types. A child memory's inherited messages are read-only: they come from
`iter_inherited`/`get_inherited`, never from the child's own `get_messages`.

    async with AsyncScopeClient("127.0.0.1:50051") as scopes:
        await scopes.create_child("planner", "researcher-1")
        await scopes.add_messages("planner", [Msg.create(MsgRole.USER, "目标: ...")], visibility="SHARED")
        inherited = await scopes.get_inherited("researcher-1")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Iterator, Sequence

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as ltm_grpc
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2 as scope_pb
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2_grpc as scope_grpc
from agentscope_memory.client._base import AsyncGrpcClient, BlockingGrpcClient
from agentscope_memory.client._common import DEFAULT_TARGET, DEFAULT_TIMEOUT_S, new_request_id
from agentscope_memory.client._validate import msgs_on_wire
from agentscope_memory.client.local import Blocking, _LocalClient
from agentscope_memory.convert.from_proto import long_term_item_from_proto, memory_from_proto
from agentscope_memory.convert.scopes import inherited_from_proto, visibility_to_proto
from agentscope_memory.convert.to_proto import auto_context_config_to_proto, kind_to_proto, scope_to_proto
from agentscope_memory.long_term.engine import LongTermItem, Scope
from agentscope_memory.message import Msg
from agentscope_memory.scopes import LOCAL, check_visibility
from agentscope_memory.scopes.engine import InheritedMessage, Lineage
from agentscope_memory.scopes.engine import LongTermLineage
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.description import MemoryDescription, describe

if TYPE_CHECKING:
    from agentscope_memory.service import Service, ServiceSettings

# -- requests, shared by the asyncio and blocking clients ----------------------------------

def _create_child(parent_memory_id: str, memory_id: str, kind: str | None, labels: dict[str, str] | None,
                  auto_context_config: AutoContextConfig | None) -> scope_pb.CreateChildRequest:
    request = scope_pb.CreateChildRequest(parent_memory_id=parent_memory_id, memory_id=memory_id,
                                          labels=labels or {})
    if kind is not None:
        request.kind = kind_to_proto(kind)
    if auto_context_config is not None:
        request.auto_context_config.CopyFrom(auto_context_config_to_proto(auto_context_config))
    return request


def _add(memory_id: str, msgs: Sequence[Msg], request_id: str, visibility: str) -> pb.AddMessagesRequest:
    return pb.AddMessagesRequest(memory_id=memory_id, messages=msgs_on_wire(msgs), request_id=request_id,
                                 visibility=visibility_to_proto(check_visibility(visibility)))  # type: ignore[arg-type]


def _record(scope: Scope, msgs: Sequence[Msg], metadata_json: str, visibility: str) -> ltm_pb.RecordRequest:
    return ltm_pb.RecordRequest(scope=scope_to_proto(scope), messages=msgs_on_wire(msgs),
                                metadata_json=metadata_json,
                                visibility=visibility_to_proto(check_visibility(visibility)))  # type: ignore[arg-type]


def _metadata_json(metadata_: dict[str, Any] | None) -> str:
    import json

    return json.dumps(metadata_, ensure_ascii=False) if metadata_ else ""


def _lineage(response: scope_pb.GetLineageResponse) -> Lineage:
    return Lineage(response.parent_memory_id, list(response.ancestor_memory_ids), response.child_count)


def _scopes(scopes: Sequence[Any]) -> list[Scope]:
    return [Scope(s.agent_name, s.user_id, s.run_name) for s in scopes]


class AsyncScopeClient(AsyncGrpcClient):
    """Parent/child scopes over gRPC (asyncio). Reads are retried on UNAVAILABLE until the
    deadline; writes that are not safe to repeat (create, delete, record) are not."""

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.aio.Channel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        super().__init__(target, channel=channel, api_key=api_key, root_certificates=root_certificates,
                         timeout=timeout, retries=retries)
        from agentscope_memory.client.aio import AsyncMemoryClient

        # For consistent paged reads of a memory's own messages (its channel, not owned).
        self._messages = AsyncMemoryClient(channel=self._channel, api_key=api_key, timeout=timeout, retries=retries)

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._scopes = scope_grpc.ScopeServiceStub(channel)
        self._memories = pb_grpc.MemoryServiceStub(channel)
        self._long_term = ltm_grpc.LongTermMemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> AsyncLocalScopeClient:
        """The same methods over an in-process service (no server, no gRPC)."""
        return AsyncLocalScopeClient(service)

    async def set_parent(self, memory_id: str, parent_memory_id: str | None) -> list[str]:
        """Set (None: clear) a memory's parent; returns its ancestors, nearest first."""
        response = await self._call(self._scopes.SetParent, scope_pb.SetParentRequest(
            memory_id=memory_id, parent_memory_id=parent_memory_id or ""))
        return list(response.ancestor_memory_ids)

    async def create_child(self, parent_memory_id: str, memory_id: str, kind: str | None = None, *,
                           labels: dict[str, str] | None = None,
                           auto_context_config: AutoContextConfig | None = None) -> MemoryDescription:
        """Create a child memory; without `kind`, it copies the parent's kind and configuration."""
        request = _create_child(parent_memory_id, memory_id, kind, labels, auto_context_config)
        response = await self._call(self._scopes.CreateChild, request, retry=False)
        return memory_from_proto(response.memory)

    async def lineage(self, memory_id: str) -> Lineage:
        return _lineage(await self._call(self._scopes.GetLineage, scope_pb.GetLineageRequest(memory_id=memory_id)))

    async def iter_children(self, memory_id: str, page_size: int = 0) -> AsyncIterator[str]:
        request = scope_pb.ListChildrenRequest(memory_id=memory_id, page_size=page_size)
        async for response in self._paged(self._scopes.ListChildren, request):
            for child in response.child_memory_ids:
                yield child

    async def iter_inherited(self, memory_id: str, page_size: int = 0) -> AsyncIterator[InheritedMessage]:
        request = scope_pb.ListInheritedMessagesRequest(memory_id=memory_id, page_size=page_size)
        async for response in self._paged(self._scopes.ListInheritedMessages, request):
            for message in response.messages:
                yield inherited_from_proto(message)

    async def get_inherited(self, memory_id: str) -> list[InheritedMessage]:
        return [m async for m in self.iter_inherited(memory_id)]

    async def get_context(self, memory_id: str) -> list[Msg]:
        """What a child agent's model should see: the inherited messages, then its own."""
        inherited = [m.message for m in await self.get_inherited(memory_id)]
        return inherited + await self._messages.get_messages(memory_id)

    async def add_messages(self, memory_id: str, msgs: Sequence[Msg], *, visibility: str = LOCAL,
                           request_id: str | None = None) -> int:
        """Append messages with a visibility (LOCAL, SHARED, GLOBAL); returns the count after."""
        request = _add(memory_id, msgs, request_id or new_request_id(), visibility)
        return (await self._call(self._memories.AddMessages, request)).message_count

    async def delete_memory(self, memory_id: str, *, force: bool = False) -> None:
        """Delete a memory; one with children only with `force` (which detaches them)."""
        await self._call(self._memories.DeleteMemory, pb.DeleteMemoryRequest(memory_id=memory_id, force=force),
                         retry=False)

    async def set_long_term_parent(self, scope: Scope, parent: Scope | None) -> list[Scope]:
        request = scope_pb.SetLongTermParentRequest(scope=scope_to_proto(scope))
        if parent is not None:
            request.parent.CopyFrom(scope_to_proto(parent))
        return _scopes((await self._call(self._scopes.SetLongTermParent, request)).ancestors)

    async def long_term_lineage(self, scope: Scope) -> LongTermLineage:
        response = await self._call(self._scopes.GetLongTermLineage,
                                    scope_pb.GetLongTermLineageRequest(scope=scope_to_proto(scope)))
        return LongTermLineage(_scopes(response.ancestors), response.child_count)

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None = None, *,
                     visibility: str = LOCAL) -> list[LongTermItem]:
        # Not retried: Record has no request id, and a repeat after a lost reply stores twice.
        response = await self._call(self._long_term.Record, _record(scope, msgs, _metadata_json(metadata), visibility),
                                    retry=False)
        return [long_term_item_from_proto(i) for i in response.memories]

    async def search(self, scope: Scope, query: str, top_k: int = 0) -> list[LongTermItem]:
        """Ranked search in `scope`, inherited memories included (`item.inherited`)."""
        response = await self._call(self._long_term.SearchLongTermMemories, ltm_pb.SearchLongTermMemoriesRequest(
            scope=scope_to_proto(scope), query=query, top_k=top_k))
        return [long_term_item_from_proto(r.memory) for r in response.results]


class ScopeClient(BlockingGrpcClient):
    """`AsyncScopeClient`'s methods, blocking."""

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.Channel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        super().__init__(target, channel=channel, api_key=api_key, root_certificates=root_certificates,
                         timeout=timeout, retries=retries)
        from agentscope_memory.client.sync import MemoryClient

        self._messages = MemoryClient(channel=self._channel, api_key=api_key, timeout=timeout, retries=retries)

    def _bind(self, channel: grpc.Channel) -> None:
        self._scopes = scope_grpc.ScopeServiceStub(channel)
        self._memories = pb_grpc.MemoryServiceStub(channel)
        self._long_term = ltm_grpc.LongTermMemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        return Blocking(lambda: AsyncLocalScopeClient(service))

    def set_parent(self, memory_id: str, parent_memory_id: str | None) -> list[str]:
        response = self._call(self._scopes.SetParent, scope_pb.SetParentRequest(
            memory_id=memory_id, parent_memory_id=parent_memory_id or ""))
        return list(response.ancestor_memory_ids)

    def create_child(self, parent_memory_id: str, memory_id: str, kind: str | None = None, *,
                     labels: dict[str, str] | None = None,
                     auto_context_config: AutoContextConfig | None = None) -> MemoryDescription:
        request = _create_child(parent_memory_id, memory_id, kind, labels, auto_context_config)
        return memory_from_proto(self._call(self._scopes.CreateChild, request, retry=False).memory)

    def lineage(self, memory_id: str) -> Lineage:
        return _lineage(self._call(self._scopes.GetLineage, scope_pb.GetLineageRequest(memory_id=memory_id)))

    def iter_children(self, memory_id: str, page_size: int = 0) -> Iterator[str]:
        request = scope_pb.ListChildrenRequest(memory_id=memory_id, page_size=page_size)
        for response in self._paged(self._scopes.ListChildren, request):
            yield from response.child_memory_ids

    def iter_inherited(self, memory_id: str, page_size: int = 0) -> Iterator[InheritedMessage]:
        request = scope_pb.ListInheritedMessagesRequest(memory_id=memory_id, page_size=page_size)
        for response in self._paged(self._scopes.ListInheritedMessages, request):
            yield from (inherited_from_proto(m) for m in response.messages)

    def get_inherited(self, memory_id: str) -> list[InheritedMessage]:
        return list(self.iter_inherited(memory_id))

    def get_context(self, memory_id: str) -> list[Msg]:
        """What a child agent's model should see: the inherited messages, then its own."""
        return [m.message for m in self.get_inherited(memory_id)] + self._messages.get_messages(memory_id)

    def add_messages(self, memory_id: str, msgs: Sequence[Msg], *, visibility: str = LOCAL,
                     request_id: str | None = None) -> int:
        request = _add(memory_id, msgs, request_id or new_request_id(), visibility)
        return self._call(self._memories.AddMessages, request).message_count

    def delete_memory(self, memory_id: str, *, force: bool = False) -> None:
        self._call(self._memories.DeleteMemory, pb.DeleteMemoryRequest(memory_id=memory_id, force=force), retry=False)

    def set_long_term_parent(self, scope: Scope, parent: Scope | None) -> list[Scope]:
        request = scope_pb.SetLongTermParentRequest(scope=scope_to_proto(scope))
        if parent is not None:
            request.parent.CopyFrom(scope_to_proto(parent))
        return _scopes(self._call(self._scopes.SetLongTermParent, request).ancestors)

    def long_term_lineage(self, scope: Scope) -> LongTermLineage:
        response = self._call(self._scopes.GetLongTermLineage,
                              scope_pb.GetLongTermLineageRequest(scope=scope_to_proto(scope)))
        return LongTermLineage(_scopes(response.ancestors), response.child_count)

    def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None = None, *,
               visibility: str = LOCAL) -> list[LongTermItem]:
        response = self._call(self._long_term.Record, _record(scope, msgs, _metadata_json(metadata), visibility),
                              retry=False)
        return [long_term_item_from_proto(i) for i in response.memories]

    def search(self, scope: Scope, query: str, top_k: int = 0) -> list[LongTermItem]:
        response = self._call(self._long_term.SearchLongTermMemories, ltm_pb.SearchLongTermMemoriesRequest(
            scope=scope_to_proto(scope), query=query, top_k=top_k))
        return [long_term_item_from_proto(r.memory) for r in response.results]


class AsyncLocalScopeClient(_LocalClient):
    """`AsyncScopeClient`'s methods over an in-process service (local mode, tenant `default`)."""

    async def _engine(self) -> Any:
        return await self._part("scopes")

    async def set_parent(self, memory_id: str, parent_memory_id: str | None) -> list[str]:
        return list(await (await self._engine()).set_parent(self.tenant, memory_id, parent_memory_id or ""))

    async def create_child(self, parent_memory_id: str, memory_id: str, kind: str | None = None, *,
                           labels: dict[str, str] | None = None,
                           auto_context_config: AutoContextConfig | None = None) -> MemoryDescription:
        config = auto_context_config.to_json() if auto_context_config is not None else None
        info, _ = await (await self._engine()).create_child(self.tenant, parent_memory_id, memory_id, kind, config,
                                                            labels)
        return describe(info.record, info.message_count)

    async def lineage(self, memory_id: str) -> Lineage:
        lineage: Lineage = await (await self._engine()).lineage(self.tenant, memory_id)
        return lineage

    async def iter_children(self, memory_id: str, page_size: int = 0) -> AsyncIterator[str]:
        token = ""
        while True:
            children, token = await (await self._engine()).list_children(self.tenant, memory_id, page_size, token)
            for child in children:
                yield child
            if not token:
                return

    async def iter_inherited(self, memory_id: str, page_size: int = 0) -> AsyncIterator[InheritedMessage]:
        token = ""
        while True:
            page = await (await self._engine()).list_inherited(self.tenant, memory_id, page_size, token)
            for message in page.messages:
                yield message
            token = page.next_page_token
            if not token:
                return

    async def get_inherited(self, memory_id: str) -> list[InheritedMessage]:
        return [m async for m in self.iter_inherited(memory_id)]

    async def get_context(self, memory_id: str) -> list[Msg]:
        """What a child agent's model should see: the inherited messages, then its own."""
        service = await self._handle.get()
        inherited = [m.message for m in await self.get_inherited(memory_id)]
        return inherited + await service.memories.get_messages(self.tenant, memory_id)

    async def add_messages(self, memory_id: str, msgs: Sequence[Msg], *, visibility: str = LOCAL,
                           request_id: str | None = None) -> int:
        result = await (await self._engine()).add_messages(self.tenant, memory_id, msgs, request_id, visibility)
        return int(result.message_count)

    async def delete_memory(self, memory_id: str, *, force: bool = False) -> None:
        await (await self._engine()).delete_memory(self.tenant, memory_id, force)

    async def set_long_term_parent(self, scope: Scope, parent: Scope | None) -> list[Scope]:
        return list(await (await self._engine()).set_long_term_parent(self.tenant, scope, parent))

    async def long_term_lineage(self, scope: Scope) -> LongTermLineage:
        lineage: LongTermLineage = await (await self._engine()).long_term_lineage(self.tenant, scope)
        return lineage

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None = None, *,
                     visibility: str = LOCAL) -> list[LongTermItem]:
        return list(await (await self._engine()).record_long_term(self.tenant, scope, msgs, metadata, visibility))

    async def search(self, scope: Scope, query: str, top_k: int = 0) -> list[LongTermItem]:
        service = await self._handle.get()
        if service.long_term is None:
            from agentscope_memory.errors import UnimplementedError

            raise UnimplementedError("long-term memory is switched off")
        items, _ = await service.long_term.search_ranked(
            self.tenant, scope, query,
            service.long_term.rank_defaults.with_overrides(top_k=top_k) if top_k else None)
        return list(items)


__all__ = ["AsyncLocalScopeClient", "AsyncScopeClient", "ScopeClient"]
