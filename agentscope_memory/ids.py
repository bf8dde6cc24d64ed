"""Validation of client-chosen identifiers.

Ids end up in file names (session export), log lines and SQL parameters, so they are held to a
conservative alphabet: no path separators, no control characters, never `.` or `..`.
"""

from __future__ import annotations

import re

from agentscope_memory.errors import InvalidArgumentError

_ID = re.compile(r"[A-Za-z0-9_\-.:@]{1,256}")
_REQUEST_ID = re.compile(r"[\x21-\x7e]{1,128}")
MAX_ID_LENGTH = 256


def check_id(value: str, field: str) -> str:
    """Return `value` if it is a valid memory id, else raise naming `field` and the reason."""
    if not value:
        raise InvalidArgumentError(field, "is required")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgumentError(field, f"is {len(value)} characters long; at most {MAX_ID_LENGTH}")
    if value in (".", ".."):
        raise InvalidArgumentError(field, f"must not be {value!r}")
    if not _ID.fullmatch(value):
        bad = next(c for c in value if not _ID.fullmatch(c))
        what = "a control character" if ord(bad) < 0x20 or ord(bad) == 0x7F else repr(bad)
        if bad in "/\\":
            what = f"a path separator {bad!r}"
        raise InvalidArgumentError(
            field, f"contains {what}; use letters, digits and _ - . : @ only"
        )
    return value


def check_request_id(value: str, field: str = "request_id") -> str | None:
    """An empty request id means "not idempotent"; otherwise 1-128 printable ASCII characters."""
    if not value:
        return None
    if not _REQUEST_ID.fullmatch(value):
        raise InvalidArgumentError(
            field, "must be 1 to 128 printable ASCII characters without spaces"
        )
    return value
