"""`SharedPools`: versioned key -> JSON spaces several agents share, tenant-scoped, over the
store protocol (store/sql/pool.py). Writes are last-writer-wins, or compare-and-set with an
expected version; every write and delete is an event with the pool's next sequence number,
committed in the same transaction, so a watcher that resumes after N misses nothing."""

from __future__ import annotations

import asyncio
import builtins  # `list` is also a method name below
import heapq
import itertools
import json
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

from agentscope_memory.errors import InvalidArgumentError, NotFoundError, ResourceExhaustedError
from agentscope_memory.paging import PageTokens
from agentscope_memory.pool.model import (
    DELETE_EVENT,
    WRITE_EVENT,
    EntryPage,
    EventPage,
    PoolConflictError,
    PoolDelete,
    PoolEntry,
    PoolEvent,
    PoolWrite,
    RenderedPools,
)
from agentscope_memory.pool.render import render
from agentscope_memory.store.base import PoolEntryRow, PoolEventRow, Store, Tx
from agentscope_memory.validation.json_text import parse_json, parse_json_object

KiB = 1024
MiB = 1024 * KiB
# What a rendering reads of a pool at a time.
_BATCH_BYTES = 4 * MiB


@dataclass(frozen=True)
class PoolLimits:
    max_pool_id_bytes: int = 512
    max_key_bytes: int = 1024
    max_writer_bytes: int = 512
    max_content_bytes: int = 1 * MiB
    max_metadata_bytes: int = 64 * KiB
    default_page_size: int = 100
    max_page_size: int = 1000
    # A page stops before this many bytes of entries (gRPC's 4 MiB receive limit, with room).
    max_page_bytes: int = 4 * MiB - 64 * KiB
    max_render_pools: int = 16
    default_render_tokens: int = 2000
    max_render_tokens: int = 200_000
    # Entries a rendering reads at most (newest first), whatever the budget.
    max_render_entries: int = 10_000


def check_text(value: str, field: str, max_bytes: int, *, required: bool) -> str:
    """Any Unicode text within `max_bytes` of UTF-8, without control characters."""
    if required and not value.strip():
        raise InvalidArgumentError(field, "is required and must not be blank")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgumentError(field, "contains an unpaired surrogate (not valid Unicode text)") from None
    if size > max_bytes:
        raise InvalidArgumentError(field, f"is {size} bytes of UTF-8; at most {max_bytes}")
    for ch in value:
        if ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            raise InvalidArgumentError(field, f"contains the control character U+{ord(ch):04X}")
    return value


def _entry_bytes(row: PoolEntryRow) -> int:
    """About what the entry costs in a response: every text it carries (metadata too, up to
    64 KiB, which alone can make a page of small entries exceed 4 MiB), plus room for the rest."""
    texts = (row.content_json, row.key, row.pool_id, row.created_by, row.updated_by,
             json.dumps(row.metadata, ensure_ascii=False))
    return sum(len(t.encode("utf-8")) for t in texts) + 256


def _entry(row: PoolEntryRow) -> PoolEntry:
    return PoolEntry(row.pool_id, row.key, row.content_json, row.version, row.created_by, row.updated_by,
                     row.created_at, row.updated_at, dict(row.metadata))


def _event(row: PoolEventRow) -> PoolEvent:
    return PoolEvent(row.seq, row.event_type, row.pool_id, row.key, row.version, row.writer, row.created_at)


class SharedPools:
    def __init__(self, store: Store, tokens: PageTokens | None = None, *, limits: PoolLimits | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.tokens = tokens or PageTokens(store)
        self.limits = limits or PoolLimits()
        self._clock = clock
        # Watchers in this process, woken at once by this process's writes (others' are polled).
        self._changed: weakref.WeakValueDictionary[tuple[str, str], asyncio.Condition] = weakref.WeakValueDictionary()

    # -- validation ---------------------------------------------------------------------------

    def _pool(self, pool_id: str, field: str = "pool_id") -> str:
        return check_text(pool_id, field, self.limits.max_pool_id_bytes, required=True)

    def _key(self, key: str) -> str:
        return check_text(key, "key", self.limits.max_key_bytes, required=True)

    def _page_size(self, page_size: int) -> int:
        """0 means the default; a larger size than the maximum is served as the maximum (AIP-158)."""
        if page_size < 0:
            raise InvalidArgumentError("page_size", f"must not be negative, not {page_size}")
        return min(page_size or self.limits.default_page_size, self.limits.max_page_size)

    # -- entries ------------------------------------------------------------------------------

    async def write(self, tenant: str, pool_id: str, key: str, content_json: str, *, writer: str = "",
                    metadata_json: str = "", expected_version: int | None = None) -> PoolWrite:
        self._pool(pool_id)
        self._key(key)
        check_text(writer, "writer", self.limits.max_writer_bytes, required=False)
        size = len(content_json.encode("utf-8", "surrogatepass"))
        if size > self.limits.max_content_bytes:
            raise ResourceExhaustedError("content_json", f"is {size} bytes; at most {self.limits.max_content_bytes}")
        if not content_json.strip():
            raise InvalidArgumentError("content_json", "is required: one JSON document")
        parse_json(content_json, "content_json")
        if len(metadata_json.encode("utf-8", "surrogatepass")) > self.limits.max_metadata_bytes:
            raise ResourceExhaustedError("metadata_json", f"is larger than {self.limits.max_metadata_bytes} bytes")
        metadata = parse_json_object(metadata_json, "metadata_json")
        if expected_version is not None and expected_version < 0:
            raise InvalidArgumentError("expected_version", f"must not be negative, not {expected_version}")

        def write(tx: Tx) -> PoolWrite:
            now = self._clock()
            last = tx.pool_lock(pool_id, now)
            current = tx.pool_get(pool_id, key)
            actual = current.version if current is not None else 0
            if expected_version is not None and expected_version != actual:
                raise PoolConflictError(pool_id, key, expected_version, actual)
            merged = {**(current.metadata if current else {}), **metadata}
            # Only a merge can outgrow the request's metadata, which was measured as sent; and
            # compactly, as sent, since separators with spaces add two bytes a key (a 61 KB
            # object of 4,200 keys for a new entry was refused as a merge over 64 KiB).
            if (current is not None and current.metadata and len(json.dumps(
                    merged, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) > self.limits.max_metadata_bytes):
                raise ResourceExhaustedError("metadata_json", "the merged metadata would exceed "
                                             f"{self.limits.max_metadata_bytes} bytes")
            # A key deleted and written again goes on from its last version, never back to 1: a
            # writer that read the deleted entry must not compare-and-set over the new one (ABA).
            version = actual + 1 if current is not None else tx.pool_last_version(pool_id, key) + 1
            row = PoolEntryRow(pool_id, key, content_json, version, current.created_by if current else writer,
                               writer, current.created_at if current else now, now, merged)
            tx.pool_put(row)
            tx.pool_add_event(PoolEventRow(pool_id, last + 1, WRITE_EVENT, key, row.version, writer, now))
            return PoolWrite(_entry(row), last + 1)

        done = await self.store.run(tenant, write, small=True)
        await self._notify(tenant, pool_id)
        return done

    async def get(self, tenant: str, pool_id: str, key: str) -> PoolEntry:
        self._pool(pool_id)
        self._key(key)
        row = await self.store.run(tenant, lambda tx: tx.pool_get(pool_id, key), write=False, small=True)
        if row is None:
            raise NotFoundError(f"pool {pool_id!r} holds no key {key!r}")
        return _entry(row)

    async def delete(self, tenant: str, pool_id: str, key: str, *, writer: str = "",
                     expected_version: int | None = None) -> PoolDelete:
        self._pool(pool_id)
        self._key(key)
        check_text(writer, "writer", self.limits.max_writer_bytes, required=False)
        if expected_version is not None and expected_version < 1:
            raise InvalidArgumentError("expected_version", f"must be at least 1 to delete, not {expected_version}")

        def delete(tx: Tx) -> PoolDelete:
            now = self._clock()
            last = tx.pool_lock(pool_id, now)
            current = tx.pool_get(pool_id, key)
            if current is None:
                if expected_version is not None:
                    raise PoolConflictError(pool_id, key, expected_version, 0)
                raise NotFoundError(f"pool {pool_id!r} holds no key {key!r}")
            if expected_version is not None and expected_version != current.version:
                raise PoolConflictError(pool_id, key, expected_version, current.version)
            tx.pool_remove(pool_id, key)
            tx.pool_add_event(PoolEventRow(pool_id, last + 1, DELETE_EVENT, key, current.version, writer, now))
            return PoolDelete(current.version, last + 1)

        done = await self.store.run(tenant, delete, small=True)
        await self._notify(tenant, pool_id)
        return done

    async def list(self, tenant: str, pool_id: str, key_prefix: str = "", page_size: int = 0,
                   page_token: str = "") -> EntryPage:
        self._pool(pool_id)
        if key_prefix:
            check_text(key_prefix, "key_prefix", self.limits.max_key_bytes, required=False)
        size = self._page_size(page_size)
        await self.tokens.ready()
        binding: list[str | int] = [tenant, pool_id, key_prefix, page_size]
        after = self.tokens.read_with_text(page_token, "pool_entries", binding, 0)[1] if page_token else None
        rows = await self.store.run(tenant, lambda tx: tx.pool_list(pool_id, key_prefix, after, size + 1), write=False)
        kept: builtins.list[PoolEntryRow] = []
        used = 0
        for row in rows[:size]:
            cost = _entry_bytes(row)
            if kept and used + cost > self.limits.max_page_bytes:
                break
            kept.append(row)
            used += cost
        more = len(kept) < len(rows)
        token = self.tokens.issue("pool_entries", binding, [], kept[-1].key) if more and kept else ""
        return EntryPage([_entry(r) for r in kept], token)

    # -- events -------------------------------------------------------------------------------

    async def events(self, tenant: str, pool_id: str, after_sequence: int = 0, page_size: int = 0,
                     page_token: str = "") -> EventPage:
        self._pool(pool_id)
        if after_sequence < 0:
            raise InvalidArgumentError("after_sequence", f"must not be negative, not {after_sequence}")
        size = self._page_size(page_size)
        await self.tokens.ready()
        binding: list[str | int] = [tenant, pool_id, after_sequence, page_size]
        after = self.tokens.read(page_token, "pool_events", binding, 1)[0] if page_token else after_sequence
        rows = await self.store.run(tenant, lambda tx: tx.pool_events(pool_id, after, size + 1), write=False)
        more = len(rows) > size
        rows = rows[:size]
        token = self.tokens.issue("pool_events", binding, [rows[-1].seq]) if more else ""
        return EventPage([_event(r) for r in rows], token)

    async def watch(self, tenant: str, pool_id: str, after_sequence: int = 0) -> AsyncIterator[PoolEvent]:
        """Events after `after_sequence`, then each new one: at once for this process's
        writes, within a second for another replica's."""
        self._pool(pool_id)
        if after_sequence < 0:
            raise InvalidArgumentError("after_sequence", f"must not be negative, not {after_sequence}")
        last = after_sequence
        condition = self._changed.get((tenant, pool_id))
        if condition is None:
            condition = self._changed[(tenant, pool_id)] = asyncio.Condition()
        while True:
            while True:
                rows = await self.store.run(tenant, self._events_after(pool_id, last), write=False)
                for row in rows:
                    last = row.seq
                    yield _event(row)
                if len(rows) < 500:
                    break
            async with condition:
                try:
                    await asyncio.wait_for(condition.wait(), 1.0)
                except asyncio.TimeoutError:
                    pass

    @staticmethod
    def _events_after(pool_id: str, after: int) -> Callable[[Tx], builtins.list[PoolEventRow]]:
        return lambda tx: tx.pool_events(pool_id, after, 500)

    async def _notify(self, tenant: str, pool_id: str) -> None:
        condition = self._changed.get((tenant, pool_id))
        if condition is not None:
            async with condition:
                condition.notify_all()

    # -- context ------------------------------------------------------------------------------

    async def render(self, tenant: str, pool_ids: Sequence[str], max_tokens: int = 0, *,
                     as_messages: bool = False) -> RenderedPools:
        """The pools' entries, newest `updated_at` first across pools, within `max_tokens` and
        a response's byte budget for the form the caller sends (`as_messages`: the messages)."""
        if not pool_ids:
            raise InvalidArgumentError("pool_ids", "name at least one pool")
        if len(pool_ids) > self.limits.max_render_pools:
            raise InvalidArgumentError("pool_ids", f"name at most {self.limits.max_render_pools} pools, not {len(pool_ids)}")
        for i, pool_id in enumerate(pool_ids):
            self._pool(pool_id, f"pool_ids[{i}]")
        if max_tokens < 0 or max_tokens > self.limits.max_render_tokens:
            raise InvalidArgumentError("max_tokens", f"must be between 0 and {self.limits.max_render_tokens}, not {max_tokens}")
        budget = max_tokens or self.limits.default_render_tokens
        pools = list(dict.fromkeys(pool_ids))
        cap = self.limits.max_render_entries

        def read(tx: Tx) -> RenderedPools:
            # Rendered as it is read, in one transaction: the entries are merged newest first
            # from each pool's batches, so only a few batches are held at once, not every entry
            # up to the cap (10,000 entries of 1 MiB each made one call hold 10 GB).
            merged = heapq.merge(*(_newest(tx, pool_id) for pool_id in pools),
                                 key=lambda r: (-r.updated_at, r.pool_id, r.key))
            return render((_entry(r) for r in itertools.islice(merged, cap)), budget, self.limits.max_page_bytes,
                          as_messages=as_messages)

        rendered: RenderedPools = await self.store.run(tenant, read, write=False)
        return rendered


def _newest(tx: Tx, pool_id: str) -> Iterator[PoolEntryRow]:
    """A pool's entries newest first, read in batches of about `_BATCH_BYTES`."""
    before: tuple[float, str] | None = None
    size = 8
    while True:
        rows = tx.pool_newest(pool_id, before, size)
        yield from rows
        if len(rows) < size:
            return
        before = (rows[-1].updated_at, rows[-1].key)
        average = sum(len(r.content_json) for r in rows) // len(rows) + 1
        size = max(1, min(100, _BATCH_BYTES // average))
