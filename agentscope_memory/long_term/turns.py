"""The three long-term memory modes for clients that do not run AgentScope's own hooks.

Begin a turn: in STATIC_CONTROL and BOTH, retrieve on the last USER message of the turn's input
and append the `long_term_memory` USER message (what AgentScope-Java 1.0.12's
StaticLongTermMemoryHook does on PreCallEvent); then add the input to the short-term memory.
End a turn: in STATIC_CONTROL and BOTH, record the whole short-term memory (PostCallEvent),
either before answering or in the background. A background record is a durable job
(`agentscope_memory.jobs`): written to the store before the call is answered, retried with
backoff when it fails, and run by whichever replica claims it, also after a crash.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Sequence

from agentscope_memory.validation.messages import check_msgs
from agentscope_memory.errors import MemoryServiceError
from agentscope_memory.jobs import Job, JobRunner
from agentscope_memory.long_term.engine import LongTermEngine, Scope
from agentscope_memory.long_term.modes import Mode
from agentscope_memory.long_term.tools import TOOLS, ToolSchema, wrap
from agentscope_memory.message import Msg, MsgRole, TextBlock
from agentscope_memory.short_term.manager import MemoryManager
from agentscope_memory.store.base import NO_TENANT, Tx

log = logging.getLogger("agentscope_memory.long_term")

INJECTED_NAME = "long_term_memory"
RECORD_JOB = "long_term.record"
# Background records written down by versions before the job queue (one kv entry per record).
LEGACY_PENDING_PREFIX = "ltm_pending:"
_LEGACY_MIGRATED = "migrated.ltm_pending"


@dataclass(frozen=True)
class BeginTurnResult:
    input: list[Msg]
    tools: tuple[ToolSchema, ...]


def _record_payload(memory_id: str, scope: Scope, count: int) -> dict[str, Any]:
    return {"memory_id": memory_id, "scope": [scope.agent_name, scope.user_id, scope.run_name], "count": count}


class Turns:
    """Begin/end-turn logic bound to the short-term memories of a `MemoryManager`."""

    def __init__(self, manager: MemoryManager, engine: LongTermEngine, jobs: JobRunner) -> None:
        self._manager = manager
        self._engine = engine
        self._jobs = jobs
        jobs.register(RECORD_JOB, self._run_record)

    async def begin_turn(
        self, tenant: str, memory_id: str, scope: Scope, mode: Mode, input_msgs: Sequence[Msg]
    ) -> BeginTurnResult:
        scope.validate()
        check_msgs(input_msgs, "input")
        await self._manager.get_memory(tenant, memory_id)  # fail early on an unknown memory
        msgs = list(input_msgs)
        if mode.static and msgs:
            last_user = next((m for m in reversed(msgs) if m.role is MsgRole.USER), None)
            if last_user is not None:
                try:
                    text, _ = await self._engine.retrieve(tenant, scope, last_user)
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
            await self._engine.record(tenant, scope, msgs)
            return True
        # The job holds the message count, not the messages: the runner reads them again, so a
        # job stays small whatever the conversation's size.
        payload = _record_payload(memory_id, scope, len(msgs))
        await self._manager.store.run(tenant, lambda tx: self._jobs.enqueue_in(tx, RECORD_JOB, payload), small=True)
        self._jobs.wake()
        return True

    async def _run_record(self, job: Job) -> None:
        payload = job.payload
        msgs = await self._manager.get_messages(job.tenant, str(payload["memory_id"]))
        await self._engine.record(job.tenant, Scope(*payload["scope"]), msgs[: int(payload["count"])])

    async def migrate_legacy_pending(self) -> int:
        """Turn background records left by an older version (kv entries) into jobs, once per
        database; returns how many were found."""
        store = self._manager.store
        found = await store.run(NO_TENANT, lambda tx: None if tx.meta_get(_LEGACY_MIGRATED) else tx.kv_scan(LEGACY_PENDING_PREFIX), write=False)
        if found is None:
            return 0
        for entry in found:
            data = json.loads(entry.value or "{}")
            scope = Scope(*data.get("scope", ["", "", ""]))
            payload = _record_payload(entry.memory_id, scope, int(data.get("count", 0)))

            def move(tx: Tx, memory_id: str = entry.memory_id, key: str = entry.key,
                     payload: dict[str, Any] = payload) -> None:
                self._jobs.enqueue_in(tx, RECORD_JOB, payload)
                tx.kv_delete(memory_id, key)

            await store.run(entry.tenant, move)
        await store.run(NO_TENANT, lambda tx: tx.meta_put(_LEGACY_MIGRATED, "1"))
        if found:
            self._jobs.wake()
        return len(found)
