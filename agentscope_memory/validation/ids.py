"""Client-chosen identifiers: memory, session, user, agent and run ids, label keys, request ids.

AgentScope accepts any string as a session id, user id or agent name, so any Unicode text is a
valid id here too (`会话-42`, `助手`, `🤖 bot`, `a.b`, `..`), within these limits:
- 1 to `MAX_ID_BYTES` bytes of UTF-8 (bytes, not characters: storage and paths count bytes);
- not blank (only whitespace);
- no control characters (U+0000-U+001F, U+007F-U+009F): NUL cannot be stored in a PostgreSQL
  text column, and the others break log lines and terminals;
- no lone surrogates (not Unicode text; no UTF-8 form exists).
Ids are compared exactly as given: no Unicode normalisation, no case folding, no trimming.
Whatever turns an id into a file name (JsonSession) or a log field encodes it there; ids are
never used as metric labels.
"""

from __future__ import annotations

import re

from agentscope_memory.errors import InvalidArgumentError

MAX_ID_BYTES = 256
MAX_LABEL_KEY_BYTES = 63
MAX_LABEL_VALUE_BYTES = 256
MAX_REQUEST_ID_CHARS = 128

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")

ID_RULE = f"1 to {MAX_ID_BYTES} bytes of UTF-8 text without control characters"


def utf8_length(value: str, field: str) -> int:
    """The UTF-8 length of `value`; a lone surrogate (no UTF-8 form) is named as the reason."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        bad = _SURROGATE.search(value)
        where = f" at character {bad.start()}" if bad else ""
        raise InvalidArgumentError(field, f"contains a lone surrogate{where}; it is not Unicode text") from None


def check_plain_text(value: str, field: str) -> None:
    """No control characters and no lone surrogates (the rule ids and keys share)."""
    utf8_length(value, field)
    bad = _CONTROL.search(value)
    if bad:
        code = ord(bad.group())
        name = "a NUL character" if code == 0 else f"a control character U+{code:04X}"
        raise InvalidArgumentError(field, f"contains {name} at character {bad.start()}; control characters are not allowed")


def check_id(value: str, field: str, max_bytes: int = MAX_ID_BYTES) -> str:
    """Return `value` if it is a valid id, else raise naming `field` and the reason."""
    if not isinstance(value, str):
        raise InvalidArgumentError(field, "must be a string")
    if not value:
        raise InvalidArgumentError(field, "is required")
    size = utf8_length(value, field)
    if size > max_bytes:
        raise InvalidArgumentError(field, f"is {size} bytes of UTF-8; at most {max_bytes}")
    check_plain_text(value, field)
    if not value.strip():
        raise InvalidArgumentError(field, "must not be blank")
    return value


def check_label_key(key: str, field: str = "labels") -> str:
    where = f"{field}[{key!r}]"
    if not key:
        raise InvalidArgumentError(where, f"keys must be 1 to {MAX_LABEL_KEY_BYTES} bytes of UTF-8")
    size = utf8_length(key, where)
    if size > MAX_LABEL_KEY_BYTES:
        raise InvalidArgumentError(where, f"key is {size} bytes of UTF-8; keys must be 1 to {MAX_LABEL_KEY_BYTES}")
    check_plain_text(key, where)
    return key


def check_label_value(key: str, value: str, field: str = "labels") -> str:
    where = f"{field}[{key!r}]"
    size = utf8_length(value, where)
    if size > MAX_LABEL_VALUE_BYTES:
        raise InvalidArgumentError(where, f"value is {size} bytes of UTF-8; values must be at most {MAX_LABEL_VALUE_BYTES}")
    check_plain_text(value, where)
    return value


def check_request_id(value: str, field: str = "request_id") -> str | None:
    """An empty request id means "not idempotent"; otherwise 1-128 printable ASCII characters."""
    if not value:
        return None
    if not _REQUEST_ID.fullmatch(value):
        raise InvalidArgumentError(
            field, f"must be 1 to {MAX_REQUEST_ID_CHARS} printable ASCII characters without spaces"
        )
    return value


_TENANT = re.compile(r"[A-Za-z0-9_\-.:@]{1,256}")


def check_tenant(value: str, field: str = "tenant") -> str:
    """Tenants are chosen by the operator (API key configuration), not by clients, and name a
    directory of their own (exported sessions) as is, so they keep a conservative alphabet."""
    if not _TENANT.fullmatch(value) or value in (".", ".."):
        raise InvalidArgumentError(field, f"{value!r} must be 1 to 256 of letters, digits and _ - . : @, not . or ..")
    return value
