"""The at-rest format of messages: a message is stored as its serialized `Msg` proto.

Why the wire proto and not AgentScope's JSON: a page of GetMessages is then the stored bytes
copied into the response as they are (`convert/encoded.py`), with no parsing or conversion per
message; the proto is lossless for every AgentScope-Java message (`convert/` proves the round
trip); and it is compact. What is stored is normalised by one round trip through the library
type, so every stored message is one the library can read back. JSON is produced only where
AgentScope's JSON is the contract (session state, JsonSession files, offloads).
"""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg


def encode_msg(msg: Msg) -> bytes:
    return msg_to_proto(msg).SerializeToString()


def stored_bytes(data: str | bytes) -> bytes:
    """A message row's data (`store.base.Row.data`): always bytes; only other lists hold text."""
    if isinstance(data, str):
        raise TypeError("a stored message is bytes, not text")
    return data


def decode_msg(data: str | bytes, newer_kinds: bool = False) -> Msg:
    """A stored message. `newer_kinds`: for a client's read-only view, leave out blocks of a kind
    a newer server stored (`convert.from_proto`); the store itself reads strictly."""
    return msg_from_proto(pb.Msg.FromString(stored_bytes(data)), "stored message", newer_kinds)


def stored_to_proto(data: str | bytes) -> pb.Msg:
    """A stored message as the wire message, without a round trip through the library type."""
    return pb.Msg.FromString(stored_bytes(data))
