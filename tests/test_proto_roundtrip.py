"""Msg -> proto -> bytes -> proto -> Msg is lossless for every block type (property-based)."""

from __future__ import annotations

import base64
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory.message import (
    AudioBlock,
    Base64Source,
    ImageBlock,
    Msg,
    MsgRole,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLSource,
    VideoBlock,
    msg_from_json,
    msg_to_json,
)
from agentscope_memory.convert.from_proto import float32_shortest, msg_from_proto
from agentscope_memory.convert.to_proto import msg_to_proto

# Strings that protobuf can carry: any unicode except lone surrogates.
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
big_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=5000)
opt_text = st.none() | text
json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
json_object = st.dictionaries(text, json_value, max_size=5)
non_null_object = st.dictionaries(text, json_value.filter(lambda v: v is not None), max_size=5)
int32 = st.none() | st.integers(min_value=-(2**31), max_value=2**31 - 1)


fps = st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False).map(float32_shortest)
source = st.builds(URLSource, text.filter(bool)) | st.builds(
    Base64Source,
    text.filter(bool),
    st.binary(min_size=1, max_size=64).map(lambda b: base64.b64encode(b).decode()),
)
leaf_block = st.one_of(
    st.builds(TextBlock, big_text),
    st.builds(ThinkingBlock, text, st.none() | json_object),
    st.builds(ToolUseBlock, opt_text, opt_text, json_object, opt_text, json_object),
    st.builds(ImageBlock, source, int32, int32),
    st.builds(AudioBlock, source),
    st.builds(VideoBlock, st.none() | source, fps, int32, int32, int32, int32),
)
block = leaf_block | st.builds(
    ToolResultBlock, opt_text, opt_text, st.lists(leaf_block, max_size=3), non_null_object
)
message = st.builds(
    Msg,
    opt_text,
    opt_text,
    st.none() | st.sampled_from(list(MsgRole)),
    st.lists(block, max_size=6),
    non_null_object,
    opt_text,
)


def _same(a: object, b: object) -> bool:
    # -0.0 == 0.0 in Python; compare floats by their bits so a sign flip is caught.
    if isinstance(a, float) and isinstance(b, float):
        return math.copysign(1, a) == math.copysign(1, b) and a == b
    return a == b and type(a) is type(b)


def _deep_same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_deep_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_same(x, y) for x, y in zip(a, b, strict=True))
    return _same(a, b)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message)
def test_every_message_survives_the_wire(msg: Msg) -> None:
    wire = pb.Msg.FromString(msg_to_proto(msg).SerializeToString())
    back = msg_from_proto(wire)
    assert back == msg
    # Same JSON byte for byte, so ints stay ints, floats floats, and key order is kept.
    assert msg_to_json(back) == msg_to_json(msg)


@settings(max_examples=200, deadline=None)
@given(message)
def test_json_round_trip_is_lossless(msg: Msg) -> None:
    back = msg_from_json(msg_to_json(msg))
    assert back == msg
    assert _deep_same(back.metadata, msg.metadata)


def test_null_versus_empty_is_kept() -> None:
    msg = Msg(
        id=None,
        name="",
        role=None,
        content=[ThinkingBlock("t", None), ThinkingBlock("t", {}), ToolUseBlock(None, "", {}, None, {})],
        metadata={},
        timestamp="",
    )
    back = msg_from_proto(pb.Msg.FromString(msg_to_proto(msg).SerializeToString()))
    assert back == msg
    assert back.id is None and back.name == "" and back.timestamp == ""
    assert back.content[0].metadata is None and back.content[1].metadata == {}


def test_integer_and_float_metadata_stay_distinct_on_the_wire() -> None:
    msg = Msg.create(MsgRole.USER, "x", metadata={"count": 3, "ratio": 3.0, "huge": 2**64 + 1})
    back = msg_from_proto(msg_to_proto(msg))
    assert type(back.metadata["count"]) is int
    assert type(back.metadata["ratio"]) is float
    assert back.metadata["huge"] == 2**64 + 1


def test_large_unicode_text_survives() -> None:
    payload = "用户😀ü" * 100_000
    msg = Msg.create(MsgRole.ASSISTANT, payload)
    assert msg_from_proto(pb.Msg.FromString(msg_to_proto(msg).SerializeToString())).text_content == payload


def test_video_fps_keeps_its_float_value() -> None:
    msg = Msg.create(MsgRole.USER, content=[VideoBlock(URLSource("u"), 29.97, 10, None, None, None)])
    back = msg_from_proto(pb.Msg.FromString(msg_to_proto(msg).SerializeToString()))
    assert back.content[0].fps == 29.97
    assert '"fps":29.97' in msg_to_json(back)
