"""What the WatchMessages tests share: two tenants' keys and requests adding text messages."""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole

KEYS = {"key-for-alice-000001": "alice", "key-for-bob-00000001": "bob"}
ALICE = [("x-api-key", "key-for-alice-000001")]
BOB = [("x-api-key", "key-for-bob-00000001")]


def add(memory_id: str, *texts: str, watch_id: str = "", request_id: str = "") -> pb.AddMessagesRequest:
    """AddMessages of one user message per text."""
    return pb.AddMessagesRequest(memory_id=memory_id, watch_id=watch_id, request_id=request_id,
                                 messages=[msg_to_proto(Msg.create(MsgRole.USER, t)) for t in texts])


def texts(messages) -> list[str]:
    """The text of each (wire) message."""
    return [m.content[0].text.text for m in messages]
