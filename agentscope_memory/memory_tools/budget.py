"""How many bytes a tool result or resource page may take, and what a value costs in one.

No MCP answer may exceed 4 MiB, the limit every other surface keeps. A tool result carries its
JSON twice, as the text content (a JSON string holding the JSON, so escaped once more) and as
`structuredContent`; a resource page carries its JSON once, as a string. Pages and echoes are
cut to `RESULT_BUDGET` by these costs, leaving room for the JSON-RPC envelope.
"""

from __future__ import annotations

import json
from typing import Any

RESULT_BUDGET = 4 * 1024 * 1024 - 64 * 1024


def tool_cost(value: Any) -> int:
    """The bytes `value` adds to a tool result (text content and structured content)."""
    text = json.dumps(value, ensure_ascii=False)
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) + len(text.encode("utf-8", "surrogatepass"))


def resource_cost(value: Any) -> int:
    """The bytes `value` adds to a resource page (indented JSON inside a JSON string)."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))
