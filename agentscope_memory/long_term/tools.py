"""AgentScope-Java's long-term memory agent tools: `recordToMemory` and `retrieveFromMemory`.

Names, parameters, descriptions and result texts are AgentScope-Java 1.0.12's
(`LongTermMemoryTools`, reference/agentscope-java-core.md §4.3). The model sees a tool's result
as a JSON string literal (AgentScope serialises the returned String), which
`as_tool_result_text` reproduces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

from agentscope_memory.validation.long_term import check_keywords, check_record_texts
from agentscope_memory.errors import MemoryServiceError
from agentscope_memory.long_term.engine import LongTermEngine, Scope
from agentscope_memory.message import Msg, MsgRole, to_json_text

log = logging.getLogger("agentscope_memory.long_term")

RECORD_TOOL = "recordToMemory"
RETRIEVE_TOOL = "retrieveFromMemory"

RECORD_DESCRIPTION = (
    "Record important information to long-term memory for future reference. Use this when the "
    "user shares preferences, personal information, or important facts that should be "
    "remembered across conversations."
)
RETRIEVE_DESCRIPTION = (
    "Retrieve information from long-term memory based on keywords. Use this to recall user "
    "preferences, past conversations, or important facts."
)

NO_CONTENT = "No content provided to record"
NO_VALID_CONTENT = "No valid content to record"
RECORDED = "Successfully recorded to long-term memory"
RECORD_ERROR = "Error recording memory: "
NO_KEYWORDS = "No keywords provided for search"
NOTHING_FOUND = "No relevant memories found"
RETRIEVE_ERROR = "Error retrieving memory: "


def wrap(text: str) -> str:
    """How AgentScope-Java 1.0.12 presents retrieved memories to the model (capital "P" too)."""
    return (
        "Below is content retrieved from the long-term memory associated with the current user, "
        "Please extract useful information from it in the context of the current conversation.\n"
        "<long_term_memory>\n" + text + "\n</long_term_memory>"
    )


def as_tool_result_text(text: str) -> str:
    """The tool result as the model sees it: the returned String, JSON-encoded."""
    return to_json_text(text)


@dataclass(frozen=True)
class ToolSchema:
    name: str
    description: str
    parameters: dict[str, Any]


TOOLS = (
    ToolSchema(
        RECORD_TOOL,
        RECORD_DESCRIPTION,
        {
            "type": "object",
            "properties": {
                "thinking": {"type": "string", "description": "Your reasoning about what to record and why"},
                "content": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "List of specific facts to remember. Each item should be clear and concise.",
                },
            },
            "required": ["thinking", "content"],
        },
    ),
    ToolSchema(
        RETRIEVE_TOOL,
        RETRIEVE_DESCRIPTION,
        {
            "type": "object",
            "properties": {
                "keywords": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Keywords to search for in memory. Be specific (e.g., person names, dates, locations).",
                }
            },
            "required": ["keywords"],
        },
    ),
)


async def record_to_memory(
    engine: LongTermEngine, tenant: str, scope: Scope, thinking: str | None, content: Sequence[str | None] | None
) -> str:
    scope.validate()
    check_record_texts(thinking, content)
    if not content:
        return NO_CONTENT
    msgs: list[Msg] = []
    if thinking:
        msgs.append(Msg.create(MsgRole.ASSISTANT, thinking))
    msgs += [Msg.create(MsgRole.USER, item) for item in content if item]
    if not msgs:
        return NO_VALID_CONTENT
    try:
        await engine.record(tenant, scope, msgs)
    except MemoryServiceError as exc:
        return RECORD_ERROR + str(exc)
    return RECORDED


async def retrieve_from_memory(
    engine: LongTermEngine, tenant: str, scope: Scope, keywords: Sequence[str] | None
) -> str:
    scope.validate()
    check_keywords(keywords)
    if not keywords:
        return NO_KEYWORDS
    query = Msg.create(MsgRole.USER, " ".join(keywords))
    try:
        text, _ = await engine.retrieve(tenant, scope, query)
    except MemoryServiceError as exc:
        # AgentScope-Java's Mem0LongTermMemory turns every retrieval error into "", so the tool
        # says nothing was found; the cause goes to the log.
        log.warning("long-term retrieval failed: %s", exc)
        text = ""
    return wrap(text) if text else NOTHING_FOUND
