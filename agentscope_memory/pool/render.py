"""Pool entries as context for a model call: `[SHARED:key] content`, newest first, within a
token budget counted as AgentScope-Java counts (its estimate), so the figure agrees with the
AutoContext memory that receives it."""

from __future__ import annotations

import json
from typing import Iterable

from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.pool.model import PoolEntry, RenderedPools
from agentscope_memory.short_term.auto_context.tokens import estimate_tokens

PREFIX = "[SHARED:{key}]"


def entry_line(entry: PoolEntry) -> str:
    """A JSON string is shown as its text; any other JSON value compactly."""
    value = json.loads(entry.content_json)
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return f"{PREFIX.format(key=entry.key)} {shown}"


def entry_message(entry: PoolEntry) -> Msg:
    return Msg.create(MsgRole.SYSTEM, entry_line(entry), name="shared_pool",
                      metadata={"shared_pool": entry.pool_id, "key": entry.key, "version": entry.version})


def render(entries: Iterable[PoolEntry], max_tokens: int) -> RenderedPools:
    """`entries` newest first; one that does not fit the budget left is left out, and later
    (older) smaller ones may still be kept."""
    lines: list[str] = []
    messages: list[Msg] = []
    used = omitted = 0
    for entry in entries:
        message = entry_message(entry)
        cost = estimate_tokens([message])
        if used + cost > max_tokens:
            omitted += 1
            continue
        used += cost
        lines.append(entry_line(entry))
        messages.append(message)
    return RenderedPools("\n".join(lines), messages, len(messages), omitted, used)
