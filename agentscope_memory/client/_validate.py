"""Client-side checks of the ids in a request, before it is sent: the server's own rules
(`agentscope_memory.validation`), so a bad id fails at the call with the server's message
instead of after a round trip; messages that cannot be put on the wire at all are named the
same way. Responses are never checked: what the server returns is read."""

from __future__ import annotations

from typing import Any, Sequence

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory.convert.to_proto import msg_to_proto, msgs_to_proto
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg
from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.messages import check_msg, check_msgs

_ID_FIELDS = ("memory_id", "session_id")


def check_request(request: Any) -> None:
    if isinstance(request, (list, tuple)):
        # A client-streaming call (StreamLoadState): the first piece names the memory.
        if request:
            check_request(request[0])
        return
    fields = request.DESCRIPTOR.fields_by_name
    for name in _ID_FIELDS:
        if name in fields:
            check_id(getattr(request, name), name)
    if "memory_ids" in fields:
        for i, memory_id in enumerate(request.memory_ids):
            check_id(memory_id, f"memory_ids[{i}]")
    if "scope" in fields:
        scope = request.scope
        Scope(scope.agent_name, scope.user_id, scope.run_name).validate("scope")
    if "id" in fields and request.DESCRIPTOR.name.endswith("LongTermMemoryRequest"):
        check_id(request.id, "id")


def msgs_on_wire(msgs: Sequence[Msg], field: str = "messages") -> list[pb.Msg]:
    """`msgs` as protobuf messages for a request. Text holding a lone surrogate (AgentScope
    keeps them: its JSONSession reads with `surrogatepass`) has no UTF-8 form and protobuf
    refuses it with a bare UnicodeEncodeError; the server's own check names the field instead."""
    try:
        return msgs_to_proto(list(msgs))
    except UnicodeEncodeError:
        check_msgs(msgs, field)
        raise


def msg_on_wire(msg: Msg, field: str = "message") -> pb.Msg:
    """One message as `msgs_on_wire` converts it."""
    try:
        return msg_to_proto(msg)
    except UnicodeEncodeError:
        check_msg(msg, field)
        raise
