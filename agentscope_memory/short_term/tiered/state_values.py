"""Bounds on the numbers a TIERED memory's imported state may hold. A session file is the
caller's text: a number it brings is stored as it is and later travels in int64 proto fields,
SQLite integers and protobuf Timestamps, so one out of their range would fail every later read
of the memory instead of the import that brought it."""

from __future__ import annotations

import math
from typing import Any

from agentscope_memory.errors import InvalidArgumentError

# Sequence numbers and counts: exact in a JSON double, and far from int64's end so that
# numbering on from the largest imported one never overflows.
MAX_COUNT = 2**53
# protobuf Timestamp's range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z.
MIN_EPOCH_SECONDS = -62_135_596_800
MAX_EPOCH_SECONDS = 253_402_300_799


def sequence(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_COUNT:
        raise InvalidArgumentError(where, f"is {value!r}; must be a sequence number from 1 to {MAX_COUNT}")
    return value


def sequences(value: Any, where: str) -> list[int]:
    if not isinstance(value, list):
        raise InvalidArgumentError(where, "must be a list of sequence numbers")
    return [sequence(v, f"{where}[{i}]") for i, v in enumerate(value)]


def count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise InvalidArgumentError(where, f"is {value!r}; must be an integer from 0 to {MAX_COUNT}")
    return value


def epoch_seconds(value: Any, where: str) -> float:
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or not MIN_EPOCH_SECONDS <= value <= MAX_EPOCH_SECONDS):
        raise InvalidArgumentError(where, f"is {value!r}; must be seconds since 1970 within years 1 to 9999")
    return float(value)
