"""The one reader of client-supplied JSON text (`*_json` fields, state entries, session files).

What AgentScope-Java 1.0.12's Jackson (2.21) does, and what this reader does instead:
- nesting: Jackson refuses documents nested deeper than 1000 levels. Python's JSON codecs recurse
  once per level (and the byte-exact Jackson writer twice), so this service allows
  `MAX_JSON_DEPTH` = 256 levels and refuses deeper ones before parsing, naming the limit.
- numbers: Jackson refuses numbers longer than 1000 characters; so does this reader. Jackson
  reads `1e999` as a double Infinity and then writes it back as the *string* `"Infinity"`, a
  silent change of type; this reader refuses any number outside the double range instead.
  Underflow (`1e-999` -> `0.0`) is read as Jackson reads it. `NaN`/`Infinity` tokens are not
  JSON and Jackson refuses them by default; so does this reader.
- lone surrogates: Jackson reads `"\\ud800"` into a Java String holding half a character. Such
  a string has no UTF-8 form, so it cannot be stored in a UTF-8 file, a proto string or a
  PostgreSQL `jsonb`/`text`; this reader refuses it (a surrogate *pair* is fine: `"\\ud83d\\ude00"`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from agentscope_memory.errors import InvalidArgumentError

MAX_JSON_DEPTH = 256
# State entries and session files wrap messages (the offload context puts a message at level 4:
# {"offloadContext": {uuid: [message]}}), so they may nest a few levels more than a message.
MAX_STATE_DEPTH = MAX_JSON_DEPTH + 4
MAX_NUMBER_CHARS = 1000

# A JSON string literal (so brackets inside strings are not counted) or a bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of `text`, counted up to the first level beyond `limit`."""
    if text.count("[") + text.count("{") <= limit:
        return min(limit, text.count("[") + text.count("{"))
    depth = deepest = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif token in "]}":
            depth -= 1
    return deepest


def _number(text: str, convert: Any) -> Any:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"has a number of {len(text)} characters; at most {MAX_NUMBER_CHARS}")
    return convert(text)


def _parse_float(text: str) -> float:
    value = _number(text, float)
    if math.isinf(value):
        raise _Refused(
            f"has the number {text[:40]} outside the range of a double; AgentScope-Java would turn "
            "it into the string \"Infinity\", so it is refused"
        )
    return value


def _reject_constant(name: str) -> Any:
    raise _Refused(f"is not valid JSON: {name} is not a JSON number")


def _lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return False
        except UnicodeEncodeError:
            return True
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(v) for v in value)
    return False


def parse_json(text: str | bytes, field: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse `text` under the rules above; every refusal names `field` and the reason.
    `max_depth` is larger only for documents that wrap messages (`MAX_STATE_DEPTH`)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError(field, "is not valid UTF-8") from None
    depth = json_depth(text, max_depth)
    if depth > max_depth:
        raise InvalidArgumentError(field, f"is nested more than {max_depth} levels deep (the limit)")
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, parse_float=_parse_float, parse_int=_parse_int_safe
        )
    except _Refused as exc:
        raise InvalidArgumentError(field, exc.reason) from None
    except RecursionError:
        raise InvalidArgumentError(field, f"is nested more than {max_depth} levels deep (the limit)") from None
    except ValueError as exc:
        raise InvalidArgumentError(field, f"is not valid JSON: {exc}") from None
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(value):
        raise InvalidArgumentError(
            field, "contains a lone surrogate escape (such as \\ud800); it is not Unicode text"
        )
    return value


def _parse_int_safe(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"has a number of {len(text)} characters; at most {MAX_NUMBER_CHARS}")
    return int(text)


def parse_json_object(text: str, field: str) -> dict[str, Any]:
    """A `*_json` field: empty means `{}`; anything but a JSON object is refused."""
    if not text:
        return {}
    value = parse_json(text, field)
    if not isinstance(value, dict):
        raise InvalidArgumentError(field, "must be a JSON object")
    return value
