"""AgentScope-Java 1.x conversations seen from 2.x: the slot (user, session) resumes the
short-term memory whose id is the session id.

A 1.x agent with our `RemoteMemory` keeps its messages in an IN_MEMORY memory; `saveTo` writes
them under `memory_messages`. AgentScope-Java 2.x's legacy loader reads that list key when a
slot has no `agent_state`. So the list `memory_messages` of a slot that has none of its own is
read from the memory with id == session id, when that memory is IN_MEMORY and either carries no
`user_id` label or one equal to the slot's user. The memory is only read; the 2.x agent then
saves `agent_state`, which is authoritative from then on (2.x never deletes the old key).
Deleting the slot (or its `memory_messages` list) detaches it from the memory for good, so a
deleted session is not resumed again from it.
"""

from __future__ import annotations

from agentscope_memory.agent_state.engine import Slot
from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.message import to_json_text
from agentscope_memory.session.state import MEMORY_MESSAGES
from agentscope_memory.short_term.manager import MemoryManager

# The memory label that ties a 1.x memory to one user (optional).
USER_LABEL = "user_id"
_KIND = "IN_MEMORY"


class MemoryBackedLegacyMessages:
    """`LegacyMessages` over the short-term memories."""

    def __init__(self, memories: MemoryManager) -> None:
        self.memories = memories

    async def messages(self, tenant: str, slot: Slot) -> list[str] | None:
        try:
            record, entries = await self.memories.save_state(tenant, slot.session_id)
        except (InvalidArgumentError, NotFoundError):
            # Not a valid memory id, or no such memory: nothing to resume.
            return None
        if record.kind != _KIND:
            return None
        owner = record.labels.get(USER_LABEL)
        if owner is not None and owner != slot.user_id:
            return None
        for entry in entries:
            if entry.key == MEMORY_MESSAGES and entry.items is not None:
                return [to_json_text(item) for item in entry.items]
        return []
