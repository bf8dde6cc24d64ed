"""Proto <-> library types of `AgentStateService` (both directions: the messages are small)."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterator, Sequence
from dataclasses import dataclass

from agentscope_memory._proto.agentscope.memory.v1 import agent_state_service_pb2 as pb
from agentscope_memory.agent_state import (
    KeyPage,
    ListPage,
    ListWrite,
    SessionIdPage,
    Slot,
    StoredValue,
)
from agentscope_memory.convert.state_chunks import split_text, split_utf8
from agentscope_memory.errors import InvalidArgumentError, MemoryServiceError, ResourceExhaustedError

# The most JSON text one message of StreamPutValue / StreamGetValue carries (UTF-8 bytes): well
# under gRPC's default 4 MiB per message, and small enough to keep a stream moving.
PIECE_BYTES = 1024 * 1024


def slot_from_proto(request: object) -> Slot:
    """The request's `slot` (required)."""
    if not request.HasField("slot"):  # type: ignore[attr-defined]
        raise InvalidArgumentError("slot", "is required (user_id and session_id)")
    slot = request.slot  # type: ignore[attr-defined]
    return Slot(slot.user_id, slot.session_id)


def slot_to_proto(slot: Slot) -> pb.StateSlot:
    return pb.StateSlot(user_id=slot.user_id, session_id=slot.session_id)


def expected_from_proto(request: object) -> int | None:
    """The request's `condition.expected_version`, None when the write is unconditional."""
    if not request.HasField("condition"):  # type: ignore[attr-defined]
        return None
    condition = request.condition  # type: ignore[attr-defined]
    return condition.expected_version if condition.HasField("expected_version") else None


def condition_to_proto(expected_version: int | None) -> pb.WriteCondition | None:
    return None if expected_version is None else pb.WriteCondition(expected_version=expected_version)


def value_to_proto(value: StoredValue) -> pb.GetValueResponse:
    return pb.GetValueResponse(found=value.found, json=value.json, version=value.version)


def value_from_proto(response: pb.GetValueResponse) -> StoredValue:
    return StoredValue(response.found, response.json, response.version)


def list_page_to_proto(page: ListPage) -> pb.GetListResponse:
    return pb.GetListResponse(
        found=page.found, items=page.items, version=page.version, length=page.length,
        next_page_token=page.next_page_token,
    )


def list_page_from_proto(response: pb.GetListResponse) -> ListPage:
    return ListPage(response.found, list(response.items), response.version, response.length, response.next_page_token)


def list_write_from_proto(response: pb.PutListResponse | pb.AppendListResponse) -> ListWrite:
    return ListWrite(response.version, response.length)


def session_ids_to_proto(page: SessionIdPage) -> pb.ListSessionIdsResponse:
    return pb.ListSessionIdsResponse(session_ids=page.session_ids, next_page_token=page.next_page_token)


def session_ids_from_proto(response: pb.ListSessionIdsResponse) -> SessionIdPage:
    return SessionIdPage(list(response.session_ids), response.next_page_token)


def keys_to_proto(page: KeyPage) -> pb.ListKeysResponse:
    return pb.ListKeysResponse(
        keys=[pb.StateKey(key=key, list=kind == "list") for kind, key in page.keys],
        next_page_token=page.next_page_token,
    )


def keys_from_proto(response: pb.ListKeysResponse) -> KeyPage:
    return KeyPage([("list" if k.list else "value", k.key) for k in response.keys], response.next_page_token)


# -- values in pieces (StreamPutValue, StreamGetValue) ---------------------------------------


@dataclass(frozen=True)
class StreamedPut:
    """A `StreamPutValue` stream, joined."""

    slot: Slot
    key: str
    expected_version: int | None
    json: str


async def join_put_stream(
    requests: AsyncIterable[pb.StreamPutValueRequest], max_bytes: int,
    check_first: Callable[[Slot, str, int | None, int], None],
) -> StreamedPut:
    """The value of a `StreamPutValue` stream. The first message must name the slot and the key
    (`check_first(slot, key, expected_version, total_bytes)` validates them before any further
    piece is read); later ones leave them unset or repeat them. INVALID_ARGUMENT for a stream
    without a message, with a changed slot, key, condition or size, or whose pieces do not add up
    to the size it declared; RESOURCE_EXHAUSTED as soon as the pieces exceed `max_bytes`."""
    first: pb.StreamPutValueRequest | None = None
    slot = Slot("", "")
    expected: int | None = None
    pieces: list[str] = []
    size = 0
    async for request in requests:
        if first is None:
            first = request
            slot = slot_from_proto(request)
            expected = expected_from_proto(request)
            check_first(slot, request.key, expected, request.total_bytes)
        else:
            _same_as_first(request, first)
        piece = request.json_piece
        if piece:
            size += len(piece.encode("utf-8"))
            if size > max_bytes:
                raise ResourceExhaustedError("json_piece", f"the pieces exceed {max_bytes} bytes, the most one value holds")
            pieces.append(piece)
    if first is None:
        raise InvalidArgumentError("slot", "is required: the stream sent no message (the first names the slot and the key)")
    if first.total_bytes and size != first.total_bytes:
        raise InvalidArgumentError(
            "total_bytes", f"is {first.total_bytes}, but the pieces add up to {size} bytes (the stream was cut short?)"
        )
    return StreamedPut(slot, first.key, expected, "".join(pieces))


def _same_as_first(request: pb.StreamPutValueRequest, first: pb.StreamPutValueRequest) -> None:
    same = "must be left unset after the first message or be the same in every message"
    if request.HasField("slot") and request.slot != first.slot:
        raise InvalidArgumentError("slot", same)
    if request.key and request.key != first.key:
        raise InvalidArgumentError("key", same)
    if request.HasField("condition") and request.condition != first.condition:
        raise InvalidArgumentError("condition", same)
    if request.total_bytes and request.total_bytes != first.total_bytes:
        raise InvalidArgumentError("total_bytes", same)


def put_stream_to_proto(
    slot: Slot, key: str, json_text: str, expected_version: int | None, piece_bytes: int = PIECE_BYTES,
) -> list[pb.StreamPutValueRequest]:
    """A `StreamPutValue` stream for a value: the first message names it, every message carries
    a piece of at most `piece_bytes`."""
    pieces = split_text(json_text, piece_bytes)
    total = len(json_text.encode("utf-8", "surrogatepass"))
    out = [pb.StreamPutValueRequest(slot=slot_to_proto(slot), key=key, condition=condition_to_proto(expected_version),
                                    total_bytes=total, json_piece=pieces[0])]
    out += [pb.StreamPutValueRequest(json_piece=piece) for piece in pieces[1:]]
    return out


def value_to_stream(value: StoredValue, piece_bytes: int = PIECE_BYTES) -> Iterator[pb.StreamGetValueResponse]:
    """A value as `StreamGetValue` messages."""
    if not value.found:
        yield pb.StreamGetValueResponse(found=False)
        return
    data = value.json.encode("utf-8")
    for piece in split_utf8(data, piece_bytes):
        yield pb.StreamGetValueResponse(found=True, version=value.version, total_bytes=len(data), json_piece=piece)


def value_from_stream(responses: Sequence[pb.StreamGetValueResponse]) -> StoredValue:
    """The value `StreamGetValue` messages carry, checked against the size they announce."""
    if not responses or not responses[0].found:
        return StoredValue(False, "", 0)
    text = "".join(r.json_piece for r in responses)
    first = responses[0]
    if len(text.encode("utf-8")) != first.total_bytes:
        raise MemoryServiceError(f"the value's pieces add up to {len(text.encode('utf-8'))} bytes, not {first.total_bytes}")
    return StoredValue(True, text, first.version)
