"""AgentScope-Python 1.x (1.0.21): a server-side conversation as a `MemoryBase`.

    from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory

    memory = RemoteMemory("127.0.0.1:50051", "chat-42")
    agent = ReActAgent(..., memory=memory)

Messages live in the server's short-term memory `memory_id` (gRPC), so they survive the
process and other clients can read them. Each stored message carries its text as a text block
(readable by the Java clients and long-term recording) and AgentScope-Python's own message
JSON (`Msg.to_dict()`) with its marks in its metadata, so it comes back exactly as it was
added: Python's message JSON differs from Java's (content may be a plain string, roles are
lower case). Changing marks rewrites the conversation (clear and re-add): fine for
AgentScope's compression, which marks a batch at a time.

The module's state is the memory id and the compressed summary; `JSONSession` saves and loads
it, and a loaded module reads the same server-side conversation.
"""

from __future__ import annotations

from typing import Any

from agentscope.memory import MemoryBase
from agentscope.message import Msg as PyMsg

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.message import Msg, MsgRole, TextBlock

# Where a stored message keeps AgentScope-Python's own JSON and marks.
METADATA_KEY = "agentscope_python"
_ROLES = {"user": MsgRole.USER, "assistant": MsgRole.ASSISTANT, "system": MsgRole.SYSTEM}


def _stored(msg: PyMsg, marks: list[str]) -> Msg:
    text = msg.get_text_content() or ""
    return Msg(id=msg.id, name=msg.name, role=_ROLES.get(msg.role, MsgRole.USER),
               content=[TextBlock(text)] if text else [],
               metadata={METADATA_KEY: {"msg": msg.to_dict(), "marks": list(marks)}},
               timestamp=msg.timestamp)


def _loaded(stored: Msg) -> tuple[PyMsg, list[str]]:
    own = stored.metadata.get(METADATA_KEY)
    if isinstance(own, dict):
        return PyMsg.from_dict(own["msg"]), list(own.get("marks") or [])
    # Written by another client (e.g. Java): rebuild from role and text.
    role = (stored.role or MsgRole.USER).value.lower()
    role = role if role in _ROLES else "assistant"
    return PyMsg(stored.name or role, stored.text_content, role), []


class RemoteMemory(MemoryBase):
    """AgentScope-Python's working memory kept in an agentscope-memory server."""

    def __init__(self, target: str, memory_id: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        super().__init__()
        self.memory_id = memory_id
        self._client = AsyncMemoryClient(target, api_key=api_key, timeout=timeout)
        self._ready = False
        self.register_state("memory_id")

    async def _entries(self) -> list[tuple[PyMsg, list[str]]]:
        await self._ensure()
        return [_loaded(m) for m in await self._client.get_messages(self.memory_id)]

    async def _ensure(self) -> None:
        if not self._ready:
            await self._client.create_memory(self.memory_id, allow_existing=True)
            self._ready = True

    async def _rewrite(self, entries: list[tuple[PyMsg, list[str]]]) -> None:
        await self._client.clear(self.memory_id)
        if entries:
            await self._client.add_messages(self.memory_id, [_stored(m, marks) for m, marks in entries])

    async def add(self, memories: PyMsg | list[PyMsg] | None, marks: str | list[str] | None = None,
                  allow_duplicates: bool = False, **kwargs: Any) -> None:
        msgs = [memories] if isinstance(memories, PyMsg) else list(memories or [])
        mark_list = [marks] if isinstance(marks, str) else list(marks or [])
        if not allow_duplicates:
            known = {m.id for m, _ in await self._entries()}
            msgs = [m for m in msgs if m.id not in known]
        if msgs:
            await self._ensure()
            await self._client.add_messages(self.memory_id, [_stored(m, mark_list) for m in msgs])

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        entries = await self._entries()
        kept = [(m, marks) for m, marks in entries if m.id not in set(msg_ids)]
        if len(kept) != len(entries):
            await self._rewrite(kept)
        return len(entries) - len(kept)

    async def delete_by_mark(self, mark: str | list[str], *args: Any, **kwargs: Any) -> int:
        wanted = {mark} if isinstance(mark, str) else set(mark)
        entries = await self._entries()
        kept = [(m, marks) for m, marks in entries if not wanted & set(marks)]
        if len(kept) != len(entries):
            await self._rewrite(kept)
        return len(entries) - len(kept)

    async def size(self) -> int:
        return len(await self._entries())

    async def clear(self) -> None:
        await self._ensure()
        await self._client.clear(self.memory_id)

    async def get_memory(self, mark: str | None = None, exclude_mark: str | None = None,
                         prepend_summary: bool = True, **kwargs: Any) -> list[PyMsg]:
        for name, value in (("mark", mark), ("exclude_mark", exclude_mark)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
        msgs = [m for m, marks in await self._entries()
                if (mark is None or mark in marks) and (exclude_mark is None or exclude_mark not in marks)]
        if prepend_summary and self._compressed_summary:
            return [PyMsg("user", self._compressed_summary, "user"), *msgs]
        return msgs

    async def update_messages_mark(self, new_mark: str | None, old_mark: str | None = None,
                                   msg_ids: list[str] | None = None) -> int:
        entries = await self._entries()
        changed = 0
        for msg, marks in entries:
            if msg_ids is not None and msg.id not in msg_ids:
                continue
            if old_mark is not None and old_mark not in marks:
                continue
            if new_mark is None:
                if old_mark in marks:
                    marks.remove(old_mark)
                    changed += 1
                continue
            if old_mark is not None:
                marks.remove(old_mark)
            if new_mark not in marks:
                marks.append(new_mark)
            changed += 1
        if changed:
            await self._rewrite(entries)
        return changed

    async def close(self) -> None:
        await self._client.close()
