"""The shared validation rules (agentscope_memory.validation), at their limits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as mpb
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.errors import InvalidArgumentError, ResourceExhaustedError
from agentscope_memory.long_term.mem0.engine import from_mem0_id, to_mem0_id
from agentscope_memory.message import (
    Base64Source,
    ImageBlock,
    Msg,
    MsgRole,
    TextBlock,
    ToolResultBlock,
)
from agentscope_memory.validation import MAX_JSON_DEPTH, check_id, parse_json
from agentscope_memory.validation.messages import (
    MAX_BLOCK_DEPTH,
    check_json_value,
    check_msg,
)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_depth_limit_is_exact() -> None:
    assert parse_json(nested(MAX_JSON_DEPTH), "f") is not None
    with pytest.raises(InvalidArgumentError, match=r"^f: is nested more than 256 levels deep"):
        parse_json(nested(MAX_JSON_DEPTH + 1), "f")
    # Brackets inside strings are text, not nesting.
    assert parse_json(json.dumps({"s": "[" * 5000}), "f") == {"s": "[" * 5000}


@pytest.mark.parametrize("text", ['{"a":1e999}', '{"a":-1e999}', '[1E400]'])
def test_numbers_beyond_a_double_are_refused_not_turned_into_strings(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="outside the range of a double"):
        parse_json(text, "metadata_json")


def test_numbers_jackson_reads_are_read_alike() -> None:
    assert parse_json('{"a":1e-999,"b":123456789012345678901234567890,"c":1.5}', "f") == {
        "a": 0.0, "b": 123456789012345678901234567890, "c": 1.5}
    with pytest.raises(InvalidArgumentError, match="at most 1000"):
        parse_json("[" + "1" * 1001 + "]", "f")


def test_lone_surrogates_are_refused_and_pairs_kept() -> None:
    assert parse_json('{"a":"\\ud83d\\ude00"}', "f") == {"a": "😀"}
    assert parse_json('{"a":"\\\\ud800"}', "f") == {"a": "\\ud800"}  # an escaped backslash, not an escape
    for text in ('{"a":"\\ud800"}', '{"a":"\\udfff x"}', '{"\\udc00":1}', '["\\ud83d\\ud83d"]'):
        with pytest.raises(InvalidArgumentError, match="lone surrogate"):
            parse_json(text, "f")


@pytest.mark.parametrize(("value", "reason"), [
    ("会话-42", None), ("..", None), ("a b", None), ("🤖", None), ("x" * 256, None), ("会" * 85, None),
    ("", "is required"), (" \t", "control character"), ("  ", "must not be blank"), ("a\x00", "NUL character"),
    ("\x9f", r"control character U\+009F"), ("x" * 257, "257 bytes"), ("会" * 86, "258 bytes"), ("\ud800", "lone surrogate"),
])
def test_id_rules(value: str, reason: str | None) -> None:
    if reason is None:
        assert check_id(value, "memory_id") == value
    else:
        with pytest.raises(InvalidArgumentError, match=reason):
            check_id(value, "memory_id")


def test_json_values_built_in_python_follow_the_same_rules() -> None:
    deep: list = []
    for _ in range(10_000):  # deeper than the interpreter could recurse
        deep = [deep]
    with pytest.raises(InvalidArgumentError, match="256 levels"):
        check_json_value({"a": deep}, "metadata_json")
    with pytest.raises(InvalidArgumentError, match="non-finite"):
        check_json_value({"a": float("inf")}, "metadata_json")
    with pytest.raises(InvalidArgumentError, match="lone surrogate"):
        check_json_value({"a": "\udc00"}, "metadata_json")


def test_tool_result_nesting_is_bounded_without_recursion() -> None:
    block: Any = TextBlock("x")
    for _ in range(MAX_BLOCK_DEPTH):
        block = ToolResultBlock(id="c", name="f", output=[block])
    check_msg(Msg.create(MsgRole.TOOL, content=[block]), "m")
    for _ in range(5000):
        block = ToolResultBlock(id="c", name="f", output=[block])
    with pytest.raises(InvalidArgumentError, match="more than 32 levels"):
        check_msg(Msg.create(MsgRole.TOOL, content=[block]), "m")


def test_name_limits_are_resource_exhausted() -> None:
    with pytest.raises(ResourceExhaustedError, match=r"^m\.name: is 1025 bytes"):
        check_msg(Msg(None, "n" * 1025, MsgRole.USER, [], {}, None), "m")


def test_reading_never_applies_write_rules() -> None:
    # A stored message that predates the one write validation (invalid base64 once slipped in
    # through LoadState) is still read: clients never reject what the server returns.
    stored = mpb.Msg(role=mpb.ROLE_USER, content=[mpb.ContentBlock(image=mpb.ImageBlock(source=mpb.Source(
        base64=mpb.Base64Source(media_type="image/png", data="not base64!!"))))])
    msg = msg_from_proto(stored, "response.messages[0]")
    assert isinstance(msg.content[0], ImageBlock) and msg.content[0].source == Base64Source("image/png", "not base64!!")
    with pytest.raises(InvalidArgumentError, match="not valid base64"):
        check_msg(msg, "messages[0]")


@pytest.mark.parametrize("value", ["alice", "用户-1", "a b", " lead", "~tilde", "~b64:x", "🤖 bot"])
def test_mem0_ids_round_trip_and_old_ids_stay_unchanged(value: str) -> None:
    encoded = to_mem0_id(value)
    assert from_mem0_id(encoded) == value
    assert not any(c.isspace() for c in encoded)
    if not value.startswith("~") and " " not in value:
        assert encoded == value
