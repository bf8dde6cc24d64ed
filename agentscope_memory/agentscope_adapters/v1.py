"""AgentScope-Python 1.x (1.0.21): the server's long-term memory as a `LongTermMemoryBase`.

    from agentscope.agent import ReActAgent
    from agentscope_memory.agentscope_adapters.v1 import RemoteLongTermMemory

    ltm = RemoteLongTermMemory("http://127.0.0.1:8000", api_key="...", agent_name="Friday", user_name="alice")
    agent = ReActAgent(..., long_term_memory=ltm, long_term_memory_mode="both")

It talks to the server's mem0 REST facade (`--mem0-rest-port`) with httpx. The two agent tools
(`record_to_memory`, `retrieve_from_memory`) carry AgentScope's own docstrings, read from the
installed AgentScope at import time, because the toolkit builds the tools' JSON schemas from
them: the model sees exactly the tools it would see with AgentScope's Mem0LongTermMemory.

The memory's state is its scope (agent/user/run names); `JSONSession` saves and loads it like
any other module.
"""

from __future__ import annotations

from typing import Any

import httpx
from agentscope.memory import LongTermMemoryBase
from agentscope.message import Msg, TextBlock
from agentscope.tool import ToolResponse

from agentscope_memory.agentscope_adapters.mem0_client import (
    Mem0ClientError,
    RemoteMem0Client,
)


def _agentscope_doc(name: str) -> str | None:
    """The docstring AgentScope gives tool `name` (its Mem0LongTermMemory's, else the base's)."""
    try:
        from agentscope.memory import Mem0LongTermMemory

        doc = getattr(Mem0LongTermMemory, name).__doc__
    except ImportError:  # pragma: no cover - depends on the installed AgentScope
        doc = None
    return doc or getattr(LongTermMemoryBase, name).__doc__


def _reason(exc: Exception) -> str:
    # The tools answer a failure as AgentScope's Mem0LongTermMemory does, in the tool's result
    # (an unreachable server included), so the model reads why and the agent goes on.
    if isinstance(exc, Mem0ClientError):
        return exc.detail
    return str(exc) or type(exc).__name__


def _text(msg: Msg) -> str:
    text = msg.get_text_content()
    return text if text is not None else ""


class RemoteLongTermMemory(LongTermMemoryBase):
    """Long-term memory kept by an agentscope-memory server, scoped like AgentScope's
    Mem0LongTermMemory (at least one of agent_name, user_name, run_name)."""

    def __init__(self, base_url: str, api_key: str | None = None, *, agent_name: str | None = None,
                 user_name: str | None = None, run_name: str | None = None,
                 metadata: dict[str, Any] | None = None, timeout: float = 60.0) -> None:
        super().__init__()
        if not (agent_name or user_name or run_name):
            raise ValueError("at least one of agent_name, user_name or run_name is required")
        self.agent_name = agent_name
        self.user_name = user_name
        self.run_name = run_name
        self.metadata = dict(metadata or {})
        self._client = RemoteMem0Client(base_url, api_key, timeout=timeout)
        for attr in ("agent_name", "user_name", "run_name"):
            self.register_state(attr)

    def _ids(self) -> dict[str, str]:
        ids = {"agent_id": self.agent_name, "user_id": self.user_name, "run_id": self.run_name}
        return {k: v for k, v in ids.items() if v}

    async def _add(self, messages: list[dict[str, str]], infer: bool = True) -> list[dict[str, Any]]:
        result = await self._client.add(messages, infer=infer, metadata=self.metadata or None, **self._ids())
        return list(result.get("results", []))

    async def _search(self, query: str, limit: int) -> list[str]:
        result = await self._client.search(query, filters={**self._ids(), **self.metadata}, top_k=limit)
        return [r["memory"] for r in result.get("results", []) if r.get("memory")]

    async def record(self, msgs: Msg | list[Msg | None], **kwargs: Any) -> None:
        """Remember the messages (static control records the conversation after each reply);
        one message alone too, as AgentScope's Mem0LongTermMemory takes it."""
        if isinstance(msgs, Msg):
            msgs = [msgs]
        messages = [{"role": "assistant" if m.role == "assistant" else "user", "content": _text(m)}
                    for m in msgs if m is not None and _text(m)]
        if messages:
            await self._add(messages, infer=kwargs.get("infer", True))

    async def retrieve(self, msg: Msg | list[Msg] | None, limit: int = 5, **kwargs: Any) -> str:
        """What the memory holds for the message(s), one memory per line."""
        msgs = [msg] if isinstance(msg, Msg) else [m for m in (msg or []) if m is not None]
        found: list[str] = []
        for m in msgs:
            if _text(m):
                found.extend(t for t in await self._search(_text(m), limit) if t not in found)
        return "\n".join(found)

    async def record_to_memory(self, thinking: str, content: list[str], **kwargs: Any) -> ToolResponse:
        texts = [t for t in [thinking, *content] if t]
        try:
            stored = await self._add([{"role": "user", "content": t} for t in texts])
        except (Mem0ClientError, httpx.HTTPError) as exc:
            return ToolResponse(content=[TextBlock(type="text", text=f"Error recording memory: {_reason(exc)}")])
        return ToolResponse(content=[TextBlock(type="text", text=f"Successfully recorded {len(stored)} memories.")])

    async def retrieve_from_memory(self, keywords: list[str], limit: int = 5, **kwargs: Any) -> ToolResponse:
        found: list[str] = []
        try:
            for keyword in keywords:
                found.extend(t for t in await self._search(keyword, limit) if t not in found)
        except (Mem0ClientError, httpx.HTTPError) as exc:
            return ToolResponse(content=[TextBlock(type="text", text=f"Error retrieving memory: {_reason(exc)}")])
        return ToolResponse(content=[TextBlock(type="text", text="\n".join(found))])

    record_to_memory.__doc__ = _agentscope_doc("record_to_memory")
    retrieve_from_memory.__doc__ = _agentscope_doc("retrieve_from_memory")

    async def close(self) -> None:
        await self._client.close()
