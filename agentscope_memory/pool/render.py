"""Pool entries as context for a model call: `[SHARED:key] content`, newest first, within a
token budget counted as AgentScope-Java counts (its estimate), so the figure agrees with the
AutoContext memory that receives it."""

from __future__ import annotations

import json
from typing import Iterable

from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.one_line import one_line, one_line_json, one_line_label
from agentscope_memory.pool.model import PoolEntry, RenderedPools
from agentscope_memory.short_term.auto_context.tokens import estimate_tokens
from agentscope_memory.store.codec import encode_msg

PREFIX = "[SHARED:{key}]"


def entry_line(entry: PoolEntry) -> str:
    """One line: a JSON string is shown as its text, any other JSON value compactly. A string
    holding a line break is shown as a JSON string literal instead (`one_line`), so the line
    stays one and the text can be read back."""
    value = json.loads(entry.content_json)
    shown = one_line(value) if isinstance(value, str) else one_line_json(value)
    # A key holding `]`, a line break (a Unicode separator: never a control character) or
    # opening with `"` is shown as a JSON string literal: the label's end stays where a reader
    # looks for it, and other keys are shown exactly as they always were.
    return f"{PREFIX.format(key=one_line_label(entry.key))} {shown}"


def entry_message(entry: PoolEntry, line: str) -> Msg:
    """The entry as a message whose text is its `entry_line`."""
    return Msg.create(MsgRole.SYSTEM, line, name="shared_pool",
                      metadata={"shared_pool": entry.pool_id, "key": entry.key, "version": entry.version})


def render(entries: Iterable[PoolEntry], max_tokens: int, max_bytes: int, *, as_messages: bool = False) -> RenderedPools:
    """`entries` newest first; one that does not fit the budgets left (tokens, and bytes of the
    form the caller sends: the text, or the messages) is left out, and later (older) smaller
    ones may still be kept. The byte budget matters for many small entries: a message carries
    its pool id and key in its metadata too, which the token estimate does not count, so
    10,000 of them can fit the largest token budget and still make a response over 4 MiB."""
    lines: list[str] = []
    messages: list[Msg] = []
    used = omitted = size = 0
    for entry in entries:
        line = entry_line(entry)
        message = entry_message(entry, line)
        cost = estimate_tokens([message])
        # A repeated field's tag and length, or the newline between lines.
        weight = len(encode_msg(message)) + 8 if as_messages else len(line.encode("utf-8")) + 1
        if used + cost > max_tokens or size + weight > max_bytes:
            omitted += 1
            continue
        used += cost
        size += weight
        lines.append(line)
        messages.append(message)
    return RenderedPools("\n".join(lines), messages, len(messages), omitted, used)
