"""Rules for what long-term memory stores and searches, shared by every long-term engine.

Scopes' ids follow `validation.ids` (see `Scope.validate`). Long-term texts end up in vector
store payloads and PostgreSQL text/jsonb columns, which cannot hold NUL, so a NUL character in
a text to record is refused on every store alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import Msg
from agentscope_memory.validation.messages import check_json_value, check_msg
from agentscope_memory.validation.text import (
    MAX_KEYWORD_BYTES,
    MAX_KEYWORDS,
    MAX_LONG_TERM_ITEMS,
    MAX_LONG_TERM_TEXT_BYTES,
    check_count,
    check_text,
)


def _no_nul(text: str, field: str) -> None:
    if "\x00" in text:
        raise InvalidArgumentError(field, "contains a NUL character, which long-term memory cannot store")


def check_record(msgs: Sequence[Msg | None], metadata: dict[str, Any] | None, field: str = "messages") -> None:
    """`Record`: messages that may be stored (the short-term write rules, and no NUL in their
    text) and metadata under the JSON rules, at most 64 KiB of it."""
    check_count(len(msgs), field, MAX_LONG_TERM_ITEMS)
    for i, msg in enumerate(msgs):
        if msg is None:
            continue
        where = f"{field}[{i}]"
        check_msg(msg, where)
        _no_nul(msg.text_content or "", f"{where}.content")
    if metadata:
        check_json_value(metadata, "metadata_json", allow_nul=False)
        check_metadata_size(metadata)


def check_metadata_size(metadata: dict[str, Any], field: str = "metadata_json") -> None:
    """A memory's metadata as stored (for an update: after the merge) is at most 64 KiB of JSON,
    however it was built up: one memory must fit any response that carries it."""
    from agentscope_memory.message import to_json_text

    check_text(to_json_text(metadata), field, MAX_LONG_TERM_TEXT_BYTES)


def check_update_text(text: str, field: str = "text") -> None:
    """`UpdateLongTermMemory.text`: no NUL (the length rule is Record's, checked by the engine)."""
    _no_nul(text, field)


def check_record_texts(thinking: str | None, content: Sequence[str | None] | None) -> None:
    """`RecordToMemory` (the agent-control tool): bounded items, bounded texts, no NUL."""
    if thinking:
        check_text(thinking, "thinking", MAX_LONG_TERM_TEXT_BYTES)
        _no_nul(thinking, "thinking")
    items = list(content or [])
    check_count(len(items), "content", MAX_LONG_TERM_ITEMS)
    for i, item in enumerate(items):
        if item:
            check_text(item, f"content[{i}]", MAX_LONG_TERM_TEXT_BYTES)
            _no_nul(item, f"content[{i}]")


def check_keywords(keywords: Sequence[str] | None) -> None:
    """`RetrieveFromMemory`: at most 100 keywords of at most 1 KiB each."""
    items = list(keywords or [])
    check_count(len(items), "keywords", MAX_KEYWORDS)
    for i, keyword in enumerate(items):
        check_text(keyword, f"keywords[{i}]", MAX_KEYWORD_BYTES)
        _no_nul(keyword, f"keywords[{i}]")
