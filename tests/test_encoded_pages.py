"""A page of messages encoded from the stored bytes decodes as the page built from objects."""

from __future__ import annotations

import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.convert.encoded import Encoded, with_stored_messages
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store.codec import decode_msg, encode_msg, stored_to_proto


def _stored(texts: list[str]) -> list[bytes]:
    return [encode_msg(Msg.create(MsgRole.USER if i % 2 == 0 else MsgRole.ASSISTANT, t, name="用户"))
            for i, t in enumerate(texts)]


# Sizes around each length-prefix boundary (1, 2, 3 and 4 bytes of varint), Chinese and English.
TEXTS = ["", "你好", "a" * 100, "b" * 127, "明" * 60, "c" * 16_300, "d" * 16_400, "长" * 800_000]


@pytest.mark.parametrize("fields", [
    dict(next_page_token="", total_size=0, etag="", not_modified=False, delta=False),
    dict(next_page_token="tok-下一页", total_size=12_345, etag="etag-1", not_modified=False, delta=True),
])
def test_a_page_decodes_as_the_same_response_built_from_objects(fields: dict) -> None:
    stored = _stored(TEXTS)
    encoded = with_stored_messages(pb.GetMessagesResponse(**fields), stored)
    built = pb.GetMessagesResponse(messages=[stored_to_proto(d) for d in stored], **fields)
    assert isinstance(encoded, Encoded)
    decoded = pb.GetMessagesResponse.FromString(encoded.data)
    assert decoded == built
    assert [decode_msg(m.SerializeToString()).content[0].text for m in decoded.messages] == TEXTS
    assert len(encoded.data) == built.ByteSize()


def test_another_response_with_messages_and_an_unchanged_page() -> None:
    stored = _stored(["原文", "original"])
    encoded = with_stored_messages(pb.GetOriginalMessagesResponse(next_page_token="t", total_size=9), stored)
    assert pb.GetOriginalMessagesResponse.FromString(encoded.data) == pb.GetOriginalMessagesResponse(
        messages=[stored_to_proto(d) for d in stored], next_page_token="t", total_size=9)
    unchanged = with_stored_messages(pb.GetMessagesResponse(total_size=3, etag="e", not_modified=True), [])
    assert pb.GetMessagesResponse.FromString(unchanged.data) == pb.GetMessagesResponse(
        total_size=3, etag="e", not_modified=True)


def test_only_stored_bytes_into_an_empty_messages_field() -> None:
    with pytest.raises(TypeError):
        with_stored_messages(pb.GetMessagesResponse(), ["not bytes"])
    with pytest.raises(ValueError):
        with_stored_messages(pb.GetMessagesResponse(messages=[stored_to_proto(_stored(["x"])[0])]), _stored(["y"]))
