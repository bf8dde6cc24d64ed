"""Parent/child scopes: proto <-> library (visibility, inherited messages, lineages)."""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2 as scope_pb
from agentscope_memory._proto.agentscope.memory.v1 import visibility_pb2 as vis_pb
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.scopes import GLOBAL, LOCAL, SHARED
from agentscope_memory.scopes.engine import InheritedMessage
from agentscope_memory.store.codec import stored_to_proto

VISIBILITY_TO_PB: dict[str, int] = {LOCAL: vis_pb.VISIBILITY_LOCAL, SHARED: vis_pb.VISIBILITY_SHARED, GLOBAL: vis_pb.VISIBILITY_GLOBAL}
VISIBILITY_FROM_PB: dict[int, str] = {**{v: k for k, v in VISIBILITY_TO_PB.items()}, vis_pb.VISIBILITY_UNSPECIFIED: LOCAL}


def visibility_from_proto(value: int, field: str = "visibility") -> str:
    visibility = VISIBILITY_FROM_PB.get(value)
    if visibility is None:
        raise InvalidArgumentError(field, f"is {value}; must be VISIBILITY_LOCAL, VISIBILITY_SHARED or VISIBILITY_GLOBAL")
    return visibility


def visibility_to_proto(visibility: str) -> int:
    return VISIBILITY_TO_PB.get(visibility, vis_pb.VISIBILITY_LOCAL)


def inherited_to_proto(message: InheritedMessage) -> scope_pb.InheritedMessage:
    return scope_pb.InheritedMessage(
        message=stored_to_proto(message.stored), origin_memory_id=message.origin_memory_id,
        visibility=visibility_to_proto(message.visibility),  # type: ignore[arg-type]
        distance=message.distance,
    )


def inherited_from_proto(message: scope_pb.InheritedMessage) -> InheritedMessage:
    return InheritedMessage(message.message.SerializeToString(), message.origin_memory_id,
                            VISIBILITY_FROM_PB.get(message.visibility, LOCAL), message.distance)
