"""The three long-term memory modes for clients that do not run AgentScope's own hooks.

Begin a turn: in STATIC_CONTROL and BOTH, retrieve on the last USER message of the turn's input
and append the `long_term_memory` USER message (what AgentScope-Java 1.0.12's
StaticLongTermMemoryHook does on PreCallEvent); then add the input to the short-term memory.
End a turn: in STATIC_CONTROL and BOTH, record the whole short-term memory (PostCallEvent),
either before answering or in the background. A background record is written down in the
store first and replayed after a restart, so it is never lost.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import Sequence

from agentscope_memory.errors import InvalidArgumentError, MemoryServiceError
from agentscope_memory.long_term.memory import Mem0LongTermMemory, Scope
from agentscope_memory.long_term.tools import TOOLS, ToolSchema, wrap
from agentscope_memory.memory.manager import MemoryManager
from agentscope_memory.message import Msg, MsgRole, TextBlock

log = logging.getLogger("agentscope_memory.long_term")

INJECTED_NAME = "long_term_memory"
PENDING_PREFIX = "ltm_pending:"


class Mode(str, Enum):
    AGENT_CONTROL = "AGENT_CONTROL"
    STATIC_CONTROL = "STATIC_CONTROL"
    BOTH = "BOTH"

    @property
    def static(self) -> bool:
        return self in (Mode.STATIC_CONTROL, Mode.BOTH)

    @property
    def agent(self) -> bool:
        return self in (Mode.AGENT_CONTROL, Mode.BOTH)


@dataclass(frozen=True)
class BeginTurnResult:
    input: list[Msg]
    tools: tuple[ToolSchema, ...]


class Turns:
    """Begin/end-turn logic bound to the short-term memories of a `MemoryManager`."""

    def __init__(self, manager: MemoryManager, memory: Mem0LongTermMemory) -> None:
        self._manager = manager
        self._memory = memory
        self._background: set[asyncio.Task[None]] = set()

    async def begin_turn(
        self, tenant: str, memory_id: str, scope: Scope, mode: Mode, input_msgs: Sequence[Msg]
    ) -> BeginTurnResult:
        scope.validate()
        await self._manager.get_memory(tenant, memory_id)  # fail early on an unknown memory
        msgs = list(input_msgs)
        if mode.static and msgs:
            last_user = next((m for m in reversed(msgs) if m.role is MsgRole.USER), None)
            if last_user is not None:
                try:
                    text, _ = await self._memory.retrieve(tenant, scope, last_user)
                except MemoryServiceError as exc:
                    # The hook only logs a failed retrieval; the turn goes on without memories.
                    log.warning("Failed to retrieve from long-term memory: %s", exc)
                    text = ""
                if text:
                    msgs.append(Msg.create(MsgRole.USER, content=[TextBlock(wrap(text))], name=INJECTED_NAME))
        if msgs:
            await self._manager.add_messages(tenant, memory_id, msgs)
        return BeginTurnResult(msgs, TOOLS if mode.agent else ())

    async def end_turn(
        self, tenant: str, memory_id: str, scope: Scope, mode: Mode, background: bool = False
    ) -> bool:
        scope.validate()
        if not mode.static:
            await self._manager.get_memory(tenant, memory_id)
            return False
        msgs = await self._manager.get_messages(tenant, memory_id)
        if not msgs:
            return False
        if not background:
            await self._memory.record(tenant, scope, msgs)
            return True
        # Write the intent down before answering, so a crash cannot lose the record.
        key = PENDING_PREFIX + uuid.uuid4().hex
        pending = json.dumps({"scope": [scope.agent_name, scope.user_id, scope.run_name], "count": len(msgs)})
        await self._manager.store.run(tenant, lambda tx: tx.kv_put(memory_id, key, pending), small=True)
        self._spawn(tenant, memory_id, key, scope, msgs)
        return True

    def _spawn(self, tenant: str, memory_id: str, key: str, scope: Scope, msgs: list[Msg]) -> None:
        task = asyncio.create_task(self._record_pending(tenant, memory_id, key, scope, msgs))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _record_pending(self, tenant: str, memory_id: str, key: str, scope: Scope, msgs: list[Msg]) -> None:
        try:
            await self._memory.record(tenant, scope, msgs)
        except Exception as exc:  # noqa: BLE001 - kept pending, retried at the next start
            log.warning("Background long-term record failed (kept for retry): %s", exc)
            return
        await self._manager.store.run(tenant, lambda tx: tx.kv_delete(memory_id, key), small=True)

    async def resume_pending(self, tenants: Sequence[str]) -> int:
        """Replay background records that a previous run accepted but did not finish."""
        resumed = 0
        for tenant in tenants:
            token = ""
            while True:
                page = await self._manager.list_memories(tenant, 1000, token)
                for info in page.memories:
                    memory_id = info.record.memory_id
                    keys = await self._manager.store.run(
                        tenant, lambda tx, m=memory_id: [(k, tx.kv_get(m, k)) for k in tx.kv_keys(m, PENDING_PREFIX)],
                        write=False,
                    )
                    for key, value in keys:
                        data = json.loads(value or "{}")
                        scope = Scope(*data.get("scope", ["", "", ""]))
                        msgs = (await self._manager.get_messages(tenant, memory_id))[: int(data.get("count", 0))]
                        self._spawn(tenant, memory_id, key, scope, msgs)
                        resumed += 1
                token = page.next_page_token
                if not token:
                    break
        return resumed

    async def drain(self) -> None:
        """Wait for background records (graceful shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)


def parse_mode(value: str) -> Mode:
    try:
        return Mode(value)
    except ValueError:
        raise InvalidArgumentError("mode", "must be AGENT_CONTROL, STATIC_CONTROL or BOTH") from None
