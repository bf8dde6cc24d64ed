"""Python clients for `LongTermMemoryService` (blocking and asyncio), in library types."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client._common import CHANNEL_OPTIONS, DEFAULT_TARGET, DEFAULT_TIMEOUT_S, metadata, translate
from agentscope_memory.long_term.memory import MemoryItem, Scope
from agentscope_memory.message import Msg, to_json_text
from agentscope_memory.proto_convert import msg_from_proto, msg_to_proto, msgs_to_proto

_MODES = {
    "AGENT_CONTROL": pb.LONG_TERM_MEMORY_MODE_AGENT_CONTROL,
    "STATIC_CONTROL": pb.LONG_TERM_MEMORY_MODE_STATIC_CONTROL,
    "BOTH": pb.LONG_TERM_MEMORY_MODE_BOTH,
}


@dataclass(frozen=True)
class Turn:
    """What `begin_turn` stored, and the tools to offer the model (name -> JSON schema)."""

    input: list[Msg]
    tools: dict[str, dict[str, Any]]


def _scope(scope: Scope) -> pb.Scope:
    return pb.Scope(agent_name=scope.agent_name, user_id=scope.user_id, run_name=scope.run_name)


def _item(item: pb.LongTermMemoryItem) -> MemoryItem:
    return MemoryItem(
        id=item.id,
        memory=item.memory,
        scope=Scope(item.scope.agent_name, item.scope.user_id, item.scope.run_name),
        metadata=json.loads(item.metadata_json) if item.metadata_json else {},
        score=item.score if item.HasField("score") else None,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _mode(mode: str) -> int:
    try:
        return _MODES[mode.upper()]
    except KeyError:
        raise ValueError(f"unknown mode {mode!r} (AGENT_CONTROL, STATIC_CONTROL or BOTH)") from None


def _turn(response: pb.BeginTurnResponse) -> Turn:
    return Turn(
        [msg_from_proto(m, "input") for m in response.input],
        {t.name: json.loads(t.parameters_json_schema) for t in response.tools},
    )


class AsyncLongTermClient:
    """Long-term memory over gRPC (asyncio). Failures raise the library's errors."""

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.aio.Channel | None = None,
                 api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self._own_channel = channel is None
        self._channel = channel or grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._stub = pb_grpc.LongTermMemoryServiceStub(self._channel)
        self._metadata = metadata(api_key)
        self.timeout = timeout

    async def close(self) -> None:
        if self._own_channel:
            await self._channel.close()

    async def __aenter__(self) -> AsyncLongTermClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None

    async def record(self, scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None = None) -> list[MemoryItem]:
        request = pb.RecordRequest(scope=_scope(scope), messages=msgs_to_proto(list(msgs)),
                                   metadata_json=to_json_text(metadata) if metadata else "")
        return [_item(i) for i in (await self._call(self._stub.Record, request)).memories]

    async def retrieve(self, scope: Scope, msg: Msg, limit: int = 5) -> str:
        request = pb.RetrieveRequest(scope=_scope(scope), message=msg_to_proto(msg), limit=limit)
        return (await self._call(self._stub.Retrieve, request)).text

    async def record_to_memory(self, scope: Scope, thinking: str, content: Sequence[str]) -> str:
        request = pb.RecordToMemoryRequest(scope=_scope(scope), thinking=thinking, content=list(content))
        return (await self._call(self._stub.RecordToMemory, request)).text

    async def retrieve_from_memory(self, scope: Scope, keywords: Sequence[str]) -> str:
        request = pb.RetrieveFromMemoryRequest(scope=_scope(scope), keywords=list(keywords))
        return (await self._call(self._stub.RetrieveFromMemory, request)).text

    async def list(self, scope: Scope, limit: int = 100) -> list[MemoryItem]:
        request = pb.ListLongTermMemoriesRequest(scope=_scope(scope), page_size=limit)
        return [_item(i) for i in (await self._call(self._stub.ListLongTermMemories, request)).memories]

    async def delete(self, memory_id: str) -> None:
        await self._call(self._stub.DeleteLongTermMemory, pb.DeleteLongTermMemoryRequest(id=memory_id))

    async def forget(self, scope: Scope) -> int:
        """Delete everything of a scope; returns how many memories were deleted."""
        return (await self._call(self._stub.DeleteScope, pb.DeleteScopeRequest(scope=_scope(scope)))).deleted_count

    async def begin_turn(self, memory_id: str, scope: Scope, mode: str, input_msgs: Sequence[Msg]) -> Turn:
        request = pb.BeginTurnRequest(memory_id=memory_id, scope=_scope(scope), mode=_mode(mode),
                                      input=msgs_to_proto(list(input_msgs)))
        return _turn(await self._call(self._stub.BeginTurn, request))

    async def end_turn(self, memory_id: str, scope: Scope, mode: str, *, background: bool = False) -> bool:
        request = pb.EndTurnRequest(memory_id=memory_id, scope=_scope(scope), mode=_mode(mode), async_record=background)
        return (await self._call(self._stub.EndTurn, request)).recorded
