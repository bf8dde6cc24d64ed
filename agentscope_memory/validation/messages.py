"""The one validation of a message before it is stored, whatever path it came by.

AddMessages, LoadState, ImportSession (JsonSession files), long-term Record and every future
write path call `check_msgs` on the library `Msg`, after conversion from proto or JSON. The
converters only translate; whether a message may be stored is decided here, once. Readers
(the Python clients reading responses, the store reading its rows) never call this: what the
server returns is never rejected on the client side.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Sequence
from typing import Any

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import (
    AudioBlock,
    Base64Source,
    ContentBlock,
    ImageBlock,
    Msg,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from agentscope_memory.validation.ids import utf8_length
from agentscope_memory.validation.json_text import MAX_JSON_DEPTH
from agentscope_memory.validation.text import MAX_NAME_BYTES, check_text

# Tool results holding tool results: protobuf refuses to decode messages nested more than 100
# levels, and each level of tool result costs two, so a stored message must stay well below.
MAX_BLOCK_DEPTH = 32


def check_json_value(value: Any, field: str, base_depth: int = 1, allow_nul: bool = True) -> None:
    """A JSON value built in Python (metadata, tool input): the same rules as `parse_json` (depth,
    finite numbers, Unicode text), checked without recursion so any input is safe to check.
    `allow_nul=False` also refuses NUL in keys and strings (PostgreSQL `jsonb` cannot hold it)."""
    stack: list[tuple[Any, int]] = [(value, base_depth)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                where = "" if base_depth == 1 else " within its message's AgentScope JSON"
                raise InvalidArgumentError(field, f"is nested more than {MAX_JSON_DEPTH} levels deep{where} (the limit)")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise InvalidArgumentError(field, f"has a non-string key {key!r}")
                    utf8_length(key, field)
                    if not allow_nul and "\x00" in key:
                        raise InvalidArgumentError(field, "contains a NUL character in a key")
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            utf8_length(item, field)
            if not allow_nul and "\x00" in item:
                raise InvalidArgumentError(field, "contains a NUL character, which this field cannot store")
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidArgumentError(
                field, f"holds the number {item}; JSON has no non-finite numbers, so it is refused"
            )
        elif item is not None and not isinstance(item, (bool, int, float)):
            raise InvalidArgumentError(field, f"holds a {type(item).__name__}, which is not JSON")


def _check_name(value: str | None, field: str) -> None:
    if value is not None:
        check_text(value, field, MAX_NAME_BYTES)
        # Ids and names are looked up and logged; NUL cannot reach a PostgreSQL text parameter.
        if "\x00" in value:
            raise InvalidArgumentError(field, "contains a NUL character, which ids and names cannot hold")


def _check_source(source: Any, field: str) -> None:
    if isinstance(source, Base64Source):
        _check_name(source.media_type, f"{field}.base64.media_type")
        try:
            base64.b64decode(source.data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgumentError(
                f"{field}.base64.data", "is not valid base64 (standard alphabet, with padding)"
            ) from None
    elif source is not None:
        utf8_length(source.url, f"{field}.url.url")


def _check_block(block: ContentBlock, field: str) -> None:
    # Iterative over nested tool results, so a hostile depth cannot exhaust the stack.
    # (block, field path, tool-result nesting, depth of the block's object in the message JSON:
    # message 1, content list 2, block 3, and two more per tool result it sits in).
    stack: list[tuple[ContentBlock, str, int, int]] = [(block, field, 1, 3)]
    while stack:
        item, where, depth, json_depth = stack.pop()
        if isinstance(item, ToolResultBlock):
            if depth > MAX_BLOCK_DEPTH:
                raise InvalidArgumentError(
                    where, f"nests tool results more than {MAX_BLOCK_DEPTH} levels deep (the limit)"
                )
            _check_name(item.id, f"{where}.tool_result.id")
            _check_name(item.name, f"{where}.tool_result.name")
            check_json_value(item.metadata, f"{where}.tool_result.metadata_json", json_depth + 1)
            stack.extend(
                (child, f"{where}.tool_result.output[{i}]", depth + 1, json_depth + 2)
                for i, child in enumerate(item.output)
            )
        elif isinstance(item, ToolUseBlock):
            _check_name(item.id, f"{where}.tool_use.id")
            _check_name(item.name, f"{where}.tool_use.name")
            check_json_value(item.input, f"{where}.tool_use.input_json", json_depth + 1)
            check_json_value(item.metadata, f"{where}.tool_use.metadata_json", json_depth + 1)
            if item.content is not None:
                utf8_length(item.content, f"{where}.tool_use.content")
        elif isinstance(item, ThinkingBlock):
            utf8_length(item.thinking, f"{where}.thinking.thinking")
            if item.metadata is not None:
                check_json_value(item.metadata, f"{where}.thinking.metadata_json", json_depth + 1)
        elif isinstance(item, ImageBlock):
            _check_source(item.source, f"{where}.image.source")
        elif isinstance(item, AudioBlock):
            _check_source(item.source, f"{where}.audio.source")
        elif isinstance(item, VideoBlock):
            _check_source(item.source, f"{where}.video.source")
            if item.fps is not None and not math.isfinite(item.fps):
                raise InvalidArgumentError(f"{where}.video.fps", "must be a finite number")
        else:
            text = getattr(item, "text", None)
            if isinstance(text, str):
                utf8_length(text, f"{where}.text.text")


def check_msg(msg: Msg, field: str) -> Msg:
    """`msg` may be stored: names within limits, valid base64, bounded nesting, JSON rules.

    Nesting is counted in the message's AgentScope JSON (metadata starts at level 2, a tool
    input at 4), so every stored message's JSON stays within `MAX_JSON_DEPTH` and whatever
    SaveState returns, LoadState and the clients read back."""
    _check_name(msg.id, f"{field}.id")
    _check_name(msg.name, f"{field}.name")
    _check_name(msg.timestamp, f"{field}.timestamp")
    check_json_value(msg.metadata, f"{field}.metadata_json", 2)
    for i, block in enumerate(msg.content):
        _check_block(block, f"{field}.content[{i}]")
    return msg


def check_msgs(msgs: Sequence[Msg], field: str = "messages") -> Sequence[Msg]:
    for i, msg in enumerate(msgs):
        check_msg(msg, f"{field}[{i}]")
    return msgs
