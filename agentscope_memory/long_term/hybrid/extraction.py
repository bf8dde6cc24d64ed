"""Fact extraction by mem0, when an LLM is configured.

mem0 2.x extracts in one LLM call that sees the new round and the scope's most similar existing
memories, and adds only what is new (its `Memory.add(infer=True)` pipeline). This module runs
that step with mem0's own prompt builder (`mem0.configs.prompts`, the installed library; nothing
of it is copied here) over the server's own store: the existing memories come from this engine's
index, the call goes through the server's LLM client, and what mem0 returns is stored by the
engine as `memory_type=fact` (deduplicated by content hash, as mem0 does). mem0's vector store is
not used: replicas share only the server's store.

mem0's pipeline needs an LLM; without one, the offline scorer's fact is stored instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Sequence

from agentscope_memory.llm import ChatClient, storable_text, strip_thinking
from agentscope_memory.long_term.hybrid.records import MAX_TEXT_CHARS

# As many existing memories as mem0 shows its extractor.
EXISTING_SHOWN = 10
# What one extracted fact keeps of a runaway reply: a memory's text limit (a fact of megabytes
# broke the 4 MiB response limit of every read of it, and recall left it out), and a short name.
MAX_ATTRIBUTION_CHARS = 200


@dataclass(frozen=True)
class ExtractedFact:
    text: str
    attributed_to: str
    linked_memory_ids: tuple[str, ...]


def _prompts() -> ModuleType:
    # mem0 reads this at import time; nothing it imports may phone home.
    os.environ["MEM0_TELEMETRY"] = "False"
    from mem0.configs import prompts

    return prompts


class Mem0Extractor:
    method = "mem0"

    def __init__(self, llm: ChatClient) -> None:
        self._llm = llm
        self._prompts: ModuleType | None = None

    async def prompt(self, round_texts: Sequence[str], existing: Sequence[str], *, agent_scoped: bool) -> list[dict[str, str]]:
        """The chat messages mem0 sends for this round (`round_texts` as "role: text")."""
        if self._prompts is None:
            self._prompts = await asyncio.to_thread(_prompts)
        prompts = self._prompts
        system = prompts.ADDITIVE_EXTRACTION_PROMPT + (prompts.AGENT_CONTEXT_SUFFIX if agent_scoped else "")
        user = prompts.generate_additive_extraction_prompt(
            existing_memories=[{"id": str(i), "text": text} for i, text in enumerate(existing)],
            new_messages="\n".join(round_texts),
            last_k_messages=[],
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def extract(self, round_texts: Sequence[str], existing: Sequence[tuple[str, str]], *,
                      agent_scoped: bool) -> list[ExtractedFact] | None:
        """mem0's new facts for a round, given `existing` (memory id, text) most similar first.
        None when the reply is not mem0's JSON (the caller falls back); transport failures
        propagate so the background job retries."""
        existing = list(existing)[:EXISTING_SHOWN]
        messages = await self.prompt(round_texts, [text for _, text in existing], agent_scoped=agent_scoped)
        result = await self._llm.chat(messages, temperature=0, response_format={"type": "json_object"})
        return parse_facts(result.text, [memory_id for memory_id, _ in existing])


def parse_facts(reply: str, existing_ids: Sequence[str]) -> list[ExtractedFact] | None:
    """mem0's `{"memory": [{"text", "attributed_to", "linked_memory_ids"}...]}`, its linked ids
    (positions in what it was shown) mapped back to memory ids; None when unusable."""
    # A reasoning model's <think> block goes first: its braces are not the answer's.
    text = re.sub(r"^\s*```(?:json)?\s*|\s*```\s*$", "", strip_thinking(reply or ""))
    try:
        value: Any = json.loads(text, strict=False)
    except (json.JSONDecodeError, RecursionError):  # nested past the decoder's depth: garbage too
        return None
    items = value.get("memory") if isinstance(value, dict) else None
    if not isinstance(items, list):
        return None
    facts: list[ExtractedFact] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            continue
        fact = storable_text(item["text"]).strip()[:MAX_TEXT_CHARS].strip()
        if not fact:
            continue
        links = item.get("linked_memory_ids")
        linked = []
        for link in links if isinstance(links, list) else []:
            link = str(link)
            # ASCII digits only, and few: int() refuses "²" (a digit to isdigit) and numbers of
            # thousands of digits, and a position is below EXISTING_SHOWN anyway.
            if link.isascii() and link.isdigit() and len(link) <= 6 and int(link) < len(existing_ids):
                linked.append(existing_ids[int(link)])
            elif link in existing_ids:
                linked.append(link)
        attributed = item.get("attributed_to")
        facts.append(ExtractedFact(fact, storable_text(attributed)[:MAX_ATTRIBUTION_CHARS] if isinstance(attributed, str) else "",
                                   tuple(dict.fromkeys(linked))))
    return facts
