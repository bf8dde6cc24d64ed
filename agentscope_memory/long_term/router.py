"""Which memory domain a query is about, so recall can skip small talk and filter candidates.

`LlmRouter` asks the configured LLM (one short JSON call); `HeuristicRouter` is the offline,
deterministic default (English and Chinese cues, `domains.DOMAIN_CUES`).

Only small talk routes to `general_chat` (which means "skip recall"). A query that asks about
something but matches no domain cue routes to `unknown_domain`: recall must not be skipped for a
question the heuristic merely fails to classify.
"""

from __future__ import annotations

from typing import Protocol

from agentscope_memory.errors import UnavailableError
from agentscope_memory.llm import ChatClient, strip_thinking
from agentscope_memory.long_term.domains import (
    DOMAINS,
    GENERAL_CHAT,
    UNKNOWN_DOMAIN,
    Domain,
    best_domain,
    is_small_talk,
    parse_domain,
)
from agentscope_memory.long_term.importance import parse_json_object

__all__ = ["HeuristicRouter", "LlmRouter", "QueryRouter"]


class QueryRouter(Protocol):
    async def route(self, query: str) -> Domain:
        """The domain the query is about; `general_chat` means it needs no memory."""
        ...


class HeuristicRouter:
    """Small talk (greetings, thanks, reactions) or an empty query -> general_chat; otherwise
    the domain with most cues; no cue -> `unknown_domain` (user_preferences by default, the
    domain most personal questions are about)."""

    def __init__(self, unknown_domain: Domain = UNKNOWN_DOMAIN) -> None:
        self._unknown = unknown_domain

    async def route(self, query: str) -> Domain:
        return self.route_now(query)

    def route_now(self, query: str) -> Domain:
        text = query.strip()
        if not text or is_small_talk(text):
            return GENERAL_CHAT
        return best_domain(text) or self._unknown


_SYSTEM_PROMPT = (
    "You route a user's message to the part of a personal assistant's long-term memory that can "
    "answer it. Answer with one JSON object and nothing else: {\"domain\": D}, where D is one of "
    + ", ".join(DOMAINS)
    + ". Use general_chat only when the message needs nothing remembered about the user "
    "(greetings, thanks, chit-chat, general knowledge)."
)


class LlmRouter:
    """One JSON chat call per query. An unusable reply falls back to the heuristic router
    (or raises UnavailableError with `use_fallback=False`); transport errors propagate."""

    def __init__(self, llm: ChatClient, fallback: QueryRouter | None = None, use_fallback: bool = True) -> None:
        self._llm = llm
        self._fallback: QueryRouter | None = (fallback or HeuristicRouter()) if use_fallback else None

    async def route(self, query: str) -> Domain:
        if not query.strip():
            return GENERAL_CHAT
        messages = [{"role": "system", "content": _SYSTEM_PROMPT}, {"role": "user", "content": query}]
        result = await self._llm.chat(messages, temperature=0)
        answer = strip_thinking(result.text)
        try:
            # A bare domain name is a usable answer too.
            domain = parse_domain(answer.strip('"')) or parse_domain(
                parse_json_object(answer).get("domain")
            )
            if domain is None:
                raise ValueError("domain is missing or not one of the known domains")
            return domain
        except ValueError as exc:
            if self._fallback is None:
                raise UnavailableError(f"LLM routing reply unusable ({exc}): {result.text[:200]!r}") from None
            return await self._fallback.route(query)
