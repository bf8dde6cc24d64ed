"""The status of a TIERED memory drawn as a box, like Loom's `MemoryVisualizer`."""

from __future__ import annotations

import unicodedata

from agentscope_memory.short_term.tiered.service import TierStatus

WIDTH = 56  # inner width, in terminal columns
BAR = 12
_NAMES = {1: "L1 Recent", 2: "L2 Working", 3: "L3 Summary", 4: "L4 Knowledge"}


def columns(text: str) -> int:
    """Terminal columns of `text`: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1 for c in text)


def _fit(text: str, width: int) -> str:
    """`text` in exactly `width` columns: padded, or cut with "…" (which takes one column, so
    what it replaces is measured, not assumed one column: a wide character is two)."""
    if columns(text) > width:
        while text and columns(text) + 1 > width:
            text = text[:-1]
        text += "…"
    return text + " " * (width - columns(text))


def _line(text: str) -> str:
    return "║ " + _fit(text, WIDTH - 2) + " ║"


def _bar(fill: float) -> str:
    filled = min(BAR, round(max(fill, 0.0) * BAR))
    return "█" * filled + "░" * (BAR - filled)


def render_status(status: TierStatus) -> str:
    title = _fit(f"TIERED MEMORY STATUS · {status.memory_id}", WIDTH - 2)
    lines = ["╔" + "═" * WIDTH + "╗", "║ " + title + " ║", "╠" + "═" * WIDTH + "╣"]
    for usage in status.tiers:
        unit = "vectors" if usage.tier == 4 else "summaries" if usage.tier == 3 else "items"
        lines.append(_line(f"{_NAMES[usage.tier]:<13}{usage.items:>6} {unit}"))
        lines.append(_line(f"  {_bar(usage.fill)} {usage.tokens:>7}/{usage.budget} tokens {usage.fill:>4.0%}"))
    lines.append("╠" + "═" * WIDTH + "╣")
    ratio = f"{status.compaction_ratio:.2f}x" if status.compaction_ratio else "-"
    lines.append(_line(f"Compaction ratio {ratio}   compactions {status.compactions}"))
    marker = "yes (📦 History compacted)" if status.compacted else "no"
    lines.append(_line(f"History compacted: {marker}"))
    if status.evicted_summaries:
        lines.append(_line(f"Summaries evicted without L4: {status.evicted_summaries}"))
    lines.append("╚" + "═" * WIDTH + "╝")
    return "\n".join(lines)
