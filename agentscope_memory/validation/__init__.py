"""The input rules every write path and every transport shares (see the README's "Limits").

One module per kind of rule: `ids` (memory, session, user, agent and run ids, label keys, request
ids), `json_text` (the `*_json` fields and JSON state), `text` (lengths of free-text fields) and
`messages` (the one validation of a message before it is stored, whatever path it came by).
Every failure is an `InvalidArgumentError` or `ResourceExhaustedError` naming the field.
"""

from agentscope_memory.validation.ids import (
    MAX_ID_BYTES,
    check_id,
    check_label_key,
    check_label_value,
    check_request_id,
)
from agentscope_memory.validation.json_text import (
    MAX_JSON_DEPTH,
    MAX_NUMBER_CHARS,
    parse_json,
)
from agentscope_memory.validation.text import check_text

__all__ = [
    "MAX_ID_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_NUMBER_CHARS",
    "check_id",
    "check_label_key",
    "check_label_value",
    "check_request_id",
    "check_text",
    "parse_json",
]
