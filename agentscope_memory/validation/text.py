"""Lengths of free-text fields. Each limit is documented in the proto and the README ("Limits");
beyond it the call fails with RESOURCE_EXHAUSTED naming the field, before anything is stored."""

from __future__ import annotations

from typing import Any

from agentscope_memory.errors import ResourceExhaustedError
from agentscope_memory.validation.ids import utf8_length

KiB = 1024
MiB = 1024 * KiB

# Short names inside messages and plans (message id and name, tool call id and name, timestamps,
# media types, plan and subtask names and states).
MAX_NAME_BYTES = 1 * KiB
# One AutoContext prompt override (`custom_prompt.*`).
MAX_PROMPT_BYTES = 64 * KiB
# `PrepareReasoningInput.system_prompt`.
MAX_SYSTEM_PROMPT_BYTES = 1 * MiB
# Plan descriptions and expected outcomes.
MAX_PLAN_TEXT_BYTES = 64 * KiB
MAX_PLAN_SUBTASKS = 1000
# Long-term: `Record.metadata_json`, each `RecordToMemory.content` item and its `thinking`.
MAX_LONG_TERM_TEXT_BYTES = 64 * KiB
MAX_LONG_TERM_ITEMS = 1000
# `RetrieveFromMemory.keywords`.
MAX_KEYWORD_BYTES = 1 * KiB
MAX_KEYWORDS = 100
# Page tokens and etags are short opaque strings issued by the server.
# Memory ids named in one ExportSession call.
MAX_EXPORT_MEMORIES = 100


def check_text(value: str, field: str, max_bytes: int) -> str:
    """`value` is Unicode text of at most `max_bytes` bytes of UTF-8."""
    size = utf8_length(value, field)
    if size > max_bytes:
        raise ResourceExhaustedError(field, f"is {size} bytes of UTF-8; at most {max_bytes}")
    return value


def check_count(count: int, field: str, maximum: int) -> None:
    if count > maximum:
        raise ResourceExhaustedError(field, f"has {count} items; at most {maximum}")


def check_plan(plan: Any, field: str = "plan") -> None:
    """An attached plan note (`PlanNote`): bounded texts and subtask count."""
    check_text(plan.description, f"{field}.description", MAX_PLAN_TEXT_BYTES)
    check_text(plan.expected_outcome, f"{field}.expected_outcome", MAX_PLAN_TEXT_BYTES)
    check_count(len(plan.subtasks), f"{field}.subtasks", MAX_PLAN_SUBTASKS)
    for i, subtask in enumerate(plan.subtasks):
        check_text(subtask.name, f"{field}.subtasks[{i}].name", MAX_NAME_BYTES)
        check_text(subtask.state, f"{field}.subtasks[{i}].state", MAX_NAME_BYTES)
