"""Request builders and response readers shared by the blocking and asyncio clients, in
library types on the outside and through `convert` on the inside."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence, TypeVar

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory.convert.from_proto import entry_from_proto, msg_from_proto, msgs_from_proto, tool_schema_from_proto
from agentscope_memory.convert.to_proto import (
    auto_context_config_to_proto,
    entry_to_proto,
    kind_to_proto,
    mode_to_proto,
    ranking_to_proto,
    scope_to_proto,
)
from agentscope_memory.client.messages import MarksUpdated, MessagesDeleted
from agentscope_memory.client._validate import msg_on_wire, msgs_on_wire
from agentscope_memory.convert.state_chunks import join_pieces, split_entries
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import to_json_text
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES
from agentscope_memory.long_term.modes import Mode
from agentscope_memory.message import Msg
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.tiered.config import TieredConfig

# -- short-term memories ----------------------------------------------------------------------


def delete_messages(memory_id: str, message_ids: Sequence[str], marks: Sequence[str],
                    allow_missing: bool) -> pb.DeleteMessagesRequest:
    return pb.DeleteMessagesRequest(memory_id=memory_id, message_ids=list(message_ids), marks=list(marks),
                                    allow_missing=allow_missing)


def deletes_repeatable(message_ids: Sequence[str], allow_missing: bool) -> bool:
    """Whether a DeleteMessages may be sent again after UNAVAILABLE: a delete by marks, or by
    ids with `allow_missing`, leaves the same messages whether it ran once or twice (a repeat
    only answers a smaller count); by ids without it, a repeat of a delete that did land would
    fail NOT_FOUND on the ids it removed."""
    return not message_ids or allow_missing


def messages_deleted(response: pb.DeleteMessagesResponse) -> MessagesDeleted:
    ids = None if response.deleted_message_ids_omitted else list(response.deleted_message_ids)
    return MessagesDeleted(response.deleted_count, ids, response.message_count, response.etag, response.previous_etag)


def update_marks(memory_id: str, message_ids: Sequence[str] | None, new_mark: str | None, old_mark: str | None,
                 allow_missing: bool) -> pb.UpdateMessageMarksRequest:
    return pb.UpdateMessageMarksRequest(
        memory_id=memory_id, message_ids=list(message_ids or ()), all_messages=message_ids is None,
        new_mark=new_mark, old_mark=old_mark, allow_missing=allow_missing)


def marks_updated(response: pb.UpdateMessageMarksResponse) -> MarksUpdated:
    return MarksUpdated(response.updated_count, response.changed_count, response.message_count, response.etag,
                        response.previous_etag)



def create(
    memory_id: str,
    kind: str,
    labels: dict[str, str] | None,
    allow_existing: bool,
    auto_context_config: AutoContextConfig | None,
    tiered_config: TieredConfig | None = None,
) -> pb.CreateMemoryRequest:
    request = pb.CreateMemoryRequest(
        memory_id=memory_id, kind=kind_to_proto(kind), labels=dict(labels or {}), allow_existing=allow_existing
    )
    if auto_context_config is not None:
        request.auto_context_config.CopyFrom(auto_context_config_to_proto(auto_context_config))
    if tiered_config is not None:
        from agentscope_memory.convert.tiered import tiered_config_to_proto

        request.tiered_config.CopyFrom(tiered_config_to_proto(tiered_config.validate()))
    return request


def add(memory_id: str, msgs: Sequence[Msg], request_id: str) -> pb.AddMessagesRequest:
    return pb.AddMessagesRequest(memory_id=memory_id, messages=msgs_on_wire(msgs), request_id=request_id)


def page_messages(response: pb.GetMessagesResponse) -> list[Msg]:
    return msgs_from_proto(response.messages, "response.messages", newer_kinds=True)


# What the client sends per StreamLoadState piece: under a stock server's 4 MiB receive limit.
LOAD_PIECE_BYTES = DEFAULT_PAGE_BYTES


def save_stream(memory_id: str) -> state_pb.StreamSaveStateRequest:
    return state_pb.StreamSaveStateRequest(memory_id=memory_id)


def joined_state(pieces: Sequence[state_pb.StreamSaveStateResponse]) -> tuple[list[StateEntry], int]:
    """The state from the pieces of a StreamSaveState stream, and the version it was read at."""
    joined = join_pieces((e for piece in pieces for e in piece.entries), 2**62)
    return [entry_from_proto(e, i) for i, e in enumerate(joined)], pieces[0].version if pieces else 0


class _Sized(Protocol):
    def ByteSize(self) -> int: ...


P = TypeVar("P", bound=_Sized)


def reported(pieces: Iterable[P], progress: Callable[[int], None] | None) -> Iterator[P]:
    """The pieces of a state stream, telling `progress` the size of each as it passes."""
    for piece in pieces:
        if progress is not None:
            progress(piece.ByteSize())
        yield piece


def load_stream(
    memory_id: str, entries: list[StateEntry], expected_version: int | None
) -> list[state_pb.StreamLoadStateRequest]:
    """A StreamLoadState stream: the entries in pieces that each fit a 4 MiB message."""
    chunks = split_entries([entry_to_proto(e) for e in entries], LOAD_PIECE_BYTES)
    requests = [state_pb.StreamLoadStateRequest(entries=chunk) for chunk in chunks]
    requests[0].memory_id = memory_id
    if expected_version is not None:
        requests[0].expected_version = expected_version
    return requests


def long_term_pages(scope: Scope, limit: int, token: str) -> ltm_pb.ListLongTermMemoriesRequest:
    return ltm_pb.ListLongTermMemoriesRequest(scope=scope_to_proto(scope), page_size=min(limit, 1000), page_token=token)


# -- long-term memory -------------------------------------------------------------------------


def update_long_term(
    memory_id: str, text: str | None, importance: float | None, metadata: dict[str, Any] | None,
    pinned: bool | None = None,
) -> ltm_pb.UpdateLongTermMemoryRequest:
    request = ltm_pb.UpdateLongTermMemoryRequest(id=memory_id, metadata_json=to_json_text(metadata) if metadata else "")
    if text is not None:
        request.text = text
    if importance is not None:
        request.importance = importance
    if pinned is not None:
        request.pinned = pinned
    return request


def record(scope: Scope, msgs: Sequence[Msg], metadata: dict[str, Any] | None,
           pinned: bool = False) -> ltm_pb.RecordRequest:
    return ltm_pb.RecordRequest(
        scope=scope_to_proto(scope), messages=msgs_on_wire(msgs),
        metadata_json=to_json_text(metadata) if metadata else "", pinned=pinned,
    )


def retrieve(scope: Scope, msg: Msg, limit: int) -> ltm_pb.RetrieveRequest:
    return ltm_pb.RetrieveRequest(scope=scope_to_proto(scope), message=msg_on_wire(msg), limit=limit)


def begin_turn(memory_id: str, scope: Scope, mode: Mode | str, input_msgs: Sequence[Msg]) -> ltm_pb.BeginTurnRequest:
    return ltm_pb.BeginTurnRequest(
        memory_id=memory_id, scope=scope_to_proto(scope), mode=mode_to_proto(mode), input=msgs_on_wire(input_msgs, "input")
    )


def end_turn(memory_id: str, scope: Scope, mode: Mode | str, background: bool) -> ltm_pb.EndTurnRequest:
    return ltm_pb.EndTurnRequest(
        memory_id=memory_id, scope=scope_to_proto(scope), mode=mode_to_proto(mode), async_record=background
    )


def turn(response: ltm_pb.BeginTurnResponse) -> tuple[list[Msg], dict[str, dict[str, Any]]]:
    """What BeginTurn stored, and the tools to offer the model (name -> JSON schema)."""
    tools = [tool_schema_from_proto(t) for t in response.tools]
    return [msg_from_proto(m, "input", newer_kinds=True) for m in response.input], {t.name: t.parameters for t in tools}


SEARCH_WEIGHTS = ("alpha", "beta", "gamma", "delta", "decay_rate", "dense_weight")


def search(scope: Scope, query: str, top_k: int, weights: dict[str, float | None],
           memory_types: Sequence[str], domains: Sequence[str], route_query: bool,
           ranking: str = "", metadata: dict[str, Any] | None = None) -> ltm_pb.SearchLongTermMemoriesRequest:
    """A ranked search: unset weights take the server's defaults."""
    unknown = set(weights) - set(SEARCH_WEIGHTS)
    if unknown:
        raise TypeError(f"unknown search options: {', '.join(sorted(unknown))}")
    request = ltm_pb.SearchLongTermMemoriesRequest(scope=scope_to_proto(scope), query=query, top_k=top_k,
                                                   memory_types=list(memory_types), domains=list(domains),
                                                   route_query=route_query, ranking=ranking_to_proto(ranking),
                                                   metadata_filter_json=to_json_text(metadata) if metadata else "")
    for name, value in weights.items():
        if value is not None:
            setattr(request, name, value)
    return request
