"""The short-term memory operations every client uses, over any store and any memory kind.

A `MemoryManager` validates input, enforces limits, makes retried appends idempotent and runs
each operation as one store transaction. What an operation means for a kind of memory (which
lists it touches) is the kind's `MemoryKindHandler`.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Protocol, Sequence

from agentscope_memory.errors import (
    AbortedError,
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnimplementedError,
)
from agentscope_memory.validation.ids import check_id, check_label_key, check_label_value, check_request_id
from agentscope_memory.validation.messages import check_msg
from agentscope_memory.message import Msg
from agentscope_memory.paging import ListState, PageTokens, Snapshot, cut_to_budget, read_within_budget
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES
from agentscope_memory.store.codec import decode_msg, encode_msg, stored_bytes
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.marks import check_mark, check_message_id, check_selection, marks_of, remark_message
from agentscope_memory.short_term.coherence import WatchState, Written, writes_of
from agentscope_memory.store.base import MemoryRecord, RequestRecord, Row, Store, Tx

__all__ = [
    "AddResult",
    "Limits",
    "MemoryKindHandler",
    "MemoryManager",
    "MemoryPage",
    "MessagePage",
    "NewMessage",
]

DEFAULT_TENANT = "default"
# The memory's version at its last in-place change of stored messages (a mark edit): a client's
# copy from before it is not a prefix of the list any more, so no delta is sent against it.
EDITED_VERSION_KEY = "messages.edited_version"
# Transactions below this many bytes run without a thread hop (see Store.run).
SMALL_TRANSACTION_BYTES = 256 * 1024
SMALL_PAGE = 1000


@dataclass(frozen=True)
class NewMessage:
    """A message being added: the parsed message and the form the store keeps."""

    msg: Msg
    data: bytes
    # The caller's importance (TIERED memories); None: the memory scores or defaults it.
    importance: float | None = None
    # Who gave `importance` ("" for the caller; "llm" when the service scored it first).
    importance_method: str = ""


class MemoryKindHandler(Protocol):
    """What a kind of memory does for the plain `Memory` operations, inside a transaction."""

    kind: str
    state_keys: list[tuple[str, bool]]

    def validate_config(self, config_json: str) -> str: ...
    def add(self, tx: Tx, record: MemoryRecord, new: list[NewMessage]) -> None: ...
    def read(self, tx: Tx, record: MemoryRecord, after_seq: int, limit: int | None) -> list[Row]: ...
    def count(self, tx: Tx, record: MemoryRecord) -> int: ...
    def next_seq(self, tx: Tx, record: MemoryRecord) -> int | None:
        """The seq `read` will give the next added message (Tx.next_seq of the list it reads):
        `read(after_seq=next_seq - 1)` then returns exactly the messages added since, and a
        read may send just those (a delta) when nothing was removed in between. None when the
        kind's reads are not such a list (no deltas)."""
        ...
    def delete_at(self, tx: Tx, record: MemoryRecord, index: int) -> bool: ...
    def clear(self, tx: Tx, record: MemoryRecord) -> None: ...
    # The list whose items are the memory's messages and nothing else, so that messages may be
    # deleted or changed by id (DeleteMessages, UpdateMessageMarks); None: not for this kind.
    editable_list: str | None
    # State in AgentScope session terms (StateService, JsonSession).
    def export_state(self, tx: Tx, record: MemoryRecord) -> list[StateEntry]: ...
    def parse_state(self, entries: list[StateEntry], encode: Callable[[Msg, str], NewMessage]) -> Any: ...
    def apply_state(self, tx: Tx, record: MemoryRecord, parsed: Any) -> None: ...


@dataclass(frozen=True)
class Limits:
    """Input limits; exceeding one is RESOURCE_EXHAUSTED naming the field."""

    # At most the page budget, so a message of the largest size still travels in one page.
    max_message_bytes: int = DEFAULT_PAGE_BYTES
    max_batch_messages: int = 1000
    max_batch_bytes: int = 32 * 1024 * 1024
    default_page_size: int = 1000
    max_page_size: int = 10_000
    max_page_bytes: int = DEFAULT_PAGE_BYTES
    max_labels: int = 64
    # A whole state loaded through StreamLoadState (it is held in memory while it loads).
    max_state_bytes: int = 1024 * 1024 * 1024


@dataclass(frozen=True)
class AddResult:
    message_count: int
    version: int
    replayed: bool
    # The messages' etag after the call and just before it ("" on a replay): equal
    # `previous_etag` and a client's cached etag mean the call was the only change since.
    etag: str = ""
    previous_etag: str = ""


@dataclass(frozen=True)
class DeleteResult:
    deleted: bool
    message_count: int
    # As `AddResult`'s: the messages' etags after and just before the call, taken in its
    # transaction, so a client whose copy `previous_etag` names applies the delete without a read.
    etag: str = ""
    previous_etag: str = ""


@dataclass(frozen=True)
class DeleteManyResult:
    """DeleteMessages: what was deleted, and the etags as `DeleteResult`'s."""

    deleted_ids: list[str]
    message_count: int
    etag: str
    previous_etag: str


@dataclass(frozen=True)
class MarksResult:
    """UpdateMessageMarks: AgentScope's count, the messages changed, and the etags."""

    updated_count: int
    changed_count: int
    message_count: int
    etag: str
    previous_etag: str


@dataclass(frozen=True)
class WriteResult:
    """A clear or a state load: the memory's version and the messages' etags after and just
    before it (taken in its transaction). The caller knows what the messages are after it (none,
    or what it loaded), so it may keep them as its copy named `etag` without reading them."""

    version: int
    etag: str
    previous_etag: str


@dataclass(frozen=True)
class MessagePage:
    """A page of messages in their stored form (serialized `Msg` protos)."""

    stored: list[bytes]
    next_page_token: str
    total_size: int
    etag: str = ""
    # True when the caller's `if_none_match` is still current; `stored` is then empty.
    not_modified: bool = False
    # True when `stored` holds only the messages added after the state `if_none_match` named,
    # which is a prefix of the current messages (the caller asked with `accept_delta`).
    delta: bool = False

    @property
    def messages(self) -> list[Msg]:
        return [decode_msg(d) for d in self.stored]


@dataclass(frozen=True)
class MemoryInfo:
    record: MemoryRecord
    message_count: int


@dataclass(frozen=True)
class MemoryPage:
    memories: list[MemoryInfo]
    next_page_token: str


# What runs after an add commits: (tenant, memory_id, answer_by), see `MemoryManager.on_added`.
AfterAdd = Callable[[str, str, float | None], Awaitable[None]]


class MemoryManager:
    def __init__(
        self,
        store: Store,
        handlers: Sequence[MemoryKindHandler],
        limits: Limits | None = None,
        tokens: PageTokens | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or Limits()
        # Every page token and etag of the short-term memories (AutoContext's too).
        self.tokens = tokens or PageTokens(store)
        self._handlers = {h.kind: h for h in handlers}
        # Per kind, what runs after an add commits (a TIERED memory's promotions and summaries).
        self._after_add: dict[str, AfterAdd] = {}
        # What runs after a memory's deletion commits (per-memory gauges leave with it).
        self._after_delete: list[Callable[[str, str], None]] = []

    def on_added(self, kind: str, callback: AfterAdd) -> None:
        """Run `callback(tenant, memory_id, answer_by)` after every committed add to a memory of
        `kind`; `answer_by` is the `time.monotonic()` instant the add's caller stops waiting (None:
        no deadline), which the callback must answer before."""
        self._after_add[kind] = callback

    def on_deleted(self, callback: Callable[[str, str], None]) -> None:
        """Run `callback(tenant, memory_id)` after every committed deletion of a memory."""
        self._after_delete.append(callback)

    def deleted(self, tenant: str, memory_id: str) -> None:
        """Tell the `on_deleted` callbacks that `memory_id` was deleted (by any path)."""
        for callback in self._after_delete:
            callback(tenant, memory_id)

    def handler(self, kind: str) -> MemoryKindHandler:
        handler = self._handlers.get(kind)
        if handler is None:
            raise UnimplementedError(f"memories of kind {kind} are not available on this server")
        return handler

    @staticmethod
    def _require(tx: Tx, memory_id: str) -> MemoryRecord:
        record = tx.get_memory(memory_id)
        if record is None:
            raise NotFoundError(f"memory {memory_id!r} does not exist")
        return record

    # -- memories ---------------------------------------------------------------------------

    async def create_memory(
        self,
        tenant: str,
        memory_id: str,
        kind: str,
        config_json: str = "{}",
        labels: dict[str, str] | None = None,
        allow_existing: bool = False,
    ) -> tuple[MemoryInfo, bool]:
        check_id(memory_id, "memory_id")
        handler = self.handler(kind)
        config = handler.validate_config(config_json or "{}")
        labels = dict(labels or {})
        self._check_labels(labels)
        now = time.time()

        def create(tx: Tx) -> tuple[MemoryInfo, bool]:
            existing = tx.get_memory(memory_id)
            if existing is None:
                record = MemoryRecord(memory_id, kind, config, labels, now, now, 1)
                try:
                    tx.insert_memory(record)
                    return MemoryInfo(record, 0), True
                except AlreadyExistsError:
                    # Created by a concurrent transaction since the read (PostgreSQL: another
                    # replica or connection); it is an existing memory like any other.
                    existing = tx.get_memory(memory_id)
                    if existing is None:
                        raise
            if allow_existing and existing.kind == kind:
                return MemoryInfo(existing, handler.count(tx, existing)), False
            raise AlreadyExistsError(
                f"memory {memory_id!r} already exists (kind {existing.kind})"
            )

        # One row: on the event loop, unless its configuration is large (custom prompts).
        size = len(config_json or "") + sum(len(k) + len(v) for k, v in labels.items())
        return await self.store.run(tenant, create, small=size < SMALL_TRANSACTION_BYTES)

    def _check_labels(self, labels: dict[str, str]) -> None:
        if len(labels) > self.limits.max_labels:
            raise InvalidArgumentError("labels", f"has {len(labels)} entries; at most {self.limits.max_labels}")
        for key, value in labels.items():
            check_label_key(key)
            check_label_value(key, value)

    async def get_memory(self, tenant: str, memory_id: str) -> MemoryInfo:
        check_id(memory_id, "memory_id")

        def get(tx: Tx) -> MemoryInfo:
            record = self._require(tx, memory_id)
            return MemoryInfo(record, self.handler(record.kind).count(tx, record))

        return await self.store.run(tenant, get, write=False, small=True)

    def message_etag(self, tenant: str, record: MemoryRecord, count: int, next_seq: int | None) -> str:
        """Names one state of a memory's messages (every change bumps the version; the creation
        time tells apart a memory deleted and created again), with the count and the list's next
        seq that tell a later read whether only additions happened since. Signed: see
        `PageTokens`."""
        return self.tokens.etag(tenant, record.memory_id, ListState.of(record, count, next_seq))

    def _etag_now(self, tx: Tx, tenant: str, record: MemoryRecord, handler: MemoryKindHandler) -> str:
        return self.message_etag(tenant, record, handler.count(tx, record), handler.next_seq(tx, record))

    def _etag_after(self, tx: Tx, tenant: str, record: MemoryRecord, handler: MemoryKindHandler,
                    version: int) -> str:
        """The etag after a change this transaction made (`record` was read before it, so it
        has the old version): the one a read right after the commit would give."""
        state = ListState.of(record, handler.count(tx, record), handler.next_seq(tx, record), version=version)
        return self.tokens.etag(tenant, record.memory_id, state)

    async def list_memories(self, tenant: str, page_size: int = 0, page_token: str = "") -> MemoryPage:
        await self.tokens.ready()
        binding: list[str | int] = [tenant, page_size]
        after = self.tokens.read_with_text(page_token, "memories", binding, 0)[1] if page_token else ""
        size = self._page_size(page_size, default=100, maximum=1000)

        def list_(tx: Tx) -> MemoryPage:
            records = tx.list_memories(after, size + 1)
            more = len(records) > size
            records = records[:size]
            infos = [MemoryInfo(r, self.handler(r.kind).count(tx, r)) for r in records]
            token = self.tokens.issue("memories", binding, [], records[-1].memory_id) if more else ""
            return MemoryPage(infos, token)

        return await self.store.run(tenant, list_, write=False)

    async def delete_memory(self, tenant: str, memory_id: str) -> None:
        check_id(memory_id, "memory_id")

        def delete(tx: Tx) -> None:
            self._require(tx, memory_id)
            tx.delete_memory(memory_id)

        await self.store.run(tenant, delete)
        self.deleted(tenant, memory_id)

    # -- messages ---------------------------------------------------------------------------

    def _encode_batch(self, msgs: Sequence[Msg]) -> list[NewMessage]:
        if not msgs:
            raise InvalidArgumentError("messages", "must contain at least one message")
        if len(msgs) > self.limits.max_batch_messages:
            raise ResourceExhaustedError(
                "messages",
                f"has {len(msgs)} messages; at most {self.limits.max_batch_messages} per call",
            )
        encoded: list[NewMessage] = []
        total = 0
        for i, msg in enumerate(msgs):
            item = self._encode_one(msg, f"messages[{i}]")
            total += len(item.data)
            encoded.append(item)
        if total > self.limits.max_batch_bytes:
            raise ResourceExhaustedError(
                "messages", f"is {total} bytes; at most {self.limits.max_batch_bytes} per call"
            )
        return encoded

    async def add_messages(
        self, tenant: str, memory_id: str, msgs: Sequence[Msg], request_id: str | None = None,
        after_add: Callable[[Tx, MemoryRecord, int], None] | None = None, fingerprint_extra: str = "",
        importances: Sequence[float | None] | None = None, importance_methods: Sequence[str] | None = None,
        watch_id: str = "", time_left_s: float | None = None,
    ) -> AddResult:
        """Append `msgs`. `after_add(tx, record, count)` runs in the same transaction after the
        messages are stored (not on a replay): parent/child scopes mark their visibility, which
        `fingerprint_extra` adds to what a retried `request_id` must repeat. `importances`, one
        per message (None: not given), are for kinds that weigh messages (TIERED). `watch_id`: the
        writer's own watch (coherent caching), which learns of this add from the result.
        `time_left_s`: how long the caller still waits for the answer (None: no deadline); what
        runs after the add (a TIERED pass) is bounded by it."""
        answer_by = None if time_left_s is None else time.monotonic() + time_left_s
        check_id(memory_id, "memory_id")
        request_id = check_request_id(request_id or "")
        encoded = self._encode_batch(msgs)
        if importances is not None:
            encoded = self._with_importances(encoded, importances, importance_methods)
            # Only the caller's own values: ones the service scored may differ on a retry.
            fingerprint_extra += "|importance:" + ",".join(
                "" if v is None or (importance_methods and importance_methods[k]) else repr(v)
                for k, v in enumerate(importances))
        digest = hashlib.sha256()
        for item in encoded:
            digest.update(len(item.data).to_bytes(8, "big"))
            digest.update(item.data)
        if fingerprint_extra:
            digest.update(fingerprint_extra.encode("utf-8"))
        fingerprint = digest.hexdigest()
        small = sum(len(item.data) for item in encoded) < SMALL_TRANSACTION_BYTES
        await self.tokens.ready()

        kinds: list[str] = []

        def add(tx: Tx) -> AddResult:
            record = self._require(tx, memory_id)
            kinds.append(record.kind)
            if request_id is not None:
                seen = tx.request_get(memory_id, request_id)
                if seen is not None:
                    if seen.fingerprint != fingerprint:
                        raise InvalidArgumentError(
                            "request_id", "was already used for different messages on this memory"
                        )
                    first = json.loads(seen.result_json)
                    return AddResult(first["message_count"], first["version"], replayed=True)
            handler = self.handler(record.kind)
            previous_etag = self._etag_now(tx, tenant, record, handler)
            handler.add(tx, record, encoded)
            if after_add is not None:
                after_add(tx, record, len(encoded))
            version = tx.touch_memory(memory_id)
            count = handler.count(tx, record)
            state = ListState.of(record, count, handler.next_seq(tx, record), version=version)
            etag = self.tokens.etag(tenant, memory_id, state)
            written[memory_id] = Written(previous_etag, etag, state)
            result = AddResult(count, version, replayed=False, etag=etag, previous_etag=previous_etag)
            if request_id is not None:
                tx.request_put(
                    memory_id,
                    request_id,
                    RequestRecord(
                        fingerprint,
                        # Two integers: formatted directly (json.dumps costs more than the rest of this line).
                        f'{{"message_count": {int(result.message_count)}, "version": {int(version)}}}',
                    ),
                )
            return result

        with writes_of(watch_id) as written:
            result = await self.store.run(tenant, add, small=small)
        callback = self._after_add.get(kinds[-1]) if kinds else None
        if callback is not None and not result.replayed:
            await callback(tenant, memory_id, answer_by)
        return result

    @staticmethod
    def _with_importances(encoded: list[NewMessage], importances: Sequence[float | None],
                          methods: Sequence[str] | None = None) -> list[NewMessage]:
        if len(importances) != len(encoded):
            raise InvalidArgumentError("importances", f"has {len(importances)} values for {len(encoded)} messages")
        out = []
        for i, (item, value) in enumerate(zip(encoded, importances, strict=True)):
            if value is not None and not (isinstance(value, (int, float)) and 0.0 <= value <= 1.0):
                raise InvalidArgumentError(f"importances[{i}]", f"is {value!r}; must be a number from 0 to 1")
            out.append(replace(item, importance=None if value is None else float(value),
                               importance_method=methods[i] if methods is not None and value is not None else ""))
        return out

    async def get_messages(self, tenant: str, memory_id: str) -> list[Msg]:
        """Every message in order (Java `getMessages()`), read in one consistent snapshot."""
        check_id(memory_id, "memory_id")

        def read(tx: Tx) -> list[Row]:
            record = self._require(tx, memory_id)
            return self.handler(record.kind).read(tx, record, 0, None)

        rows = await self.store.run(tenant, read, write=False)
        return [decode_msg(r.data) for r in rows]

    def _page_size(self, requested: int, *, default: int, maximum: int) -> int:
        if requested < 0:
            raise InvalidArgumentError("page_size", "must not be negative")
        return min(requested or default, maximum)

    async def get_messages_page(
        self, tenant: str, memory_id: str, page_size: int = 0, page_token: str = "", if_none_match: str = "",
        accept_delta: bool = False, budget: tuple[Callable[[bytes], int], int] | None = None,
    ) -> MessagePage:
        """A page of messages. With `if_none_match` (the etag of an earlier first page) and no
        change since, only `not_modified` and the etag come back: a client's cache is current.
        With `accept_delta` too, and messages only added since (nothing removed, rewritten or
        compressed), just the added ones come back marked `delta`, when they fit one page.
        Every page after the first reads the state the first page read, or fails ABORTED.
        `budget` (a stored message's cost, and the page's bytes) is for a surface whose answers
        carry messages in another form than the stored one (MCP's JSON); by default a page holds
        `max_page_bytes` of stored messages."""
        check_id(memory_id, "memory_id")
        row_cost: Callable[[Row], int] = lambda r: len(r.data)  # noqa: E731
        max_bytes = self.limits.max_page_bytes
        if budget is not None:
            cost, max_bytes = budget
            row_cost = lambda r: cost(stored_bytes(r.data))  # noqa: E731
        if if_none_match and page_token:
            raise InvalidArgumentError("if_none_match", "applies to the first page only; leave it empty with page_token")
        await self.tokens.ready()
        binding: list[str | int] = [tenant, memory_id, page_size]
        after, snapshot = 0, None
        if page_token:
            created_us, version, after = self.tokens.read(page_token, "messages", binding, 3)
            snapshot = Snapshot(created_us, version)
        size = self._page_size(
            page_size, default=self.limits.default_page_size, maximum=self.limits.max_page_size
        )
        cached = self.tokens.read_etag(tenant, memory_id, if_none_match) if accept_delta else None

        def fetch(tx: Tx, handler: MemoryKindHandler, record: MemoryRecord, start: int) -> list[Row]:
            return read_within_budget(lambda a, n: handler.read(tx, record, a, n), lambda r: r.seq,
                                      row_cost, start, size + 1, max_bytes)

        def read(tx: Tx) -> tuple[MessagePage | None, list[Row], MemoryRecord, int, str]:
            record = self._require(tx, memory_id)
            if snapshot is not None:
                self.tokens.check_snapshot(memory_id, snapshot, record)
            handler = self.handler(record.kind)
            total = handler.count(tx, record)
            etag = self._etag_now(tx, tenant, record, handler)
            if if_none_match and if_none_match == etag:
                return MessagePage([], "", total, etag, not_modified=True), [], record, total, etag
            if cached is not None and cached.version >= self._edited_version(tx, memory_id):
                added = self._delta(cached, record, total, handler.next_seq(tx, record),
                                    lambda start: fetch(tx, handler, record, start), size)
                if added is not None:
                    page = MessagePage([stored_bytes(r.data) for r in added], "", total, etag, delta=True)
                    return page, [], record, total, etag
            return None, fetch(tx, handler, record, after), record, total, etag

        page, rows, record, total, etag = await self.store.run(tenant, read, write=False, small=size <= SMALL_PAGE)
        if page is not None:
            return page
        more = len(rows) > size
        rows = rows[:size]
        # Cut the page at the byte budget so no response outgrows a client's receive limit.
        kept = cut_to_budget(rows, row_cost, max_bytes)
        more = more or kept < len(rows)
        rows = rows[:kept]
        token = ""
        if more and rows:
            now = Snapshot.of(record)
            token = self.tokens.issue("messages", binding, [now.created_us, now.version, rows[-1].seq])
        return MessagePage([stored_bytes(r.data) for r in rows], token, total, etag)

    async def watch_state(self, tenant: str, memory_id: str, since: ListState | None, max_messages: int) -> WatchState:
        """The memory's messages as a coherence announcement names them: their etag and, when
        only messages were added since `since` (at most `max_messages`), those messages."""

        def read(tx: Tx) -> WatchState:
            record = tx.get_memory(memory_id)
            if record is None:
                return WatchState(False, "", None)
            handler = self.handler(record.kind)
            total, next_seq = handler.count(tx, record), handler.next_seq(tx, record)
            state = ListState.of(record, total, next_seq)
            etag = self.tokens.etag(tenant, memory_id, state)
            if since is not None and max_messages > 0 and since.version >= self._edited_version(tx, memory_id):
                added = self._delta(since, record, total, next_seq,
                                    lambda start: handler.read(tx, record, start, max_messages + 1), max_messages)
                if added is not None:
                    return WatchState(True, etag, state, True, [stored_bytes(r.data) for r in added])
            return WatchState(True, etag, state)

        await self.tokens.ready()
        return await self.store.run(tenant, read, write=False, small=True)

    def _delta(self, cached: ListState, record: MemoryRecord, total: int, next_seq: int | None,
               fetch: Callable[[int], list[Row]], size: int) -> list[Row] | None:
        """The messages added since `cached` when the cached messages are a prefix of the current
        ones and the added ones fit one page, else None (the caller sends the whole list).

        Seqs only grow and items are never changed in place, so the cached messages are exactly
        the items with a seq below `cached.next_seq` that existed then, and the added ones the
        items from `cached.next_seq` on. Items present now = cached count - removed old ones +
        added ones: the counts agree exactly when no cached message was removed, whatever removed
        it (delete, clear, compression, state load), so no write path has to declare itself."""
        now = Snapshot.of(record)
        if (cached.next_seq == 0 or next_seq is None or now.created_us != cached.created_us
                or cached.version > now.version or cached.count > total or cached.next_seq > next_seq):
            return None
        rows = fetch(cached.next_seq - 1)
        if cached.count + len(rows) != total or len(rows) > size:
            return None
        # One page: a larger delta goes as the whole list, paged as usual.
        if cut_to_budget(rows, lambda r: len(r.data), self.limits.max_page_bytes) < len(rows):
            return None
        return rows

    async def delete_message(self, tenant: str, memory_id: str, index: int,
                             expected_id: str | None = None) -> DeleteResult:
        """Delete the message at `index` (GetMessages order); past the end, nothing. With
        `expected_id`, only if the message there has that id, else ABORTED: the list changed
        since the caller read it (AgentScope's index names a message of the list it read)."""
        check_id(memory_id, "memory_id")
        if index < 0:
            raise InvalidArgumentError("index", f"is {index}; must not be negative")
        await self.tokens.ready()

        def delete(tx: Tx) -> DeleteResult:
            record = self._require(tx, memory_id)
            handler = self.handler(record.kind)
            if expected_id is not None:
                self._check_message_at(tx, record, handler, index, expected_id)
            previous_etag = self._etag_now(tx, tenant, record, handler)
            deleted = handler.delete_at(tx, record, index)
            if not deleted:
                return DeleteResult(False, handler.count(tx, record), previous_etag, previous_etag)
            etag = self._etag_after(tx, tenant, record, handler, tx.touch_memory(memory_id))
            return DeleteResult(True, handler.count(tx, record), etag, previous_etag)

        return await self.store.run(tenant, delete, small=True)

    @staticmethod
    def _check_message_at(tx: Tx, record: MemoryRecord, handler: MemoryKindHandler, index: int,
                          expected_id: str) -> None:
        rows = handler.read(tx, record, 0, index + 1)
        if len(rows) <= index:
            found = f"index {index} is past the end ({len(rows)} messages)"
        else:
            actual = decode_msg(rows[index].data).id
            if actual == expected_id:
                return
            found = f"the message at index {index} has id {actual!r}, not {expected_id!r}"
        raise AbortedError(f"memory {record.memory_id!r} changed since it was read: {found};"
                           " nothing was deleted; read the messages again")

    async def clear_messages(self, tenant: str, memory_id: str) -> WriteResult:
        check_id(memory_id, "memory_id")
        await self.tokens.ready()

        def clear(tx: Tx) -> WriteResult:
            record = self._require(tx, memory_id)
            handler = self.handler(record.kind)
            previous_etag = self._etag_now(tx, tenant, record, handler)
            handler.clear(tx, record)
            version = tx.touch_memory(memory_id)
            return WriteResult(version, self._etag_after(tx, tenant, record, handler, version), previous_etag)

        return await self.store.run(tenant, clear)

    @staticmethod
    def _edited_version(tx: Tx, memory_id: str) -> int:
        return int(tx.kv_get(memory_id, EDITED_VERSION_KEY) or 0)

    def _editable(self, tx: Tx, memory_id: str) -> tuple[MemoryRecord, MemoryKindHandler, str]:
        record = self._require(tx, memory_id)
        handler = self.handler(record.kind)
        if handler.editable_list is None:
            raise FailedPreconditionError(
                f"memory {memory_id!r} is a {record.kind} memory; messages are deleted and marked by id"
                " in IN_MEMORY memories only")
        return record, handler, handler.editable_list

    @staticmethod
    def _missing(rows: list[Row], wanted: list[str], field: str) -> None:
        """NOT_FOUND naming the first of `wanted` (ids) that no row's message has."""
        present = {decode_msg(r.data).id for r in rows}
        for i, message_id in enumerate(wanted):
            if message_id not in present:
                raise NotFoundError(f"{field}[{i}]: no message has id {message_id!r}; nothing was changed"
                                    " (set allow_missing to skip unknown ids)")

    async def delete_messages(self, tenant: str, memory_id: str, message_ids: Sequence[str] = (),
                              marks: Sequence[str] = (), allow_missing: bool = False) -> DeleteManyResult:
        """Delete every message whose id is in `message_ids`, or (exclusively) that carries one of
        `marks` (AgentScope-Python `delete` / `delete_by_mark`), in one transaction. Unknown ids
        fail NOT_FOUND, deleting nothing, unless `allow_missing`."""
        check_id(memory_id, "memory_id")
        ids, wanted_marks = list(message_ids), list(marks)
        if ids and wanted_marks:
            raise InvalidArgumentError("marks", "must be empty when message_ids is given (one selection per call)")
        if wanted_marks:
            check_selection(wanted_marks, "marks", check_mark)
        else:
            check_selection(ids, "message_ids", check_message_id)
        await self.tokens.ready()
        id_set, mark_set = set(ids), set(wanted_marks)

        def delete(tx: Tx) -> DeleteManyResult:
            record, handler, list_name = self._editable(tx, memory_id)
            previous_etag = self._etag_now(tx, tenant, record, handler)
            rows = tx.read(memory_id, list_name)
            if ids and not allow_missing:
                self._missing(rows, ids, "message_ids")
            doomed: list[tuple[int, str]] = []
            for row in rows:
                msg = decode_msg(row.data)
                if (msg.id in id_set) if ids else bool(mark_set.intersection(marks_of(msg))):
                    doomed.append((row.seq, msg.id or ""))
            if not doomed:
                return DeleteManyResult([], handler.count(tx, record), previous_etag, previous_etag)
            tx.delete_seqs(memory_id, list_name, [seq for seq, _ in doomed])
            etag = self._etag_after(tx, tenant, record, handler, tx.touch_memory(memory_id))
            return DeleteManyResult([i for _, i in doomed], handler.count(tx, record), etag, previous_etag)

        return await self.store.run(tenant, delete)

    async def update_message_marks(self, tenant: str, memory_id: str, message_ids: Sequence[str] | None,
                                   new_mark: str | None, old_mark: str | None = None,
                                   allow_missing: bool = False) -> MarksResult:
        """AgentScope-Python `update_messages_mark(new_mark, old_mark, msg_ids)` on the stored
        messages (`message_ids` None: every message), in one transaction; only the changed
        messages are rewritten, in place. Unknown ids fail NOT_FOUND unless `allow_missing`."""
        check_id(memory_id, "memory_id")
        ids = None if message_ids is None else check_selection(list(message_ids), "message_ids", check_message_id)
        if new_mark is None and old_mark is None:
            raise InvalidArgumentError("new_mark", "or old_mark is required (nothing to add or remove)")
        if new_mark is not None:
            check_mark(new_mark, "new_mark")
        if old_mark is not None:
            check_mark(old_mark, "old_mark")
        await self.tokens.ready()
        id_set = None if ids is None else set(ids)

        def update(tx: Tx) -> MarksResult:
            record, handler, list_name = self._editable(tx, memory_id)
            previous_etag = self._etag_now(tx, tenant, record, handler)
            rows = tx.read(memory_id, list_name)
            if ids is not None and not allow_missing:
                self._missing(rows, ids, "message_ids")
            counted, changed = 0, []
            for row in rows:
                msg = decode_msg(row.data)
                remarked, count = remark_message(msg, id_set, new_mark, old_mark)
                counted += count
                if remarked is not None:
                    item = self._encode_one(remarked, f"new_mark (on message {msg.id!r})")
                    changed.append((row.seq, item.data))
            if not changed:
                return MarksResult(counted, 0, handler.count(tx, record), previous_etag, previous_etag)
            tx.update_items(memory_id, list_name, changed)
            version = tx.touch_memory(memory_id)
            tx.kv_put(memory_id, EDITED_VERSION_KEY, str(version))
            etag = self._etag_after(tx, tenant, record, handler, version)
            return MarksResult(counted, len(changed), handler.count(tx, record), etag, previous_etag)

        return await self.store.run(tenant, update)

    # -- state ------------------------------------------------------------------------------

    def _encode_one(self, msg: Msg, field: str) -> NewMessage:
        """The one write validation every stored message passes (AddMessages, LoadState,
        ImportSession, and any later write path), then its stored form."""
        check_msg(msg, field)
        data = encode_msg(msg)
        if len(data) > self.limits.max_message_bytes:
            raise ResourceExhaustedError(field, f"is {len(data)} bytes; at most {self.limits.max_message_bytes}")
        return NewMessage(msg, data)

    async def save_state(self, tenant: str, memory_id: str) -> tuple[MemoryRecord, list[StateEntry]]:
        """The memory's state as AgentScope's `saveTo` writes it, read in one snapshot."""
        check_id(memory_id, "memory_id")

        def export(tx: Tx) -> tuple[MemoryRecord, list[StateEntry]]:
            record = self._require(tx, memory_id)
            return record, self.handler(record.kind).export_state(tx, record)

        return await self.store.run(tenant, export, write=False)

    async def load_state(
        self,
        tenant: str,
        memory_id: str,
        entries: list[StateEntry],
        expected_version: int | None = None,
    ) -> WriteResult:
        """Replace the memory's contents with `entries` (AgentScope's `loadFrom`), atomically:
        everything is validated first, and a failure changes nothing. Returns the new version and
        the messages' etags around the load."""
        check_id(memory_id, "memory_id")
        seen: set[tuple[str, bool]] = set()
        for entry in entries:
            if (entry.key, entry.is_list) in seen:
                raise InvalidArgumentError(f"entries[{entry.key}]", "appears twice")
            seen.add((entry.key, entry.is_list))
        kind = await self.store.run(
            tenant, lambda tx: self._require(tx, memory_id).kind, write=False, small=True
        )
        handler = self.handler(kind)
        parsed = handler.parse_state(entries, self._encode_one)

        await self.tokens.ready()

        def apply(tx: Tx) -> WriteResult:
            record = self._require(tx, memory_id)
            if record.kind != kind:
                raise AbortedError(f"memory {memory_id!r} was replaced while its state was loading")
            if expected_version is not None and record.version != expected_version:
                raise AbortedError(
                    f"memory {memory_id!r} is at version {record.version}, not the expected "
                    f"{expected_version}; reload and retry"
                )
            previous_etag = self._etag_now(tx, tenant, record, handler)
            handler.apply_state(tx, record, parsed)
            version = tx.touch_memory(memory_id)
            return WriteResult(version, self._etag_after(tx, tenant, record, handler, version), previous_etag)

        return await self.store.run(tenant, apply)
