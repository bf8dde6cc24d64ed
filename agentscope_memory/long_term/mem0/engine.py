"""`Mem0Engine`: the `LongTermEngine` over in-process mem0, with AgentScope-Java 1.0.12's rules.

record: messages with no text, or whose text contains `<compressed_history>`, are skipped; USER
and SYSTEM become mem0 "user" messages, ASSISTANT and TOOL "assistant" ones; only the text is
kept (reference/agentscope-java-core.md §6.3). retrieve: the query is the message's text, the
top 5 memories' texts are joined with newlines, and no text gives "" (§6.4).
"""

from __future__ import annotations

import base64
import builtins  # `list` is also a method name in the engines below
import hashlib
import logging
from typing import Any, Mapping, Sequence

from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.long_term import check_record
from agentscope_memory.errors import InvalidArgumentError, NotFoundError, ResourceExhaustedError, UnimplementedError
from agentscope_memory.long_term.engine import (
    DEFAULT_TOP_K,
    HistoryEntry,
    LongTermHistoryPage,
    LongTermItem,
    LongTermListPage,
    Scope,
    history_entry_size,
    retrieve_by_search,
)
from agentscope_memory.long_term.hybrid import records
from agentscope_memory.long_term.hybrid.records import MAX_TEXT_CHARS
from agentscope_memory.long_term.mem0.backend import TENANT_KEY, Mem0Backend
from agentscope_memory.long_term.metadata_filter import metadata_matches
from agentscope_memory.message import Msg
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, cut_to_budget

log = logging.getLogger("agentscope_memory.long_term")

_MEM0_IDS = (("agent_name", "agent_id"), ("user_id", "user_id"), ("run_name", "run_id"))


# mem0 refuses ids holding whitespace (and trims the rest), while ours may hold any text. Such
# ids, and ids starting with `~` (which no id could before Unicode ids), travel to mem0 as
# `~b64:` + unpadded base64url of their UTF-8; every other id is passed as is, so scopes stored
# before Unicode ids keep their data.
_ENCODED = "~b64:"
# The most memories `count` reads to count them (mem0 has no count of its own).
_COUNT_LIMIT = 100_000


def to_mem0_id(value: str) -> str:
    if value.startswith("~") or any(c.isspace() for c in value):
        return _ENCODED + base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")
    return value


def from_mem0_id(value: str) -> str:
    if value.startswith(_ENCODED):
        data = value[len(_ENCODED):]
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)).decode("utf-8")
    return value


def mem0_ids(scope: Scope) -> dict[str, str]:
    """The scope as mem0's agent_id / user_id / run_id."""
    return {key: to_mem0_id(getattr(scope, attr)) for attr, key in _MEM0_IDS if getattr(scope, attr)}


def _item(raw: dict[str, Any]) -> LongTermItem:
    metadata = {k: v for k, v in (raw.get("metadata") or {}).items() if k != TENANT_KEY}
    return LongTermItem(
        id=str(raw.get("id", "")),
        text=raw.get("memory") or "",
        scope=Scope(*(from_mem0_id(raw.get(key) or "") for key in ("agent_id", "user_id", "run_id"))),
        metadata=metadata,
        score=raw.get("score"),
        created_at=str(raw.get("created_at") or ""),
        updated_at=str(raw.get("updated_at") or ""),
    )


def recordable(msgs: Sequence[Msg | None]) -> list[dict[str, str]]:
    """The mem0 messages AgentScope-Java's Mem0LongTermMemory sends for `msgs` (the same rule
    as the hybrid engine's)."""
    return [{"role": r.role, "content": r.text} for r in records.recordable(msgs)]


class Mem0Engine:
    """Long-term memory for every tenant and scope, backed by one in-process mem0."""

    def __init__(self, backend: Mem0Backend) -> None:
        self._store = backend
        # md5 of every text stored verbatim per (tenant, exact scope), loaded from mem0 on first
        # use, so a record checks for duplicates without scanning the vector store each time.
        self._known: dict[tuple[str, Scope], set[str]] = {}

    @property
    def infer(self) -> bool:
        return self._store.config.infer

    async def open(self) -> None:
        await self._store.open()

    async def close(self) -> None:
        await self._store.close()

    def _filters(self, tenant: str, scope: Scope) -> dict[str, Any]:
        return {**mem0_ids(scope), TENANT_KEY: tenant}

    async def record(
        self, tenant: str, scope: Scope, msgs: Sequence[Msg | None], metadata: dict[str, Any] | None = None,
        *, pinned: bool = False,
    ) -> list[LongTermItem]:
        """Store what `msgs` say. Without an LLM each message is kept verbatim, once: a message
        whose exact text this scope already holds is not stored again."""
        if pinned:
            # mem0 keeps no lifecycle (forgetting, decay) a pin would exempt a memory from.
            raise UnimplementedError("pinned: mem0's long-term memory has no pinned memories")
        scope.validate()
        check_record(msgs, metadata)
        if metadata and TENANT_KEY in metadata:
            raise InvalidArgumentError("metadata_json", f"{TENANT_KEY!r} is reserved")
        messages = recordable(msgs)
        if not messages:
            return []
        if not self.infer:
            messages = await self._new_only(tenant, scope, messages)
            if not messages:
                return []
        try:
            result = await self._store.call(
                "add",
                messages,
                **mem0_ids(scope),
                metadata={**(metadata or {}), TENANT_KEY: tenant},
                infer=self.infer,
            )
        except BaseException:
            self._known.pop((tenant, scope), None)  # unknown what was stored; reload next time
            raise
        return [_item({**r, **mem0_ids(scope)}) for r in (result or {}).get("results", [])]

    async def _known_hashes(self, tenant: str, scope: Scope) -> set[str]:
        key = (tenant, scope)
        if key not in self._known:
            result = await self._store.call("get_all", filters=self._filters(tenant, scope), top_k=1_000_000)
            self._known[key] = {
                r.get("hash") or hashlib.md5((r.get("memory") or "").encode("utf-8")).hexdigest()
                for r in (result or {}).get("results", [])
                # Broader scopes see narrower ones; only this exact scope's texts count.
                if _item(r).scope == scope
            }
        return self._known[key]

    async def _new_only(self, tenant: str, scope: Scope, messages: list[dict[str, str]]) -> list[dict[str, str]]:
        # AgentScope records the whole conversation every turn; stored verbatim, that would
        # duplicate each message once per turn. mem0 keeps an md5 of each memory's text.
        known = await self._known_hashes(tenant, scope)
        fresh: list[dict[str, str]] = []
        for message in messages:
            digest = hashlib.md5(message["content"].encode("utf-8")).hexdigest()
            if digest not in known:
                known.add(digest)
                fresh.append(message)
        return fresh

    def _matching(self, tenant: str, scope: Scope, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
        """mem0's filters for `scope` and metadata equality: mem0 filters its payload before
        its top-k cut. The scope's own keys come last, so a metadata key cannot widen them."""
        return {**(metadata or {}), **self._filters(tenant, scope)}

    async def search(self, tenant: str, scope: Scope, query: str, limit: int = DEFAULT_TOP_K, *,
                     touch: bool = True, metadata: Mapping[str, Any] | None = None) -> list[LongTermItem]:
        # mem0 keeps no access times: `touch` has nothing to mark.
        scope.validate()
        if not query.strip():
            return []
        result = await self._store.call(
            "search", query, filters=self._matching(tenant, scope, metadata), top_k=limit or DEFAULT_TOP_K
        )
        items = [_item(r) for r in (result or {}).get("results", [])]
        # Equality is `metadata_filter.py`'s, whatever rules mem0's vector store compares by.
        return [i for i in items if metadata_matches(i.metadata, metadata or {})]

    async def retrieve(
        self, tenant: str, scope: Scope, msg: Msg | None, limit: int = DEFAULT_TOP_K, *, touch: bool = True
    ) -> tuple[str, list[LongTermItem]]:
        return await retrieve_by_search(self, tenant, scope, msg, limit, touch=touch)

    async def list(self, tenant: str, scope: Scope, limit: int = 100, *,
                   metadata: Mapping[str, Any] | None = None, offset: int = 0) -> list[LongTermItem]:
        scope.validate()
        result = await self._store.call("get_all", filters=self._matching(tenant, scope, metadata),
                                        top_k=offset + limit)
        items = [_item(r) for r in (result or {}).get("results", [])]
        return [i for i in items if metadata_matches(i.metadata, metadata or {})][offset:]

    async def count(self, tenant: str, scope: Scope, *, metadata: Mapping[str, Any] | None = None) -> int:
        # mem0 counts nothing: what its get_all gives, up to _COUNT_LIMIT memories, is counted.
        return len(await self.list(tenant, scope, _COUNT_LIMIT, metadata=metadata))

    async def list_page(self, tenant: str, scope: Scope, limit: int, cursor: str = "") -> LongTermListPage:
        # mem0's get_all has no cursor: the cursor is an offset into its (stable) order, so a
        # page costs what listing up to its end costs.
        offset = int(cursor) if cursor.isdigit() else 0
        items = await self.list(tenant, scope, offset + limit + 1)
        page = items[offset:offset + limit]
        return LongTermListPage(page, [str(offset + i + 1) for i in range(len(page))], len(items) > offset + limit)

    async def _owned(self, tenant: str, memory_id: str) -> dict[str, Any]:
        check_id(memory_id, "id")
        try:
            raw = await self._store.call("get", memory_id)
        except (ValueError, KeyError):
            raw = None
        # Another tenant's memory is reported exactly like a missing one.
        if not raw or (raw.get("metadata") or {}).get(TENANT_KEY) != tenant:
            raise NotFoundError(f"long-term memory {memory_id!r} does not exist")
        return raw

    async def get(self, tenant: str, memory_id: str) -> LongTermItem:
        return _item(await self._owned(tenant, memory_id))

    async def update(
        self, tenant: str, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None
    ) -> LongTermItem:
        if text is None and metadata is None:
            raise InvalidArgumentError("text", "is required when no metadata is given")
        if text is not None and not text.strip():
            raise InvalidArgumentError("text", "must not be empty")
        if text is not None and len(text) > MAX_TEXT_CHARS:
            raise ResourceExhaustedError("text", f"has {len(text)} characters; at most {MAX_TEXT_CHARS}")
        if metadata and TENANT_KEY in metadata:
            raise InvalidArgumentError("metadata", f"{TENANT_KEY!r} is reserved")
        scope = _item(await self._owned(tenant, memory_id)).scope
        await self._store.call("update", memory_id, text=text, metadata=metadata)
        # The old text's hash no longer names a stored memory of that (exact) scope.
        self._known.pop((tenant, scope), None)
        return _item(await self._owned(tenant, memory_id))

    async def history_page(self, tenant: str, memory_id: str, limit: int, after: int = 0,
                           budget: int = DEFAULT_PAGE_BYTES) -> LongTermHistoryPage:
        # mem0's history has no cursor: the cursor is an offset into its (append-only) list, so
        # a page costs what reading the list costs. Its entries hold text only (no metadata).
        entries = await self.history(tenant, memory_id)
        page = entries[after:after + limit]
        kept = cut_to_budget(page, history_entry_size, budget)
        return LongTermHistoryPage(page[:kept], [after + i + 1 for i in range(kept)], len(entries) > after + kept)

    async def history(self, tenant: str, memory_id: str) -> builtins.list[HistoryEntry]:
        # A deleted memory keeps its history, but only its tenant may read it: ownership is
        # checked on the live memory, so history of a deleted one is NOT_FOUND (as get is).
        await self._owned(tenant, memory_id)
        rows = await self._store.call("history", memory_id)
        return [
            HistoryEntry(
                memory_id=str(r.get("memory_id") or memory_id),
                event=str(r.get("event") or ""),
                old_text=r.get("old_memory"),
                new_text=r.get("new_memory"),
                created_at=str(r.get("created_at") or ""),
                updated_at=str(r.get("updated_at") or ""),
            )
            for r in rows or []
        ]

    async def delete(self, tenant: str, memory_id: str) -> None:
        scope = _item(await self._owned(tenant, memory_id)).scope
        await self._store.call("delete", memory_id)
        # Only the memory's own scope knew its hash; other scopes keep their loaded hashes.
        self._known.pop((tenant, scope), None)

    async def delete_scope(self, tenant: str, scope: Scope) -> int:
        """Forget everything of a scope (within the tenant); returns how many were deleted."""
        scope.validate()
        deleted = 0
        while True:
            batch = await self.list(tenant, scope, limit=1000)
            if not batch:
                return deleted
            for item in batch:
                await self._store.call("delete", item.id)
                deleted += 1
            self._known.clear()
