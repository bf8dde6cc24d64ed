"""The JSON codec against AgentScope-Java 1.0.12's verified Jackson output and its traps."""

from __future__ import annotations

import json

import pytest

from agentscope_memory.errors import InvalidArgumentError
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
    block_from_dict,
    block_to_dict,
    msg_from_json,
    msg_to_json,
    to_json_text,
    to_pretty_json,
)

# Verified output of AgentScope-Java 1.0.12 (reference/agentscope-java-core.md §1.4-1.5).
VERIFIED_BLOCKS = [
    '{"type":"text","text":"Hello"}',
    '{"type":"thinking","thinking":"Let me think","metadata":null}',
    '{"type":"thinking","thinking":"x","metadata":{"reasoningDetails":[{"k":"v"}]}}',
    '{"type":"tool_use","id":"call_1","name":"get_weather","input":{"days":3,"city":"Paris","nested":{"a":[1,2]}},"content":null,"metadata":{}}',
    '{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"},"content":"{\\"city\\":\\"Paris\\"}","metadata":{"thoughtSignature":"abc"}}',
    '{"type":"tool_result","id":"call_1","name":"get_weather","output":[{"type":"text","text":"Sunny"}],"metadata":{}}',
    '{"type":"tool_result","id":"call_1","name":"get_weather","output":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"https://x/y.png"}}],"metadata":{"k":"v"}}',
    '{"type":"tool_result","id":"c","name":"n","output":[{"type":"text","text":"[Awaiting external execution]"}],"metadata":{"agentscope_suspended":true}}',
    '{"type":"tool_result","id":null,"name":null,"output":[{"type":"text","text":"hi"}],"metadata":{}}',
    '{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}',
    '{"type":"image","source":{"type":"url","url":"https://example.com/a.png"},"minPixels":100,"maxPixels":2000}',
    '{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}',
    '{"type":"audio","source":{"type":"base64","media_type":"audio/wav","data":"UklGRg=="}}',
    '{"type":"audio","source":{"type":"url","url":"https://example.com/a.wav"}}',
    '{"type":"video","source":{"type":"url","url":"https://example.com/v.mp4"}}',
    '{"type":"video","source":{"type":"url","url":"https://example.com/v.mp4"},"fps":2.0,"maxFrames":10,"minPixels":1,"maxPixels":2,"totalPixels":3}',
]

VERIFIED_MESSAGES = [
    '{"id":"0b1c4f2e-6f1e-4a38-9d7e-1f2a3b4c5d6e","name":"Assistant","role":"ASSISTANT","content":[{"type":"thinking","thinking":"Need weather","metadata":null},{"type":"text","text":"Let me check."},{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"},"content":"{\\"city\\":\\"Paris\\"}","metadata":{}}],"metadata":{"_chat_usage":{"inputTokens":120,"outputTokens":35,"time":1.25,"totalTokens":155},"agentscope_generate_reason":"TOOL_CALLS"},"timestamp":"2026-04-30 10:51:33.123"}',
    '{"id":"9a8b7c6d-0000-4000-8000-000000000001","name":"Assistant","role":"TOOL","content":[{"type":"tool_result","id":"call_1","name":"get_weather","output":[{"type":"text","text":"\\"Sunny, 21C\\""}],"metadata":{}}],"metadata":{},"timestamp":"2026-04-30 10:51:34.456"}',
    '{"id":"m2","name":null,"role":"USER","content":[{"type":"text","text":"ok"}],"metadata":{},"timestamp":"2025-01-01 10:00:00.000"}',
]


@pytest.mark.parametrize("text", VERIFIED_BLOCKS)
def test_verified_block_round_trips_byte_for_byte(text: str) -> None:
    assert to_json_text(block_to_dict(block_from_dict(json.loads(text)))) == text


@pytest.mark.parametrize("text", VERIFIED_MESSAGES)
def test_verified_message_round_trips_byte_for_byte(text: str) -> None:
    assert msg_to_json(msg_from_json(text)) == text


def test_assistant_message_reads_into_typed_blocks() -> None:
    msg = msg_from_json(VERIFIED_MESSAGES[0])
    assert msg.role is MsgRole.ASSISTANT
    assert isinstance(msg.content[0], ThinkingBlock) and msg.content[0].metadata is None
    assert msg.text_content == "Let me check."
    tool_use = msg.content[2]
    assert isinstance(tool_use, ToolUseBlock)
    assert tool_use.input == {"city": "Paris"} and tool_use.content == '{"city":"Paris"}'
    assert msg.metadata["_chat_usage"]["time"] == 1.25
    assert isinstance(msg.metadata["_chat_usage"]["inputTokens"], int)
    assert msg.generate_reason.value == "TOOL_CALLS"


def test_empty_object_reads_as_java_does_and_writes_nulls() -> None:
    # Trap 2: nulls are written; reading `{}` gives null id/role/timestamp, empty content/metadata.
    msg = msg_from_json("{}")
    assert msg == Msg(id=None, name=None, role=None, content=[], metadata={}, timestamp=None)
    assert msg_to_json(msg) == '{"id":null,"name":null,"role":null,"content":[],"metadata":{},"timestamp":null}'


def test_role_is_case_sensitive() -> None:
    # Trap 1: "user" fails in Java.
    with pytest.raises(InvalidArgumentError) as err:
        msg_from_json('{"role":"user"}')
    assert err.value.field == "role"


def test_unknown_properties_are_ignored() -> None:
    msg = msg_from_json('{"id":"a","role":"USER","extra":1,"content":[{"type":"text","text":"t","x":2}]}')
    assert msg.content == [TextBlock("t")]


def test_block_type_is_required_and_known() -> None:
    with pytest.raises(InvalidArgumentError, match="type: is required"):
        msg_from_json('{"content":[{"text":"no type"}]}')
    with pytest.raises(InvalidArgumentError, match="unknown block type 'foo'"):
        msg_from_json('{"content":[{"type":"foo"}]}')


def test_null_content_entries_and_null_metadata_values_are_dropped() -> None:
    msg = msg_from_json('{"content":[null,{"type":"text","text":"a"},null],"metadata":{"k":null,"j":1}}')
    assert msg.content == [TextBlock("a")]
    assert msg.metadata == {"j": 1}
    assert msg_from_json('{"content":null,"metadata":null}').content == []


def test_null_text_and_thinking_become_empty_strings() -> None:
    assert block_from_dict({"type": "text", "text": None}) == TextBlock("")
    assert block_from_dict({"type": "thinking"}) == ThinkingBlock("", None)


def test_tool_use_null_input_and_metadata_become_empty_maps() -> None:
    block = block_from_dict({"type": "tool_use", "id": "c", "name": "n", "input": None, "metadata": None})
    assert block == ToolUseBlock("c", "n", {}, None, {})
    assert to_json_text(block_to_dict(block)) == (
        '{"type":"tool_use","id":"c","name":"n","input":{},"content":null,"metadata":{}}'
    )


def test_tool_result_rejects_null_output_entries_like_list_copy_of() -> None:
    with pytest.raises(InvalidArgumentError, match=r"output\[1\]: must not be null"):
        block_from_dict({"type": "tool_result", "output": [{"type": "text", "text": "a"}, None]})


def test_suspended_is_metadata_only() -> None:
    # Trap 4: `suspended` is never written; it lives in metadata.
    block = ToolResultBlock("c", "n", [TextBlock("x")], {"agentscope_suspended": True})
    assert block.suspended
    assert "suspended" not in block_to_dict(block)
    assert not ToolResultBlock("c", "n", [], {}).suspended


def test_image_and_video_options_read_both_spellings_and_write_camel_case() -> None:
    # Trap 3.
    image = block_from_dict(
        {"type": "image", "source": {"type": "url", "url": "u"}, "min_pixels": 1, "max_pixels": 2}
    )
    assert image == ImageBlock(URLSource("u"), 1, 2)
    assert block_to_dict(image) == {"type": "image", "source": {"type": "url", "url": "u"}, "minPixels": 1, "maxPixels": 2}
    both = block_from_dict(
        {"type": "image", "source": {"type": "url", "url": "u"}, "min_pixels": 1, "minPixels": 7}
    )
    assert both.min_pixels == 7
    video = block_from_dict({"type": "video", "max_frames": 4, "total_pixels": 9})
    assert video == VideoBlock(None, None, 4, None, None, 9)
    assert block_to_dict(video) == {"type": "video", "maxFrames": 4, "totalPixels": 9}


def test_media_sources_require_their_fields() -> None:
    with pytest.raises(InvalidArgumentError, match="source: is required"):
        block_from_dict({"type": "image"})
    with pytest.raises(InvalidArgumentError, match="media_type: is required"):
        block_from_dict({"type": "audio", "source": {"type": "base64", "mediaType": "a/b", "data": "AA=="}})
    assert block_from_dict(
        {"type": "audio", "source": {"type": "base64", "media_type": "audio/wav", "data": "UklGRg=="}}
    ) == AudioBlock(Base64Source("audio/wav", "UklGRg=="))


def test_strings_escape_like_jackson() -> None:
    text = 'quote " backslash \\ nl \n tab \t bell \x07 unicode 用户 emoji 😀 slash /'
    written = to_json_text({"t": text})
    assert written == '{"t":"quote \\" backslash \\\\ nl \\n tab \\t bell \\u0007 unicode 用户 emoji 😀 slash /"}'
    assert json.loads(written)["t"] == text


@pytest.mark.parametrize(
    ("value", "java"),
    [(1.25, "1.25"), (2.0, "2.0"), (0.001, "0.001"), (1e-4, "1.0E-4"), (1e7, "1.0E7"),
     (9999999.0, "9999999.0"), (123456789.0, "1.23456789E8"), (-3.5, "-3.5"), (0.1, "0.1"),
     (10, "10"), (2**63, str(2**63)), (-0.0, "-0.0")],
)
def test_numbers_print_as_java_does(value: float, java: str) -> None:
    assert to_json_text(value) == java


def test_integers_and_floats_keep_their_type_through_a_round_trip() -> None:
    msg = Msg.create(MsgRole.USER, "x", metadata={"i": 3, "f": 3.0, "big": 2**70, "nested": {"l": [1, 1.5]}})
    back = msg_from_json(msg_to_json(msg))
    assert back == msg
    assert type(back.metadata["i"]) is int and type(back.metadata["f"]) is float


def test_create_builds_like_the_java_builder() -> None:
    msg = Msg.create(MsgRole.ASSISTANT, "hi", name="Assistant")
    assert len(msg.id) == 36 and msg.role is MsgRole.ASSISTANT
    assert len(msg.timestamp) == len("2025-01-01 10:00:00.000")
    assert msg.content == [TextBlock("hi")]


def test_python_style_construction_takes_a_role_name_and_a_text() -> None:
    # AgentScope Python's `Msg(name, content, role)` habits; JSON stays case-sensitive (above).
    msg = Msg(name="用户", role="user", content="你好，我住在北京")  # type: ignore[arg-type]
    assert msg.role is MsgRole.USER and msg.content == [TextBlock("你好，我住在北京")]
    assert msg_to_json(msg) == msg_to_json(Msg(name="用户", role=MsgRole.USER, content=[TextBlock("你好，我住在北京")]))
    with pytest.raises(ValueError, match="role: 'customer' is not a role"):
        Msg(role="customer")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="content: must be a list"):
        Msg(role=MsgRole.USER, content={"text": "hi"})  # type: ignore[arg-type]


# Pretty JSON (JsonSession single values), verified against v1.0.12 and v1.0.4 output.
def test_pretty_json_matches_jackson_default_pretty_printer() -> None:
    assert to_pretty_json({"id": "id1", "name": "Assistant", "description": "desc", "systemPrompt": "sys"}) == (
        '{\n  "id" : "id1",\n  "name" : "Assistant",\n  "description" : "desc",\n  "systemPrompt" : "sys"\n}'
    )
    assert to_pretty_json({"activeGroups": ["g1"]}) == '{\n  "activeGroups" : [ "g1" ]\n}'
    msg = msg_from_json(
        '{"id":"a","name":"user","role":"USER","content":[{"type":"text","text":"Hello"}],"metadata":{},"timestamp":"2025-01-01 10:00:00.000"}'
    )
    from agentscope_memory.message import msg_to_dict

    expected = """{
  "memory" : {
    "messages" : [ {
      "id" : "a",
      "name" : "user",
      "role" : "USER",
      "content" : [ {
        "type" : "text",
        "text" : "Hello"
      } ],
      "metadata" : { },
      "timestamp" : "2025-01-01 10:00:00.000"
    } ]
  }
}"""
    assert to_pretty_json({"memory": {"messages": [msg_to_dict(msg)]}}) == expected
    assert to_pretty_json({"a": [], "b": {}}) == '{\n  "a" : [ ],\n  "b" : { }\n}'
