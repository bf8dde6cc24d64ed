"""Tool calls a conversation was left with, unanswered, and how to close them.

A process or server that dies during a tool call leaves the last assistant message with tool
calls that have no result. ReActAgent then refuses every further call ("Cannot add messages
without tool results when pending tool calls exist"). AgentScope 1.0.12's answer, which its
users know from `ReActAgent.builder().enablePendingToolRecovery(true)`, is to answer each such
call with an error result; `interrupted_results` builds those results (TOOL messages named after
the agent, one result block each), so the model learns the call was cut off and can make it
again. The pending rule is ReActAgent's: the tool calls of the last assistant message whose ids
have no result anywhere in the memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock

# The same text as the Java adapter's (`PendingToolCalls.INTERRUPTED`).
INTERRUPTED = (
    "[ERROR] The call of tool {name} was interrupted before its result was stored; it may or may"
    " not have run. Call it again if its result is still needed."
)


def pending_tool_calls(msgs: Sequence[Msg | None]) -> list[ToolUseBlock]:
    """The unanswered tool calls, in the order the assistant made them."""
    present = [m for m in msgs if m is not None]
    last = next((m for m in reversed(present) if m.role is MsgRole.ASSISTANT), None)
    if last is None:
        return []
    answered = {b.id for m in present for b in m.content if isinstance(b, ToolResultBlock)}
    return [b for b in last.content if isinstance(b, ToolUseBlock) and b.id not in answered]


def interrupted_results(msgs: Sequence[Msg | None], agent_name: str) -> list[Msg]:
    """One TOOL message per unanswered call, saying the call was interrupted."""
    return [
        Msg.create(
            MsgRole.TOOL,
            name=agent_name,
            content=[ToolResultBlock(use.id, use.name, [TextBlock(INTERRUPTED.format(name=use.name))], {})],
        )
        for use in pending_tool_calls(msgs)
    ]
