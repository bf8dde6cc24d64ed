"""AgentScope messages and their JSON, exactly as AgentScope-Java 1.0.12 writes and reads it.

AgentScope-Java serialises `Msg` with a plain Jackson `ObjectMapper`: nulls are written, field
order is declaration order, unknown properties are ignored, and the block type travels in a
`type` discriminator. This module mirrors that shape so JSON written here loads in Java and the
reverse (see reference/agentscope-java-core.md §1 and the traps in §10).
"""

from __future__ import annotations

import datetime as _dt
import math
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Union

from agentscope_memory.errors import InvalidArgumentError

__all__ = [
    "AudioBlock",
    "Base64Source",
    "ContentBlock",
    "GenerateReason",
    "ImageBlock",
    "MessageError",
    "Msg",
    "MsgRole",
    "Source",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "URLSource",
    "VideoBlock",
    "block_from_dict",
    "block_to_dict",
    "java_timestamp",
    "msg_from_dict",
    "msg_from_json",
    "msg_to_dict",
    "msg_to_json",
    "to_json_text",
    "to_pretty_json",
]

# A message that cannot be read is an invalid argument wherever it comes from.
MessageError = InvalidArgumentError

METADATA_GENERATE_REASON = "agentscope_generate_reason"


class MsgRole(str, Enum):
    """Java `MsgRole`; written and read as the upper-case name."""

    USER = "USER"
    ASSISTANT = "ASSISTANT"
    SYSTEM = "SYSTEM"
    TOOL = "TOOL"


class GenerateReason(str, Enum):
    """Java `GenerateReason` (1.0.12), kept in metadata `agentscope_generate_reason`."""

    MODEL_STOP = "MODEL_STOP"
    TOOL_CALLS = "TOOL_CALLS"
    STRUCTURED_OUTPUT = "STRUCTURED_OUTPUT"
    TOOL_SUSPENDED = "TOOL_SUSPENDED"
    REASONING_STOP_REQUESTED = "REASONING_STOP_REQUESTED"
    ACTING_STOP_REQUESTED = "ACTING_STOP_REQUESTED"
    INTERRUPTED = "INTERRUPTED"
    MAX_ITERATIONS = "MAX_ITERATIONS"


@dataclass
class URLSource:
    """Media at a URL (`{"type":"url","url":...}`)."""

    url: str


@dataclass
class Base64Source:
    """Inline media (`{"type":"base64","media_type":...,"data":...}`)."""

    media_type: str
    data: str


Source = Union[URLSource, Base64Source]


@dataclass
class TextBlock:
    text: str = ""


@dataclass
class ThinkingBlock:
    thinking: str = ""
    # None is meaningful: Java writes `"metadata":null` for a thinking block without metadata.
    metadata: dict[str, Any] | None = None


@dataclass
class ToolUseBlock:
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] = field(default_factory=dict)
    content: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolResultBlock:
    id: str | None = None
    name: str | None = None
    output: list[ContentBlock] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def suspended(self) -> bool:
        return self.metadata.get("agentscope_suspended") is True


@dataclass
class ImageBlock:
    source: Source
    min_pixels: int | None = None
    max_pixels: int | None = None


@dataclass
class AudioBlock:
    source: Source


@dataclass
class VideoBlock:
    source: Source | None = None
    fps: float | None = None
    max_frames: int | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    total_pixels: int | None = None


ContentBlock = Union[
    TextBlock, ThinkingBlock, ToolUseBlock, ToolResultBlock, ImageBlock, AudioBlock, VideoBlock
]


def java_timestamp(now: _dt.datetime | None = None) -> str:
    """The current local time as Java's `Msg` builder formats it: `yyyy-MM-dd HH:mm:ss.SSS`."""
    now = now or _dt.datetime.now()
    return now.strftime("%Y-%m-%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}"


@dataclass
class Msg:
    """Java `io.agentscope.core.message.Msg`."""

    id: str | None = None
    name: str | None = None
    role: MsgRole | None = None
    content: list[ContentBlock] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: str | None = None

    def __post_init__(self) -> None:
        # AgentScope Python writes `Msg(name, "text", "user")`: a role by its name and text as
        # the content are taken as Java's enum and one text block, instead of failing later
        # with a KeyError deep in the conversion to the wire.
        role: Any = self.role
        if isinstance(role, str) and not isinstance(role, MsgRole):
            try:
                self.role = MsgRole(role.upper())
            except ValueError:
                raise ValueError(
                    f"role: {role!r} is not a role; one of {', '.join(r.value for r in MsgRole)}"
                    " (any case)") from None
        content: Any = self.content
        if isinstance(content, str):
            self.content = [TextBlock(content)]
        elif not isinstance(content, list):
            raise TypeError(f"content: must be a list of content blocks or a text, not {type(content).__name__}")

    @classmethod
    def create(
        cls,
        role: MsgRole = MsgRole.USER,
        text: str | None = None,
        *,
        content: list[ContentBlock] | None = None,
        name: str | None = None,
        metadata: dict[str, Any] | None = None,
        id: str | None = None,
        timestamp: str | None = None,
    ) -> Msg:
        """Build a message the way Java's builder does: a random UUID and the current time."""
        blocks: list[ContentBlock] = list(content or [])
        if text is not None:
            blocks.insert(0, TextBlock(text))
        return cls(
            id=id or str(uuid.uuid4()),
            name=name,
            role=role,
            content=blocks,
            metadata=dict(metadata or {}),
            timestamp=timestamp or java_timestamp(),
        )

    @property
    def text_content(self) -> str:
        """Java `getTextContent()`: the top-level text blocks joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def generate_reason(self) -> GenerateReason:
        value = self.metadata.get(METADATA_GENERATE_REASON)
        try:
            return GenerateReason(value)
        except ValueError:
            return GenerateReason.MODEL_STOP


# ---------------------------------------------------------------------------------------------
# Writing: Python objects -> JSON-ready dicts in Jackson's field order.


def _source_to_dict(source: Source) -> dict[str, Any]:
    if isinstance(source, URLSource):
        return {"type": "url", "url": source.url}
    return {"type": "base64", "media_type": source.media_type, "data": source.data}


def _put_if_set(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def block_to_dict(block: ContentBlock) -> dict[str, Any]:
    """A content block as Jackson writes it (`type` first, nulls written except where NON_NULL)."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": block.thinking, "metadata": block.metadata}
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": block.input,
            "content": block.content,
            "metadata": block.metadata,
        }
    if isinstance(block, ToolResultBlock):
        return {
            "type": "tool_result",
            "id": block.id,
            "name": block.name,
            "output": [block_to_dict(b) for b in block.output],
            "metadata": block.metadata,
        }
    if isinstance(block, ImageBlock):
        # ImageBlock is @JsonInclude(NON_NULL); its options are written in camelCase.
        out: dict[str, Any] = {"type": "image", "source": _source_to_dict(block.source)}
        _put_if_set(out, "minPixels", block.min_pixels)
        _put_if_set(out, "maxPixels", block.max_pixels)
        return out
    if isinstance(block, AudioBlock):
        return {"type": "audio", "source": _source_to_dict(block.source)}
    if isinstance(block, VideoBlock):
        out = {"type": "video"}
        if block.source is not None:
            out["source"] = _source_to_dict(block.source)
        _put_if_set(out, "fps", block.fps)
        _put_if_set(out, "maxFrames", block.max_frames)
        _put_if_set(out, "minPixels", block.min_pixels)
        _put_if_set(out, "maxPixels", block.max_pixels)
        _put_if_set(out, "totalPixels", block.total_pixels)
        return out
    raise TypeError(f"not a content block: {type(block).__name__}")


def msg_to_dict(msg: Msg) -> dict[str, Any]:
    return {
        "id": msg.id,
        "name": msg.name,
        "role": msg.role.value if msg.role is not None else None,
        "content": [block_to_dict(b) for b in msg.content],
        "metadata": msg.metadata,
        "timestamp": msg.timestamp,
    }


def msg_to_json(msg: Msg) -> str:
    """Compact JSON, byte-for-byte as AgentScope-Java's `JsonUtils.getJsonCodec().toJson(msg)`."""
    return to_json_text(msg_to_dict(msg))


# ---------------------------------------------------------------------------------------------
# Reading: JSON-ready dicts -> Python objects, with Jackson's leniency and its hard failures.


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _opt_str(value: Any, path: str) -> str | None:
    # Jackson coerces scalars into String fields; objects and arrays fail.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _java_number_text(value)
    raise MessageError(path, "must be a string")


def _opt_int(value: Any, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise MessageError(path, "must be an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            raise MessageError(path, "must be an integer") from None
    else:
        raise MessageError(path, "must be an integer")
    if not -(2**31) <= number < 2**31:
        raise MessageError(path, "must fit in a 32-bit integer")
    return number


def _opt_float(value: Any, path: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise MessageError(path, "must be a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise MessageError(path, "must be a number") from None
    raise MessageError(path, "must be a number")


def _opt_map(value: Any, path: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MessageError(path, "must be a JSON object")
    return value


def _source_from_dict(value: Any, path: str) -> Source:
    if not isinstance(value, dict):
        raise MessageError(path, "must be a JSON object")
    kind = value.get("type")
    if kind == "url":
        url = _opt_str(value.get("url"), _where(path, "url"))
        if url is None:
            raise MessageError(_where(path, "url"), "is required")
        return URLSource(url)
    if kind == "base64":
        media_type = _opt_str(value.get("media_type"), _where(path, "media_type"))
        data = _opt_str(value.get("data"), _where(path, "data"))
        if media_type is None:
            raise MessageError(_where(path, "media_type"), "is required")
        if data is None:
            raise MessageError(_where(path, "data"), "is required")
        return Base64Source(media_type, data)
    if kind is None:
        raise MessageError(_where(path, "type"), "is required (url or base64)")
    raise MessageError(_where(path, "type"), f"unknown source type {kind!r} (url or base64)")


def _camel_or_snake(data: dict[str, Any], camel: str, snake: str) -> Any:
    # Java's creator reads snake_case, the setters camelCase; camelCase wins when both exist.
    return data[camel] if data.get(camel) is not None else data.get(snake)


def block_from_dict(data: Any, path: str = "block") -> ContentBlock:
    if not isinstance(data, dict):
        raise MessageError(path, "must be a JSON object")
    kind = data.get("type")
    if kind is None:
        raise MessageError(_where(path, "type"), "is required")
    if kind == "text":
        return TextBlock(_opt_str(data.get("text"), _where(path, "text")) or "")
    if kind == "thinking":
        return ThinkingBlock(
            _opt_str(data.get("thinking"), _where(path, "thinking")) or "",
            _opt_map(data.get("metadata"), _where(path, "metadata")),
        )
    if kind == "tool_use":
        return ToolUseBlock(
            id=_opt_str(data.get("id"), _where(path, "id")),
            name=_opt_str(data.get("name"), _where(path, "name")),
            input=_opt_map(data.get("input"), _where(path, "input")) or {},
            content=_opt_str(data.get("content"), _where(path, "content")),
            metadata=_opt_map(data.get("metadata"), _where(path, "metadata")) or {},
        )
    if kind == "tool_result":
        output = data.get("output")
        if output is not None and not isinstance(output, list):
            raise MessageError(_where(path, "output"), "must be a list")
        blocks: list[ContentBlock] = []
        for i, item in enumerate(output or []):
            item_path = f"{_where(path, 'output')}[{i}]"
            if item is None:
                # Java's List.copyOf rejects null elements.
                raise MessageError(item_path, "must not be null")
            blocks.append(block_from_dict(item, item_path))
        metadata = _opt_map(data.get("metadata"), _where(path, "metadata")) or {}
        for key, value in metadata.items():
            if value is None:
                raise MessageError(f"{_where(path, 'metadata')}.{key}", "must not be null")
        return ToolResultBlock(
            id=_opt_str(data.get("id"), _where(path, "id")),
            name=_opt_str(data.get("name"), _where(path, "name")),
            output=blocks,
            metadata=metadata,
        )
    if kind == "image":
        if data.get("source") is None:
            raise MessageError(_where(path, "source"), "is required")
        return ImageBlock(
            _source_from_dict(data["source"], _where(path, "source")),
            _opt_int(_camel_or_snake(data, "minPixels", "min_pixels"), _where(path, "minPixels")),
            _opt_int(_camel_or_snake(data, "maxPixels", "max_pixels"), _where(path, "maxPixels")),
        )
    if kind == "audio":
        if data.get("source") is None:
            raise MessageError(_where(path, "source"), "is required")
        return AudioBlock(_source_from_dict(data["source"], _where(path, "source")))
    if kind == "video":
        source = data.get("source")
        return VideoBlock(
            _source_from_dict(source, _where(path, "source")) if source is not None else None,
            _opt_float(data.get("fps"), _where(path, "fps")),
            _opt_int(_camel_or_snake(data, "maxFrames", "max_frames"), _where(path, "maxFrames")),
            _opt_int(_camel_or_snake(data, "minPixels", "min_pixels"), _where(path, "minPixels")),
            _opt_int(_camel_or_snake(data, "maxPixels", "max_pixels"), _where(path, "maxPixels")),
            _opt_int(
                _camel_or_snake(data, "totalPixels", "total_pixels"), _where(path, "totalPixels")
            ),
        )
    raise MessageError(
        _where(path, "type"),
        f"unknown block type {kind!r} (text, thinking, tool_use, tool_result, image, audio, video)",
    )


def msg_from_dict(data: Any, path: str = "") -> Msg:
    """Read a message as Jackson does: unknown fields ignored, nulls filtered, strict enums."""
    if not isinstance(data, dict):
        raise MessageError(path or "message", "must be a JSON object")
    role_value = data.get("role")
    role: MsgRole | None = None
    if role_value is not None:
        try:
            role = MsgRole(role_value)
        except ValueError:
            raise MessageError(
                _where(path, "role"),
                f"unknown role {role_value!r} (USER, ASSISTANT, SYSTEM or TOOL; upper case)",
            ) from None
    content = data.get("content")
    if content is not None and not isinstance(content, list):
        raise MessageError(_where(path, "content"), "must be a list")
    blocks = [
        block_from_dict(item, f"{_where(path, 'content')}[{i}]")
        for i, item in enumerate(content or [])
        if item is not None
    ]
    metadata = _opt_map(data.get("metadata"), _where(path, "metadata")) or {}
    return Msg(
        id=_opt_str(data.get("id"), _where(path, "id")),
        name=_opt_str(data.get("name"), _where(path, "name")),
        role=role,
        content=blocks,
        # Java copies metadata into a HashMap without null keys or values.
        metadata={k: v for k, v in metadata.items() if v is not None},
        timestamp=_opt_str(data.get("timestamp"), _where(path, "timestamp")),
    )


def msg_from_json(text: str | bytes, path: str = "") -> Msg:
    from agentscope_memory.validation.json_text import parse_json

    return msg_from_dict(parse_json(text, path or "message"), path)


# ---------------------------------------------------------------------------------------------
# Jackson-compatible JSON text.

# Jackson escapes `"`, `\`, and control characters; \b \t \n \f \r get their short form and the
# rest `\u00XX` with upper-case hex. Everything else (non-ASCII included) is written as is.
_ESCAPES = {i: f"\\u{i:04X}" for i in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _string_text(value: str) -> str:
    return '"' + value.translate(_ESCAPES) + '"'


def _java_number_text(value: int | float) -> str:
    """A number as Java's `Long.toString` / `Double.toString` writes it."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    # Java prints the shortest round-tripping digits (as Python's repr does), plain for
    # 1e-3 <= |x| < 1e7 and as "d.dddE[-]n" otherwise.
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    all_digits = whole + frac
    leading_zeros = len(all_digits) - len(all_digits.lstrip("0"))
    exponent = int(exp_text or 0) + len(whole) - 1 - leading_zeros
    digits = all_digits.strip("0") or "0"
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            integer = digits[: exponent + 1].ljust(exponent + 1, "0")
            return f"{sign}{integer}.{digits[exponent + 1:] or '0'}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def to_json_text(value: Any) -> str:
    """Compact JSON as Jackson's default `ObjectMapper.writeValueAsString` writes it."""
    parts: list[str] = []
    _write_compact(value, parts)
    return "".join(parts)


def _write_compact(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string_text(value))
    elif isinstance(value, (int, float)):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            # Jackson's default WRITE_NAN_AS_STRINGS.
            out.append(_string_text(_java_number_text(value)))
        else:
            out.append(_java_number_text(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(_string_text(str(key)))
            out.append(":")
            _write_compact(item, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write_compact(item, out)
        out.append("]")
    elif isinstance(value, Enum):
        out.append(_string_text(str(value.value)))
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")


def to_pretty_json(value: Any) -> str:
    """JSON as Jackson's `DefaultPrettyPrinter` writes it (JsonSession's `{key}.json` files).

    Objects put each entry on its own line, indented two spaces per enclosing object, with
    `" : "` between key and value; arrays stay on one line as `[ a, b ]`; empty containers are
    `{ }` and `[ ]`; there is no trailing newline.
    """
    parts: list[str] = []
    _write_pretty(value, 0, parts)
    return "".join(parts)


def _write_pretty(value: Any, nesting: int, out: list[str]) -> None:
    if isinstance(value, dict):
        if not value:
            out.append("{ }")
            return
        out.append("{")
        first = True
        for key, item in value.items():
            out.append("\n" if first else ",\n")
            first = False
            out.append("  " * (nesting + 1))
            out.append(_string_text(str(key)))
            out.append(" : ")
            _write_pretty(item, nesting + 1, out)
        out.append("\n" + "  " * nesting + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[ ]")
            return
        out.append("[ ")
        for i, item in enumerate(value):
            if i:
                out.append(", ")
            _write_pretty(item, nesting, out)
        out.append(" ]")
    else:
        _write_compact(value, out)
