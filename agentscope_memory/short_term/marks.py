"""Marks on stored messages, as AgentScope-Python's `MemoryBase` has them (`add(marks=...)`,
`delete_by_mark`, `update_messages_mark`, `get_memory(mark=...)`).

A message's marks are the list at `metadata["agentscope_python"]["marks"]`: where the
AgentScope-Python adapter has kept them since its first release (beside the message's own
AgentScope JSON under `"msg"`), so conversations stored before the server could change marks
keep theirs, and the server edits exactly that field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agentscope_memory.errors import InvalidArgumentError, ResourceExhaustedError
from agentscope_memory.message import Msg
from agentscope_memory.validation.text import MAX_NAME_BYTES, check_text

# The metadata key under which a message keeps AgentScope-Python's JSON and its marks.
MARKS_METADATA_KEY = "agentscope_python"
# A mark is a short label ("hint", "compressed"); this keeps one from bloating every message.
MAX_MARK_BYTES = 1024
# Ids or marks in one call: as many messages as one AddMessages call takes.
MAX_SELECTED = 1000


def marks_of(msg: Msg) -> list[str]:
    """The message's marks ([] for a message no AgentScope-Python client marked)."""
    own = msg.metadata.get(MARKS_METADATA_KEY)
    marks = own.get("marks") if isinstance(own, dict) else None
    return [m for m in marks if isinstance(m, str)] if isinstance(marks, list) else []


def with_marks(msg: Msg, marks: list[str]) -> Msg:
    """`msg` with these marks, everything else in its metadata kept as it was."""
    own = msg.metadata.get(MARKS_METADATA_KEY)
    kept: dict[str, Any] = dict(own) if isinstance(own, dict) else {}
    return replace(msg, metadata={**msg.metadata, MARKS_METADATA_KEY: {**kept, "marks": list(marks)}})


def remark(marks: list[str], new_mark: str | None, old_mark: str | None) -> tuple[list[str], bool]:
    """AgentScope-Python 1.0.21 `InMemoryMemory.update_messages_mark` on one message that its
    id filter chose: the new marks, and whether the message counts as updated. Counted and
    changed differ: replacing `old_mark` by a `new_mark` the message has already removes
    `old_mark` and counts nothing."""
    if old_mark is not None and old_mark not in marks:
        return marks, False
    out = list(marks)
    if new_mark is None:
        if old_mark is not None:
            out.remove(old_mark)
            return out, True
        return out, False
    if old_mark is not None:
        out.remove(old_mark)
    if new_mark not in out:
        out.append(new_mark)
        return out, True
    return out, False


def remark_message(msg: Msg, chosen: set[str] | None, new_mark: str | None,
                   old_mark: str | None) -> tuple[Msg | None, bool]:
    """`update_messages_mark` on one stored message, as the server makes it and a client copying
    the server's change makes it again: the message with its new marks (None when the id filter
    `chosen` skips it or its marks stay as they were), and whether it counts as updated."""
    if chosen is not None and msg.id not in chosen:
        return None, False
    before = marks_of(msg)
    after, counted = remark(before, new_mark, old_mark)
    return (with_marks(msg, after) if after != before else None), counted


def check_mark(value: str, field: str) -> str:
    """A mark: any text ("" too, as AgentScope allows), at most `MAX_MARK_BYTES` bytes."""
    if not isinstance(value, str):
        raise InvalidArgumentError(field, "must be a string")
    return check_text(value, field, MAX_MARK_BYTES)


def check_message_id(value: str, field: str) -> str:
    """A message id as a stored message may have one (AddMessages' rule for `Msg.id`)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(field, "must be a non-empty message id")
    return check_text(value, field, MAX_NAME_BYTES)


def check_selection(values: list[str], field: str, check: Any) -> list[str]:
    """A non-empty list of at most `MAX_SELECTED` ids or marks, each passing `check`."""
    if not values:
        raise InvalidArgumentError(field, "must contain at least one value")
    if len(values) > MAX_SELECTED:
        raise ResourceExhaustedError(field, f"has {len(values)} values; at most {MAX_SELECTED} per call")
    for i, value in enumerate(values):
        check(value, f"{field}[{i}]")
    return values
