"""Moving memory state between the store and JsonSession directories."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.text import MAX_EXPORT_MEMORIES, check_count
from agentscope_memory.short_term.manager import MemoryManager
from agentscope_memory.session.json_session import JsonSession
from agentscope_memory.session.state import StateEntry

SESSION_LABEL = "session_id"


def write_entries(session: JsonSession, session_id: str, entries: list[StateEntry]) -> None:
    """Write `entries` into the session, all of them or (interrupted) none."""
    session.save_all(session_id, [(e.key, e.items if e.items is not None else e.value, e.items is not None)
                                  for e in entries])


def read_entries(session: JsonSession, session_id: str, keys: list[tuple[str, bool]]) -> list[StateEntry]:
    """The entries for (key, is_list) pairs that exist in the session."""
    found = dict.fromkeys(session.keys(session_id))
    out: list[StateEntry] = []
    for key, is_list in keys:
        if (key, "list" if is_list else "single") not in found:
            continue
        if is_list:
            out.append(StateEntry(key, items=session.get_list(session_id, key)))
        else:
            out.append(StateEntry(key, value=session.get(session_id, key)))
    return out


async def export_to_session(
    manager: MemoryManager, tenant: str, session: JsonSession, session_id: str, memory_ids: list[str]
) -> tuple[Path, list[str]]:
    """Write each memory's state into the session directory, as `memory.saveTo` would."""
    session.session_dir(session_id)  # validates the id before any work
    check_count(len(memory_ids), "memory_ids", MAX_EXPORT_MEMORIES)
    for i, memory_id in enumerate(memory_ids):
        check_id(memory_id, f"memory_ids[{i}]")
    if not memory_ids:
        page_token = ""
        while True:
            page = await manager.list_memories(tenant, 1000, page_token)
            memory_ids += [m.record.memory_id for m in page.memories if m.record.labels.get(SESSION_LABEL) == session_id]
            page_token = page.next_page_token
            if not page_token:
                break
        if not memory_ids:
            raise NotFoundError(
                f"no memory is labelled {SESSION_LABEL}={session_id!r}; name the memories in memory_ids"
            )
    written: dict[tuple[str, bool], str] = {}
    all_entries: list[StateEntry] = []
    for memory_id in memory_ids:
        check_id(memory_id, "memory_ids")
        _, entries = await manager.save_state(tenant, memory_id)
        for entry in entries:
            slot = (entry.key, entry.is_list)
            if slot in written:
                raise InvalidArgumentError(
                    "memory_ids",
                    f"memories {written[slot]!r} and {memory_id!r} both write {entry.key!r}; "
                    "a session holds one memory of each kind",
                )
            written[slot] = memory_id
        all_entries += entries
    await asyncio.to_thread(write_entries, session, session_id, all_entries)
    return session.session_dir(session_id), [e.key for e in all_entries]


async def import_from_session(
    manager: MemoryManager,
    tenant: str,
    session: JsonSession,
    session_id: str,
    memory_id: str,
    expected_version: int | None = None,
) -> tuple[int, list[str]]:
    """Load a memory from the session directory, as `memory.loadFrom` would."""
    info = await manager.get_memory(tenant, memory_id)
    if not session.exists(session_id):
        raise NotFoundError(f"session {session_id!r} does not exist")
    handler = manager.handler(info.record.kind)
    entries = await asyncio.to_thread(read_entries, session, session_id, handler.state_keys)
    loaded = await manager.load_state(tenant, memory_id, entries, expected_version)
    return loaded.version, [e.key for e in entries]


class SessionExchange:
    """Export and import of memories to JsonSession directories kept by the service, one root
    per tenant, so no session id reaches another tenant's files."""

    def __init__(self, manager: MemoryManager, root: Path) -> None:
        self._manager = manager
        self.root = root

    def session(self, tenant: str) -> JsonSession:
        return JsonSession(self.root / tenant)

    async def export(self, tenant: str, session_id: str, memory_ids: list[str]) -> tuple[Path, list[str]]:
        return await export_to_session(self._manager, tenant, self.session(tenant), session_id, list(memory_ids))

    async def import_(
        self, tenant: str, session_id: str, memory_id: str, expected_version: int | None = None
    ) -> tuple[int, list[str]]:
        return await import_from_session(
            self._manager, tenant, self.session(tenant), session_id, memory_id, expected_version
        )
