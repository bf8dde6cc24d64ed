"""What a recorded message becomes: its text, role and id, its exact-scope key and its hash."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Sequence

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole

COMPRESSED_TAG = "<compressed_history>"
# What AgentScope's static control puts in the conversation with what it recalled (Java's
# StaticLongTermMemoryHook, Python's ReActAgent): recorded again after the reply, as upstream
# does, each recall would be stored anew, wrapped once more, and come back in the next recall
# (a verbatim store has no extraction to collapse it). A deliberate difference from upstream.
# What is recorded is the text without such blocks: a block on lines of its own (Java's long
# wrapper with its preamble line), so a message that is nothing else is skipped, a conversation
# joined into one text (Python's Mem0LongTermMemory records so) keeps all the rest, and a user's
# own text that only mentions the tag (a developer asking about it) is recorded whole.
RECALLED_TAG = "<long_term_memory>"
# Where a block starts (Java's long wrapper: its preamble line first), and its tags: a recall
# holds the recalls a store of an earlier release kept nested, so a block ends at its own
# closing tag, not the first one.
_RECALLED_START = re.compile(
    r"^(?:Below is content retrieved from the long-term memory[^\n]*\n)?(?=<long_term_memory>)", re.MULTILINE)
_RECALLED_TAGS = re.compile(r"</?long_term_memory>")
_LINE_END = re.compile(r"[ \t]*(?:\n|\Z)")
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


def without_recalled(text: str) -> str:
    """`text` without the blocks static control adds with what long-term memory recalled
    (`RECALLED_TAG`), stripped when it had any; `text` itself when it has none."""
    if RECALLED_TAG not in text:
        return text
    kept: list[str] = []
    pos = 0
    while (start := _RECALLED_START.search(text, pos)) is not None:
        depth, end = 0, -1
        for tag in _RECALLED_TAGS.finditer(text, start.end()):
            depth += 1 if tag.group() == RECALLED_TAG else -1
            if depth == 0:
                end = tag.end()
                break
        if end < 0:
            break  # never closed: not a recall static control wrote
        after = _LINE_END.match(text, end)
        kept.append(text[pos:start.start()] if after is not None else text[pos:end])
        pos = after.end() if after is not None else end
    kept.append(text[pos:])
    joined = "".join(kept)
    return text if joined == text else joined.strip()


def recordable(msgs: Sequence[Msg | None]) -> list[Recorded]:
    """What AgentScope-Java records of `msgs`: messages with text, not compressed summaries, and
    not what long-term memory recalled (`without_recalled`).
    Text that is only whitespace counts as none: mem0 extracts nothing from it, and stored
    verbatim it would come back as a blank line of every `retrieve` (an update to such a text
    is refused for the same reason)."""
    out: list[Recorded] = []
    for i, msg in enumerate(msgs):
        if msg is None:
            continue
        text = msg.text_content
        if not text or COMPRESSED_TAG in text:
            continue
        text = without_recalled(text)
        if not text.strip():
            continue
        if msg.role is None:
            raise InvalidArgumentError(f"messages[{i}].role", "is required to record a message")
        out.extend(Recorded(ROLES[msg.role], part, msg.id or "") for part in parts(text))
    return out


# Where a part may end, best first: a paragraph, a line, a sentence (Latin closers before a
# space, Chinese ones anywhere), a word.
_BOUNDARIES = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"[.!?;](?=\s)|[。！？；]"), re.compile(r"\s"))


def parts(text: str, limit: int = MAX_TEXT_CHARS) -> list[str]:
    """`text` as consecutive parts of at most `limit` characters, each a memory of its own.
    A message longer than one memory (a pasted document, a fetched web page as a tool result)
    used to refuse the whole record: in STATIC_CONTROL, where the whole conversation is
    recorded after every reply, one such message stopped long-term recording for good. A part
    ends at the best boundary in its last eighth, else at the limit; the whitespace between two
    parts is dropped, nothing else."""
    out: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = limit
        for boundary in _BOUNDARIES:
            ends = [m.end() for m in boundary.finditer(window, limit - limit // 8)]
            if ends:
                cut = ends[-1]
                break
        part, rest = window[:cut].rstrip(), rest[cut:].lstrip()
        if part:
            out.append(part)
    if rest.strip():
        out.append(rest)
    return out
