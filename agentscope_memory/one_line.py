"""A text as one line of a rendering that promises one line per entry (a pool's `[SHARED:key]`
lines, a projection's facts), which a reader splits back into entries by line."""

from __future__ import annotations

import json

# Where `str.splitlines` breaks a line.
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")
# Those of them `json.dumps` leaves as they are (it escapes the control characters only).
_UNICODE_BREAKS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}


def one_line_json(value: object) -> str:
    """`value` as compact JSON on one line (a string's escaped breaks mean the same value)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_UNICODE_BREAKS)


def one_line(text: str) -> str:
    """`text` as it is; or, when it holds a line break (or opens with a quote, so that it would
    look like the other form), as a JSON string literal, from which `json.loads` gives it back."""
    if text.startswith('"') or not _BREAKS.isdisjoint(text):
        return one_line_json(text)
    return text


def one_line_label(text: str) -> str:
    """`text` as a label closed by `]` (a pool's `[SHARED:key]`): as it is; or, when it holds a
    `]` (the label would seem to end there), a line break, or opens with a quote, as a JSON
    string literal, from which `json.loads` gives it back."""
    if "]" in text:
        return one_line_json(text)
    return one_line(text)
