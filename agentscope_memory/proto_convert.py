"""The one place that converts between wire (protobuf) messages and library `Msg` objects.

Used by the server and by the Python client alike. Free-form maps travel as JSON text written
with the Jackson-compatible writer, so ints, floats and nesting survive unchanged. Reading from
the wire validates everything a client could get wrong and names the offending field.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import Any

from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory.message import (
    AudioBlock,
    Base64Source,
    ContentBlock,
    ImageBlock,
    MessageError,
    Msg,
    MsgRole,
    Source,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLSource,
    VideoBlock,
    to_json_text,
)
from agentscope_memory.session.state import StateEntry

__all__ = [
    "msg_from_proto",
    "msg_from_stored",
    "msg_to_proto",
    "msg_to_stored",
    "msgs_from_proto",
    "msgs_to_proto",
    "parse_json_object",
    "entry_from_proto",
    "entry_to_proto",
    "stored_to_proto",
]

_ROLE_TO_PB = {
    None: pb.ROLE_UNSPECIFIED,
    MsgRole.USER: pb.ROLE_USER,
    MsgRole.ASSISTANT: pb.ROLE_ASSISTANT,
    MsgRole.SYSTEM: pb.ROLE_SYSTEM,
    MsgRole.TOOL: pb.ROLE_TOOL,
}
_ROLE_FROM_PB = {v: k for k, v in _ROLE_TO_PB.items()}


# ---------------------------------------------------------------------------------------------
# Library -> wire


def _json_or_empty(value: dict[str, Any]) -> str:
    return to_json_text(value) if value else ""


def _source_to_proto(source: Source) -> pb.Source:
    if isinstance(source, URLSource):
        return pb.Source(url=pb.UrlSource(url=source.url))
    return pb.Source(base64=pb.Base64Source(media_type=source.media_type, data=source.data))


def block_to_proto(block: ContentBlock) -> pb.ContentBlock:
    if isinstance(block, TextBlock):
        return pb.ContentBlock(text=pb.TextBlock(text=block.text))
    if isinstance(block, ThinkingBlock):
        thinking = pb.ThinkingBlock(thinking=block.thinking)
        if block.metadata is not None:
            thinking.metadata_json = to_json_text(block.metadata)
        return pb.ContentBlock(thinking=thinking)
    if isinstance(block, ToolUseBlock):
        tool_use = pb.ToolUseBlock(
            input_json=_json_or_empty(block.input), metadata_json=_json_or_empty(block.metadata)
        )
        if block.id is not None:
            tool_use.id = block.id
        if block.name is not None:
            tool_use.name = block.name
        if block.content is not None:
            tool_use.content = block.content
        return pb.ContentBlock(tool_use=tool_use)
    if isinstance(block, ToolResultBlock):
        result = pb.ToolResultBlock(
            output=[block_to_proto(b) for b in block.output],
            metadata_json=_json_or_empty(block.metadata),
        )
        if block.id is not None:
            result.id = block.id
        if block.name is not None:
            result.name = block.name
        return pb.ContentBlock(tool_result=result)
    if isinstance(block, ImageBlock):
        image = pb.ImageBlock(source=_source_to_proto(block.source))
        if block.min_pixels is not None:
            image.min_pixels = block.min_pixels
        if block.max_pixels is not None:
            image.max_pixels = block.max_pixels
        return pb.ContentBlock(image=image)
    if isinstance(block, AudioBlock):
        return pb.ContentBlock(audio=pb.AudioBlock(source=_source_to_proto(block.source)))
    if isinstance(block, VideoBlock):
        video = pb.VideoBlock()
        if block.source is not None:
            video.source.CopyFrom(_source_to_proto(block.source))
        for name in ("fps", "max_frames", "min_pixels", "max_pixels", "total_pixels"):
            value = getattr(block, name)
            if value is not None:
                setattr(video, name, value)
        return pb.ContentBlock(video=video)
    raise TypeError(f"not a content block: {type(block).__name__}")


def msg_to_proto(msg: Msg) -> pb.Msg:
    out = pb.Msg(
        role=_ROLE_TO_PB[msg.role],
        content=[block_to_proto(b) for b in msg.content],
        metadata_json=_json_or_empty(msg.metadata),
    )
    if msg.id is not None:
        out.id = msg.id
    if msg.name is not None:
        out.name = msg.name
    if msg.timestamp is not None:
        out.timestamp = msg.timestamp
    return out


def msgs_to_proto(msgs: list[Msg]) -> list[pb.Msg]:
    return [msg_to_proto(m) for m in msgs]


# ---------------------------------------------------------------------------------------------
# Wire -> library (validating)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json_object(text: str, field: str) -> dict[str, Any]:
    """Parse a `*_json` field: empty means `{}`; anything but a JSON object is rejected."""
    if not text:
        return {}
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise MessageError(field, f"is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise MessageError(field, "must be a JSON object")
    return value


def float32_shortest(value: float) -> float:
    # A proto `float` arrives widened to double; recover the shortest decimal that maps to the
    # same float32, which is what Java's Float.toString prints.
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        try:
            if struct.pack("<f", candidate) == packed:
                return candidate
        except OverflowError:  # rounded past the float32 range; try more digits
            continue
    return value


def _source_from_proto(source: pb.Source, field: str) -> Source:
    kind = source.WhichOneof("source")
    if kind == "url":
        if not source.url.url:
            raise MessageError(f"{field}.url.url", "is required")
        return URLSource(source.url.url)
    if kind == "base64":
        if not source.base64.media_type:
            raise MessageError(f"{field}.base64.media_type", "is required")
        data = source.base64.data
        if not data:
            raise MessageError(f"{field}.base64.data", "is required")
        try:
            base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise MessageError(
                f"{field}.base64.data", "is not valid base64 (standard alphabet, with padding)"
            ) from None
        return Base64Source(source.base64.media_type, data)
    raise MessageError(field, "has no kind: set url or base64")


def block_from_proto(block: pb.ContentBlock, field: str) -> ContentBlock:
    kind = block.WhichOneof("block")
    if kind == "text":
        return TextBlock(block.text.text)
    if kind == "thinking":
        thinking = block.thinking
        metadata = (
            parse_json_object(thinking.metadata_json, f"{field}.thinking.metadata_json")
            if thinking.HasField("metadata_json")
            else None
        )
        return ThinkingBlock(thinking.thinking, metadata)
    if kind == "tool_use":
        tool_use = block.tool_use
        return ToolUseBlock(
            id=tool_use.id if tool_use.HasField("id") else None,
            name=tool_use.name if tool_use.HasField("name") else None,
            input=parse_json_object(tool_use.input_json, f"{field}.tool_use.input_json"),
            content=tool_use.content if tool_use.HasField("content") else None,
            metadata=parse_json_object(tool_use.metadata_json, f"{field}.tool_use.metadata_json"),
        )
    if kind == "tool_result":
        result = block.tool_result
        metadata = parse_json_object(result.metadata_json, f"{field}.tool_result.metadata_json")
        for key, value in metadata.items():
            if value is None:
                raise MessageError(
                    f"{field}.tool_result.metadata_json", f"value of {key!r} must not be null"
                )
        return ToolResultBlock(
            id=result.id if result.HasField("id") else None,
            name=result.name if result.HasField("name") else None,
            output=[
                block_from_proto(b, f"{field}.tool_result.output[{i}]")
                for i, b in enumerate(result.output)
            ],
            metadata=metadata,
        )
    if kind == "image":
        image = block.image
        if not image.HasField("source"):
            raise MessageError(f"{field}.image.source", "is required")
        return ImageBlock(
            _source_from_proto(image.source, f"{field}.image.source"),
            image.min_pixels if image.HasField("min_pixels") else None,
            image.max_pixels if image.HasField("max_pixels") else None,
        )
    if kind == "audio":
        if not block.audio.HasField("source"):
            raise MessageError(f"{field}.audio.source", "is required")
        return AudioBlock(_source_from_proto(block.audio.source, f"{field}.audio.source"))
    if kind == "video":
        video = block.video
        return VideoBlock(
            _source_from_proto(video.source, f"{field}.video.source")
            if video.HasField("source")
            else None,
            float32_shortest(video.fps) if video.HasField("fps") else None,
            video.max_frames if video.HasField("max_frames") else None,
            video.min_pixels if video.HasField("min_pixels") else None,
            video.max_pixels if video.HasField("max_pixels") else None,
            video.total_pixels if video.HasField("total_pixels") else None,
        )
    raise MessageError(
        field, "has no type: set one of text, thinking, tool_use, tool_result, image, audio, video"
    )


def msg_from_proto(msg: pb.Msg, field: str = "message") -> Msg:
    role = _ROLE_FROM_PB.get(msg.role, ...)
    if role is ...:
        raise MessageError(
            f"{field}.role", f"unknown role {msg.role} (ROLE_USER, ROLE_ASSISTANT, ROLE_SYSTEM, ROLE_TOOL)"
        )
    metadata = parse_json_object(msg.metadata_json, f"{field}.metadata_json")
    return Msg(
        id=msg.id if msg.HasField("id") else None,
        name=msg.name if msg.HasField("name") else None,
        role=role,
        content=[block_from_proto(b, f"{field}.content[{i}]") for i, b in enumerate(msg.content)],
        metadata={k: v for k, v in metadata.items() if v is not None},
        timestamp=msg.timestamp if msg.HasField("timestamp") else None,
    )


def msgs_from_proto(msgs: Any, field: str = "messages") -> list[Msg]:
    return [msg_from_proto(m, f"{field}[{i}]") for i, m in enumerate(msgs)]


# ---------------------------------------------------------------------------------------------
# Stored form: stores keep a message as its serialized `Msg` proto (normalised by a round trip
# through the library type). Serving a page is then a C-level parse, not a Python conversion.


def msg_to_stored(msg: Msg) -> bytes:
    return msg_to_proto(msg).SerializeToString()


def stored_to_proto(data: bytes) -> pb.Msg:
    return pb.Msg.FromString(data)


def msg_from_stored(data: bytes) -> Msg:
    return msg_from_proto(pb.Msg.FromString(data), "stored message")


# ---------------------------------------------------------------------------------------------
# Session state entries: JSON values travel as JSON text.


def entry_to_proto(entry: StateEntry) -> state_pb.StateEntry:
    if entry.items is not None:
        return state_pb.StateEntry(
            key=entry.key, list=state_pb.JsonList(items=[to_json_text(i) for i in entry.items])
        )
    return state_pb.StateEntry(key=entry.key, json=to_json_text(entry.value))


def _parse_json(text: str, field: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise MessageError(field, f"is not valid JSON: {exc}") from None


def entry_from_proto(entry: state_pb.StateEntry, index: int) -> StateEntry:
    field = f"entries[{index}]"
    if not entry.key:
        raise MessageError(f"{field}.key", "is required")
    kind = entry.WhichOneof("value")
    if kind == "list":
        items = [_parse_json(t, f"{field}.list.items[{i}]") for i, t in enumerate(entry.list.items)]
        return StateEntry(entry.key, items=items)
    if kind == "json":
        return StateEntry(entry.key, value=_parse_json(entry.json, f"{field}.json"))
    raise MessageError(field, f"state {entry.key!r} has no value: set json or list")
