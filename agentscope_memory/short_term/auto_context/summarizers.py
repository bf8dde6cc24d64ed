"""Who writes the summaries: an OpenAI-compatible LLM, or, with none configured, a
deterministic extractive fallback that is marked as such in the summary's metadata."""

from __future__ import annotations

import re

from agentscope_memory.llm import ChatClient
from agentscope_memory.short_term.auto_context.engine import Summary
from agentscope_memory.short_term.auto_context.prompts import END_MARKER
from agentscope_memory.short_term.auto_context.tokens import utf16_len, utf16_slice
from agentscope_memory.message import Msg, MsgRole, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, to_json_text

FALLBACK_MARKER = {"agentscope_memory_summarizer": "extractive-fallback"}


def render(msg: Msg) -> str:
    """A message as plain text (the summariser gets no tool schemas, so blocks become text)."""
    parts: list[str] = []
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ThinkingBlock):
            continue
        elif isinstance(block, ToolUseBlock):
            args = block.content if block.content is not None else to_json_text(block.input)
            parts.append(f"[tool call {block.name} id={block.id}] {args}")
        elif isinstance(block, ToolResultBlock):
            out = "\n".join(b.text for b in block.output if isinstance(b, TextBlock))
            parts.append(f"[tool result {block.name} id={block.id}] {out}")
        else:
            parts.append(f"[{type(block).__name__.removesuffix('Block').lower()}]")
    return "\n".join(parts)


class LlmSummarizer:
    def __init__(self, client: ChatClient) -> None:
        self._client = client

    async def summarize(self, messages: list[Msg]) -> Summary:
        chat = []
        for msg in messages:
            role = "assistant" if msg.role is MsgRole.ASSISTANT else "system" if msg.role is MsgRole.SYSTEM else "user"
            chat.append({"role": role, "content": render(msg)})
        result = await self._client.chat(chat, temperature=0)
        return Summary(result.text, {"inputTokens": result.input_tokens, "outputTokens": result.output_tokens,
                                     "time": result.seconds})


_TARGET = re.compile(r"MUST be about (\d+) characters")


class ExtractiveSummarizer:
    """Deterministic, offline: keeps the first sentence of each message, in order, within a
    length budget (the current-round target when the call states one, else 1,000 units)."""

    def __init__(self, budget: int = 1000) -> None:
        self._budget = budget

    async def summarize(self, messages: list[Msg]) -> Summary:
        texts = [m.text_content for m in messages]
        end = texts.index(END_MARKER) if END_MARKER in texts else len(messages)
        payload = messages[1:end]
        budget = self._budget
        for text in texts[end + 1:]:
            match = _TARGET.search(text)
            if match:
                budget = max(40, int(match.group(1)))
        lines = []
        for msg in payload:
            text = " ".join(render(msg).split())
            first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
            who = msg.name or (msg.role.value.lower() if msg.role else "message")
            lines.append(f"{who}: {first}")
        summary = "[extractive summary] " + " | ".join(lines)
        if utf16_len(summary) > budget:
            summary = utf16_slice(summary, max(budget - 3, 0)) + "..."
        return Summary(summary, None, dict(FALLBACK_MARKER))
