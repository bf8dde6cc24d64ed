"""Responses encoded straight from stored messages, without parsing them.

A stored message is its serialized `Msg` already (`store/codec.py`). Building a page of messages
as protobuf objects parses every message only for protobuf to serialize it again, which costs
more than the rest of a `GetMessages` call. Here the response's other fields are serialized as
usual and each stored message is appended as one more `messages` entry: on the wire a repeated
message field is the concatenation of its entries, which may come after the other fields, so a
client decodes exactly the response it would have got from the objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from agentscope_memory.store.codec import stored_bytes

__all__ = ["Encoded", "with_stored_messages"]


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response message in its wire form (`data`): the server sends it as it is."""

    data: bytes


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@lru_cache(maxsize=None)
def _messages_tag(descriptor: Descriptor) -> bytes:
    # The `messages` field's number, with wire type 2 (length-delimited).
    return _varint(descriptor.fields_by_name["messages"].number << 3 | 2)


def with_stored_messages(response: Message, stored: Sequence[str | bytes]) -> Encoded:
    """`response` (its `messages` field left empty) with the stored messages `stored` as its
    `messages`, in order."""
    if len(response.messages):
        raise ValueError("the response already has messages")
    tag = _messages_tag(response.DESCRIPTOR)
    parts = [response.SerializeToString()]
    for item in stored:
        data = stored_bytes(item)
        parts += (tag, _varint(len(data)), data)
    return Encoded(b"".join(parts))
