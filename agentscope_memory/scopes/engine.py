"""`ScopeEngine`: parent/child scopes over the short-term memories and long-term scopes.

What a child sees (the decision the README documents):
- Its own messages, exactly as before: `GetMessages`, `PrepareReasoningInput`, paging, etags,
  `DeleteMessage` indexes and state export (`SaveState`, sessions) cover the child's own
  messages only, so AgentScope's `Memory` contract and saved sessions are unchanged.
- Inherited messages, read-only, from `list_inherited` (`ScopeService.ListInheritedMessages`):
  the SHARED and GLOBAL messages of its ancestors (the root's first) and then the GLOBAL messages
  of every other memory of the tenant, each marked with its origin. They are never copied into
  the child, so they are not exported with its state and a change at the origin (a deleted
  message) shows at once.
- Long-term searches (`Retrieve`, `SearchLongTermMemories`, the tools) in a child scope rank its
  own memories together with the inherited ones (`long_term.py`), marked `inherited`.

A memory's visible messages are its list's items marked SHARED or GLOBAL when added: for
IN_MEMORY the message list, for AUTO_CONTEXT the original (uncompressed) history, so that what
children inherit does not change when the parent compresses.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from agentscope_memory.errors import AlreadyExistsError, FailedPreconditionError, NotFoundError, UnimplementedError
from agentscope_memory.long_term.engine import LongTermEngine, Scope
from agentscope_memory.message import Msg
from agentscope_memory.scopes.hierarchy import LTM_SPACE, MEMORY_SPACE, ancestors, attach, detach
from agentscope_memory.scopes.long_term import exact_key, scope_of_key, visible_key
from agentscope_memory.scopes.visibility import FROM_ANCESTORS, FROM_ANYONE, LOCAL, check_visibility
from agentscope_memory.short_term.manager import AddResult, MemoryInfo, MemoryManager
from agentscope_memory.store.base import MemoryRecord, Tx
from agentscope_memory.store.codec import decode_msg, stored_bytes
from agentscope_memory.validation.ids import check_id

# The list whose items a kind's visibility marks apply to. Kinds not named here (none yet)
# keep LOCAL messages only.
MARKED_LISTS = {"IN_MEMORY": "messages", "AUTO_CONTEXT": "original"}


@dataclass(frozen=True)
class Lineage:
    """A node's parent ("" for a root), its ancestors nearest first and its children count."""

    parent: str
    ancestors: list[str]
    child_count: int


@dataclass(frozen=True)
class InheritedMessage:
    """A message a memory inherits; it belongs to `origin_memory_id`."""

    stored: bytes
    origin_memory_id: str
    visibility: str
    # 1 for the parent, 2 for the grandparent...; 0 for a GLOBAL message of a non-ancestor.
    distance: int

    @property
    def message(self) -> Msg:
        # A read-only view, also of what a newer server stored: blocks of kinds it added are left out.
        return decode_msg(self.stored, newer_kinds=True)


@dataclass(frozen=True)
class InheritedPage:
    messages: list[InheritedMessage]
    next_page_token: str


@dataclass(frozen=True)
class LongTermLineage:
    ancestors: list[Scope]
    child_count: int


# Where a listing of inherited messages stands: (phase, ancestor index, after seq, global id).
_Cursor = tuple[int, int, int, str]
_ANCESTORS, _GLOBALS = 0, 1


class ScopeEngine:
    def __init__(self, memories: MemoryManager, long_term: LongTermEngine | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._memories = memories
        self._store = memories.store
        self._tokens = memories.tokens
        self._long_term = long_term
        self._clock = clock
        # What else a child takes from its parent, run inside `create_child`'s transaction after
        # the child is stored: `hook(tx, parent, child)`. An engine that keeps per-memory
        # settings outside the memory's configuration (shared pools, say) adds one here; an
        # error in a hook undoes the creation.
        self.child_hooks: list[Callable[[Tx, MemoryRecord, MemoryRecord], None]] = []

    @staticmethod
    def _require(tx: Tx, memory_id: str, field: str = "memory_id") -> MemoryRecord:
        record = tx.get_memory(memory_id)
        if record is None:
            prefix = "" if field == "memory_id" else f"{field}: "
            raise NotFoundError(f"{prefix}memory {memory_id!r} does not exist")
        return record

    # -- hierarchy of memories --------------------------------------------------------------

    async def set_parent(self, tenant: str, memory_id: str, parent_memory_id: str) -> list[str]:
        """Set (or, when empty, clear) a memory's parent; returns its ancestors, nearest first."""
        check_id(memory_id, "memory_id")
        if parent_memory_id:
            check_id(parent_memory_id, "parent_memory_id")
        now = self._clock()

        def write(tx: Tx) -> list[str]:
            # The hierarchy lock before any memory's row lock: two calls naming the same two
            # memories in opposite roles must queue, not deadlock (PostgreSQL).
            tx.scope_lock(MEMORY_SPACE)
            self._require(tx, memory_id)
            if not parent_memory_id:
                detach(tx, MEMORY_SPACE, memory_id)
                return []
            self._require(tx, parent_memory_id, "parent_memory_id")
            return attach(tx, MEMORY_SPACE, memory_id, parent_memory_id, now, "parent_memory_id", "memory")

        return await self._store.run(tenant, write, small=True)

    async def create_child(
        self, tenant: str, parent_memory_id: str, memory_id: str, kind: str | None = None,
        config_json: str | None = None, labels: dict[str, str] | None = None,
    ) -> tuple[MemoryInfo, list[str]]:
        """Create `memory_id` as a child of `parent_memory_id`, in one transaction. Without a
        `kind`, the child takes the parent's kind and its whole stored configuration (every
        memory option, shared pools included once memories have them)."""
        check_id(parent_memory_id, "parent_memory_id")
        check_id(memory_id, "memory_id")
        labels = dict(labels or {})
        self._memories._check_labels(labels)
        config = None
        if kind is not None:
            config = self._memories.handler(kind).validate_config(config_json or "{}")
        now = self._clock()

        def create(tx: Tx) -> tuple[MemoryInfo, list[str]]:
            tx.scope_lock(MEMORY_SPACE)  # before the parent's row lock, as in `set_parent`
            parent = self._require(tx, parent_memory_id, "parent_memory_id")
            child_kind = kind or parent.kind
            child_config = config if config is not None else self._memories.handler(child_kind).validate_config(
                parent.config_json)
            existing = tx.get_memory(memory_id)
            if existing is not None:
                raise AlreadyExistsError(f"memory {memory_id!r} already exists (kind {existing.kind})")
            record = MemoryRecord(memory_id, child_kind, child_config, labels, now, now, 1)
            tx.insert_memory(record)
            chain = attach(tx, MEMORY_SPACE, memory_id, parent_memory_id, now, "parent_memory_id", "memory")
            for hook in self.child_hooks:
                hook(tx, parent, record)
            return MemoryInfo(record, 0), chain

        return await self._store.run(tenant, create, small=True)

    async def lineage(self, tenant: str, memory_id: str) -> Lineage:
        check_id(memory_id, "memory_id")

        def read(tx: Tx) -> Lineage:
            self._require(tx, memory_id)
            chain = ancestors(tx, MEMORY_SPACE, memory_id)
            return Lineage(chain[0] if chain else "", chain, tx.scope_child_count(MEMORY_SPACE, memory_id))

        return await self._store.run(tenant, read, write=False, small=True)

    async def list_children(self, tenant: str, memory_id: str, page_size: int = 0,
                            page_token: str = "") -> tuple[list[str], str]:
        check_id(memory_id, "memory_id")
        size = self._memories._page_size(page_size, default=100, maximum=1000)
        await self._tokens.ready()
        binding: list[str | int] = [tenant, memory_id, page_size]
        after = self._tokens.read_with_text(page_token, "children", binding, 0)[1] if page_token else ""

        def read(tx: Tx) -> list[str]:
            self._require(tx, memory_id)
            return tx.scope_children(MEMORY_SPACE, memory_id, after, size + 1)

        children = await self._store.run(tenant, read, write=False, small=True)
        token = self._tokens.issue("children", binding, [], children[size - 1]) if len(children) > size else ""
        return children[:size], token

    async def delete_memory(self, tenant: str, memory_id: str, force: bool = False) -> int:
        """Delete a memory. One with children is refused unless `force`, which detaches them
        (they keep everything of their own). Returns how many children were detached."""
        check_id(memory_id, "memory_id")

        def delete(tx: Tx) -> int:
            tx.scope_lock(MEMORY_SPACE)  # before the memory's row lock, as in `set_parent`
            self._require(tx, memory_id)
            children = tx.scope_child_count(MEMORY_SPACE, memory_id)
            if children and not force:
                raise FailedPreconditionError(
                    f"force: memory {memory_id!r} has {children} {'child' if children == 1 else 'children'}; delete or detach them "
                    "first, or set force to detach them"
                )
            detached = tx.scope_detach_children(MEMORY_SPACE, memory_id)
            tx.scope_forget_memory(memory_id)
            tx.delete_memory(memory_id)
            return detached

        detached = await self._store.run(tenant, delete)
        self._memories.deleted(tenant, memory_id)
        return detached

    # -- visibility of messages -------------------------------------------------------------

    async def add_messages(self, tenant: str, memory_id: str, msgs: Sequence[Msg], request_id: str | None = None,
                           visibility: str = LOCAL, watch_id: str = "", time_left_s: float | None = None) -> AddResult:
        """`MemoryManager.add_messages`, with the messages marked `visibility`."""
        visibility = check_visibility(visibility)
        if visibility == LOCAL:
            return await self._memories.add_messages(tenant, memory_id, msgs, request_id, watch_id=watch_id,
                                                     time_left_s=time_left_s)

        def mark(tx: Tx, record: MemoryRecord, count: int) -> None:
            list_name = MARKED_LISTS.get(record.kind)
            if list_name is None:
                raise FailedPreconditionError(
                    f"visibility: memories of kind {record.kind} keep LOCAL messages only"
                )
            tx.scope_mark_last(record.memory_id, list_name, count, visibility)

        return await self._memories.add_messages(tenant, memory_id, msgs, request_id, after_add=mark,
                                                 fingerprint_extra=f"visibility={visibility}", watch_id=watch_id,
                                                 time_left_s=time_left_s)

    async def list_inherited(self, tenant: str, memory_id: str, page_size: int = 0,
                             page_token: str = "") -> InheritedPage:
        """The messages `memory_id` inherits, a page at a time (see the module docstring)."""
        check_id(memory_id, "memory_id")
        limits = self._memories.limits
        size = self._memories._page_size(page_size, default=limits.default_page_size, maximum=limits.max_page_size)
        await self._tokens.ready()
        binding: list[str | int] = [tenant, memory_id, page_size]
        cursor: _Cursor = (_ANCESTORS, 0, 0, "")
        if page_token:
            values, text = self._tokens.read_with_text(page_token, "inherited", binding, 3)
            cursor = (values[0], values[1], values[2], text)

        def read(tx: Tx) -> tuple[list[InheritedMessage], _Cursor | None]:
            self._require(tx, memory_id)
            chain = ancestors(tx, MEMORY_SPACE, memory_id)
            out, position = _collect(tx, memory_id, chain, cursor, size, limits.max_page_bytes)
            if position is not None and not _collect(tx, memory_id, chain, position, 1, limits.max_page_bytes)[0]:
                position = None
            return out, position

        messages, position = await self._store.run(tenant, read, write=False)
        token = ""
        if position is not None:
            token = self._tokens.issue("inherited", binding, list(position[:3]), position[3])
        return InheritedPage(messages, token)

    # -- long-term scopes -------------------------------------------------------------------

    async def set_long_term_parent(self, tenant: str, scope: Scope, parent: Scope | None) -> list[Scope]:
        scope.validate("scope")
        if parent is not None:
            parent.validate("parent")
        now = self._clock()
        child_key = exact_key(scope)

        def write(tx: Tx) -> list[str]:
            if parent is None:
                detach(tx, LTM_SPACE, child_key)
                return []
            return attach(tx, LTM_SPACE, child_key, exact_key(parent), now, "parent", "scope")

        return [scope_of_key(k) for k in await self._store.run(tenant, write, small=True)]

    async def delete_long_term_scope(self, tenant: str, scope: Scope, force: bool = False) -> int:
        """The long-term engine's `delete_scope`, refused while `scope` has child scopes unless
        `force`; then the children are detached first (they keep their own memories)."""
        if self._long_term is None:
            raise FailedPreconditionError("long-term memory is switched off on this server")
        scope.validate("scope")
        key = exact_key(scope)

        def detach_children(tx: Tx) -> None:
            tx.scope_lock(LTM_SPACE)
            children = tx.scope_child_count(LTM_SPACE, key)
            if children and not force:
                raise FailedPreconditionError(
                    f"force: scope {_describe(scope)} has {children} child {'scope' if children == 1 else 'scopes'}; "
                    "detach them first, or set force to detach them")
            if children:
                tx.scope_detach_children(LTM_SPACE, key)

        await self._store.run(tenant, detach_children, small=True)
        deleted: int = await self._long_term.delete_scope(tenant, scope)
        return deleted

    async def long_term_lineage(self, tenant: str, scope: Scope) -> LongTermLineage:
        scope.validate("scope")
        key = exact_key(scope)

        def read(tx: Tx) -> LongTermLineage:
            chain = ancestors(tx, LTM_SPACE, key)
            return LongTermLineage([scope_of_key(k) for k in chain], tx.scope_child_count(LTM_SPACE, key))

        return await self._store.run(tenant, read, write=False, small=True)

    async def record_long_term(self, tenant: str, scope: Scope, msgs: Sequence[Msg | None],
                               metadata: dict[str, Any] | None = None, visibility: str = LOCAL, *,
                               pinned: bool = False) -> list[Any]:
        """`LongTermEngine.record` with a visibility (the server's own engine only)."""
        visibility = check_visibility(visibility)
        engine = self._long_term
        if engine is None:
            raise UnimplementedError("long-term memory is switched off on this server")
        if visibility == LOCAL:
            return await engine.record(tenant, scope, msgs, metadata, pinned=pinned)
        from agentscope_memory.long_term.hybrid import HybridEngine

        if not isinstance(engine, HybridEngine):
            raise UnimplementedError("visibility: this server's long-term engine keeps LOCAL memories only")
        from agentscope_memory.long_term.hybrid.records import recordable
        from agentscope_memory.validation.long_term import check_record

        # Validate before registering the key, so that a refused call stores nothing at all.
        scope.validate()
        check_record(msgs, metadata)
        if recordable(msgs):
            key = visible_key(scope, visibility)
            await self._store.run(tenant, lambda tx: tx.scope_ltm_register(key, exact_key(scope), visibility),
                                  small=True)
        return await engine.record(tenant, scope, msgs, metadata, visibility=visibility, pinned=pinned)


def _collect(tx: Tx, memory_id: str, chain: list[str], cursor: _Cursor, size: int,
             max_bytes: int) -> tuple[list[InheritedMessage], _Cursor | None]:
    """Up to `size` inherited messages (within `max_bytes`, at least one) from `cursor` on, and
    where the next page starts (None: nothing after them)."""
    roots_first = list(reversed(chain))
    skip = {memory_id, *chain}
    phase, index, after, global_id = cursor
    out: list[InheritedMessage] = []
    total = 0
    wanted: tuple[str, ...]
    while len(out) < size:
        if phase == _ANCESTORS:
            if index >= len(roots_first):
                phase, index, after, global_id = _GLOBALS, 0, 0, ""
                continue
            source, distance, wanted = roots_first[index], len(roots_first) - index, FROM_ANCESTORS
        else:
            if not global_id:
                following = [m for m in tx.scope_global_memories(global_id, 100) if m not in skip]
                if not following:
                    return out, None
                global_id, after = following[0], 0
            source, distance, wanted = global_id, 0, FROM_ANYONE
        record = tx.get_memory(source)
        list_name = MARKED_LISTS.get(record.kind) if record is not None else None
        found, last = (tx.scope_marked(source, list_name, wanted, after, size - len(out))
                       if list_name is not None else ([], None))
        if last is None:
            # This source is done: the next ancestor, or the next memory with GLOBAL messages.
            if phase == _ANCESTORS:
                index, after = index + 1, 0
            else:
                following = [m for m in tx.scope_global_memories(global_id, 100) if m not in skip]
                if not following:
                    return out, None
                global_id, after = following[0], 0
            continue
        kept = 0
        # Besides the message, each item carries its origin's id (up to 256 bytes: a thousand
        # small messages make it count), its visibility, distance and framing.
        carried = len(source.encode("utf-8")) + 16
        for row, vis in found:
            cost = len(stored_bytes(row.data)) + carried
            # The first message of a page always goes (one message fits the budget alone).
            if out and total + cost > max_bytes:
                return out, (phase, index, found[kept - 1][0].seq if kept else after, global_id)
            out.append(InheritedMessage(stored_bytes(row.data), source, vis, distance))
            total += cost
            kept += 1
        after = last
    return out, (phase, index, after, global_id)


def _describe(scope: Scope) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in
                     (("agent_name", scope.agent_name), ("user_id", scope.user_id), ("run_name", scope.run_name)) if value)
