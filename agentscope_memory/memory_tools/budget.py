"""How many bytes a tool result or resource page may take, and what a value costs in one.

No MCP answer may exceed 4 MiB, the limit every other surface keeps. A tool result carries its
JSON twice, as the text content (a JSON string holding the JSON, so escaped once more) and as
`structuredContent`; a resource page carries its JSON once, as a string. Pages and echoes are
cut to `RESULT_BUDGET` by these costs, leaving room for the JSON-RPC envelope.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

RESULT_BUDGET = 4 * 1024 * 1024 - 64 * 1024
# What a character of a message's text (or a byte of the stored message) can cost at most in a
# tool result or resource page: a control character is 6 bytes escaped in the JSON and 7 more in
# the JSON string holding that JSON (any other character: at most 4 + 4). And what a message's
# keys, role and block kinds add. Below these bounds no exact count is needed, which for a
# usual page would cost more than the answer itself.
MAX_BYTES_PER_CHAR = 13
MAX_BYTES_PER_MESSAGE = 1024


def surely_fits(stored_sizes: Iterable[int], budget: int = RESULT_BUDGET) -> bool:
    """Whether messages of these stored sizes (bytes) fit `budget` in any of the answers, by the
    bounds above: every field of a message's JSON comes from its stored bytes."""
    total = count = 0
    for size in stored_sizes:
        total += size
        count += 1
    return total * MAX_BYTES_PER_CHAR + count * MAX_BYTES_PER_MESSAGE <= budget


def tool_cost(value: Any) -> int:
    """The bytes `value` adds to a tool result (text content and structured content)."""
    text = json.dumps(value, ensure_ascii=False)
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) + len(text.encode("utf-8", "surrogatepass"))


def resource_cost(value: Any) -> int:
    """The bytes `value` adds to a resource page (indented JSON inside a JSON string)."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def fit_text(value: dict[str, Any], cost: Callable[[Any], int], budget: int = RESULT_BUDGET) -> dict[str, Any]:
    """`value` (a message's JSON), its `text` shortened to fit `budget` when it alone does not:
    a page always carries its first message, and one message may be as large as the server
    takes (gRPC's 4 MiB), several times that as JSON in a JSON string. The cut is marked
    (`text_truncated`, `text_length`) so a reader knows it is not the whole text."""
    text = value.get("text")
    if not isinstance(text, str):
        return value
    chars = sum(len(v) for v in value.values() if isinstance(v, str))
    if chars * MAX_BYTES_PER_CHAR + MAX_BYTES_PER_MESSAGE <= budget or cost(value) <= budget:
        return value
    low, high = 0, len(text)
    while low < high:  # the longest prefix that fits
        middle = (low + high + 1) // 2
        if cost({**value, "text": text[:middle], "text_truncated": True, "text_length": len(text)}) <= budget:
            low = middle
        else:
            high = middle - 1
    return {**value, "text": text[:low], "text_truncated": True, "text_length": len(text)}
