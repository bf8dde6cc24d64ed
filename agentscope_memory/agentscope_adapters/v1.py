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

import asyncio
import json
from typing import Any

from agentscope.memory import LongTermMemoryBase
from agentscope.message import Msg, TextBlock
from agentscope.tool import ToolResponse

from agentscope_memory.agentscope_adapters.mem0_client import RemoteMem0Client


def _stored_nothing(result: Any) -> bool:
    return isinstance(result, dict) and "results" in result and len(result["results"]) == 0


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
    # (an unreachable server included), so the model reads why and the agent goes on; an
    # exception without a message still says what it was.
    return str(exc) or type(exc).__name__


def _text(msg: Msg) -> str:
    text = msg.get_text_content()
    return text if text is not None else ""


# The longest query the server searches (its long-term memory's longest text,
# `long_term/hybrid/records.py` MAX_TEXT_CHARS); a longer one is refused.
MAX_QUERY_CHARS = 64 * 1024

# ReActAgent (static control) puts what `retrieve` found into the conversation as this
# message, and then records the conversation.
RETRIEVED_NAME, RETRIEVED_TAG = "long_term_memory", "<long_term_memory>"


def _retrieved(msg: Msg) -> bool:
    """Whether `msg` is what long-term memory recalled: stored, it came back inside the next
    recall, one nested copy more per reply."""
    return msg.name == RETRIEVED_NAME and _text(msg).startswith(RETRIEVED_TAG)


def _query(msg: Msg) -> str | None:
    """What `retrieve` searches for `msg`: its content as JSON, as Mem0LongTermMemory searches
    it (a text in quotes), but of a list of blocks only the text blocks. Mem0LongTermMemory
    searches the whole list, so an image sent inline (base64) made the query megabytes long:
    refused by the server (a query holds at most 64 Ki characters), and the agent's reply with
    it. A message with no text block is not searched. A longer query than the server takes (a
    pasted document, say) is searched by its beginning, for the same reason: an embedder
    reads a query's first few hundred tokens anyway."""
    content = msg.to_dict()["content"]
    if isinstance(content, list):
        content = [block for block in content if isinstance(block, dict) and block.get("type") == "text"]
        if not content:
            return None
    return json.dumps(content, ensure_ascii=False)[:MAX_QUERY_CHARS]


class RemoteLongTermMemory(LongTermMemoryBase):
    """Long-term memory kept by an agentscope-memory server, scoped like AgentScope's
    Mem0LongTermMemory (at least one of agent_name, user_name, run_name), and sending the
    server what Mem0LongTermMemory sends mem0 and answering as it does (README: "AgentScope
    1.0.21: RemoteLongTermMemory" lists the differences: `record`, `retrieve` of no message and
    of non-text blocks)."""

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

    async def _add(self, messages: list[dict[str, str]], infer: bool = True) -> dict[str, Any]:
        return await self._client.add(messages, infer=infer, metadata=self.metadata or None, **self._ids())

    async def _search(self, queries: list[str], limit: int) -> list[str]:
        """Each query's memories (then its relations), query after query, as Mem0LongTermMemory
        joins them: searched at once, a memory found by two queries listed twice."""
        filters = {**self._ids(), **self.metadata}
        results = await asyncio.gather(*(self._client.search(q, filters=filters, top_k=limit) for q in queries))
        found: list[str] = []
        for result in results:
            if result:
                # The server keeps no graph, so no mem0 `relations` to list after the memories.
                found.extend(r["memory"] for r in result["results"])
        return found

    async def record(self, msgs: Msg | list[Msg | None], memory_type: str | None = None, infer: bool = True,
                     **kwargs: Any) -> dict[str, Any]:
        """Remember the messages (static control records the conversation after each reply);
        one message alone too, as AgentScope's Mem0LongTermMemory takes it. Returns the server's
        answer (mem0's `{"results": [...]}`). Unlike Mem0LongTermMemory, each message with text
        goes as its own user or assistant message rather than all of them joined as one
        assistant message: the server stores messages verbatim and skips one it holds, so the
        conversation recorded again after every reply adds only its new messages, where one
        joined text would store the whole conversation again each time. The message holding
        what `retrieve` found, which ReActAgent adds to the conversation, is not recorded.
        `memory_type` is accepted for Mem0LongTermMemory's signature; the server has no
        procedural memory."""
        if isinstance(msgs, Msg):
            msgs = [msgs]
        given = [m for m in msgs if m]
        if not all(isinstance(m, Msg) for m in given):
            raise TypeError("The input messages must be a list of Msg objects.")
        messages = [{"role": "assistant" if m.role == "assistant" else "user", "content": _text(m)}
                    for m in given if _text(m) and not _retrieved(m)]
        if not messages:
            return {"results": []}
        return await self._add(messages, infer=infer)

    async def retrieve(self, msg: Msg | list[Msg] | None, limit: int = 5, **kwargs: Any) -> str:
        """What the memory holds for the message(s), one memory per line: each message's content
        searched as Mem0LongTermMemory searches it, as JSON (`_query`: text blocks only). No
        message (`None`, which the signature allows and Mem0LongTermMemory refuses) finds
        nothing."""
        if msg is None:
            return ""
        if isinstance(msg, Msg):
            msg = [msg]
        if not isinstance(msg, list) or not all(isinstance(m, Msg) for m in msg):
            raise TypeError("The input message must be a Msg or a list of Msg objects.")
        queries = [q for q in map(_query, msg) if q is not None]
        return "\n".join(await self._search(queries, limit))

    async def record_to_memory(self, thinking: str, content: list[str], **kwargs: Any) -> ToolResponse:
        # As Mem0LongTermMemory: the thinking and the contents as one user message; if the
        # server stored nothing of it (it holds it already, say), as an assistant message, then
        # without inference; the answer shows the last add's result.
        try:
            if thinking:
                content = [thinking] + content
            joined = "\n".join(content)
            result = await self._add([{"role": "user", "content": joined, "name": "user"}])
            if _stored_nothing(result):
                result = await self._add([{"role": "assistant", "content": joined, "name": "assistant"}])
            if _stored_nothing(result):
                result = await self._add([{"role": "assistant", "content": joined, "name": "assistant"}],
                                         infer=False)
        except Exception as exc:  # noqa: BLE001 - any failure is the tool's answer, as upstream
            return ToolResponse(content=[TextBlock(type="text", text=f"Error recording memory: {_reason(exc)}")])
        return ToolResponse(content=[TextBlock(type="text", text=f"Successfully recorded content to memory {result}")])

    async def retrieve_from_memory(self, keywords: list[str], limit: int = 5, **kwargs: Any) -> ToolResponse:
        try:
            found = await self._search(list(keywords), limit)
        except Exception as exc:  # noqa: BLE001 - any failure is the tool's answer, as upstream
            return ToolResponse(content=[TextBlock(type="text", text=f"Error retrieving memory: {_reason(exc)}")])
        return ToolResponse(content=[TextBlock(type="text", text="\n".join(found))])

    record_to_memory.__doc__ = _agentscope_doc("record_to_memory")
    retrieve_from_memory.__doc__ = _agentscope_doc("retrieve_from_memory")

    async def close(self) -> None:
        await self._client.close()
