"""What a recorded message becomes: its text, role and id, its exact-scope key and its hash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Sequence

from agentscope_memory.errors import InvalidArgumentError, ResourceExhaustedError
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole

COMPRESSED_TAG = "<compressed_history>"
MAX_TEXT_CHARS = 64 * 1024
# AgentScope-Java's Mem0LongTermMemory sends USER and SYSTEM as "user", the rest as "assistant".
ROLES = {MsgRole.USER: "user", MsgRole.SYSTEM: "user", MsgRole.ASSISTANT: "assistant", MsgRole.TOOL: "assistant"}


@dataclass(frozen=True)
class Recorded:
    role: str
    text: str
    message_id: str


def scope_key(scope: Scope) -> str:
    """The exact scope as one unambiguous string (any Unicode ids)."""
    return json.dumps([scope.agent_name, scope.user_id, scope.run_name], ensure_ascii=False)


def content_hash(text: str) -> str:
    # md5, as mem0 keeps it: memories migrated from mem0 keep their hashes.
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def recordable(msgs: Sequence[Msg | None]) -> list[Recorded]:
    """What AgentScope-Java records of `msgs`: messages with text, not compressed summaries.
    Text that is only whitespace counts as none: mem0 extracts nothing from it, and stored
    verbatim it would come back as a blank line of every `retrieve` (an update to such a text
    is refused for the same reason)."""
    out: list[Recorded] = []
    for i, msg in enumerate(msgs):
        if msg is None:
            continue
        text = msg.text_content
        if not text or not text.strip() or COMPRESSED_TAG in text:
            continue
        if msg.role is None:
            raise InvalidArgumentError(f"messages[{i}].role", "is required to record a message")
        if len(text) > MAX_TEXT_CHARS:
            raise ResourceExhaustedError(
                f"messages[{i}]", f"has {len(text)} characters of text; at most {MAX_TEXT_CHARS} per memory"
            )
        out.append(Recorded(ROLES[msg.role], text, msg.id or ""))
    return out
