"""Proto <-> library types of `AgentStateService` (both directions: the messages are small)."""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import agent_state_service_pb2 as pb
from agentscope_memory.agent_state import (
    KeyPage,
    ListPage,
    ListWrite,
    SessionIdPage,
    Slot,
    StoredValue,
)
from agentscope_memory.errors import InvalidArgumentError


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
