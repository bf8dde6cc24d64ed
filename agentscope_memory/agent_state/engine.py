"""The agent-state engine: validated, limited, versioned reads and writes of a slot's values and
lists, over the store protocol. It knows nothing of gRPC or of AgentScope's classes: values are
opaque JSON text, stored and returned byte for byte."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agentscope_memory.errors import (
    AbortedError,
    FailedPreconditionError,
    InvalidArgumentError,
    ResourceExhaustedError,
)
from agentscope_memory.paging.tokens import INVALID_TOKEN, PageTokens
from agentscope_memory.store import NO_TENANT, Store, Tx
from agentscope_memory.store.base import StateWrite
from agentscope_memory.validation.json_text import MAX_STATE_DEPTH, parse_json

KiB = 1024
MiB = 1024 * KiB
# The largest value a store can hold, so the largest `max_streamed_value_bytes` a server may
# set: a value is one row, and SQLite takes at most 10^9 bytes a row (its default
# SQLITE_MAX_LENGTH), less room here for the row's ids and key (at most a few KiB).
# PostgreSQL's text holds a little under 1 GiB, more than this. 1 GiB was allowed: such a
# value passed every check and then failed in the store.
MAX_STORABLE_VALUE_BYTES = 1_000_000_000 - 64 * KiB

log = logging.getLogger("agentscope_memory.agent_state")

# How long a deleted key's version is remembered (its tombstone) by default. Pruned, it still
# never repeats (the tenant's version floor, store/sql/agent_state.py); kept, the key deleted
# and saved again goes on from its own version, and the floor (where every key new to the
# tenant starts) rises only with what was deleted that long ago.
DEFAULT_TOMBSTONE_RETENTION_S = 7 * 86400.0
# A replica looks for tombstones past their retention in the background at its first delete,
# then at most this often (or once per retention, when that is shorter): the rows it leaves are
# at most one pass late, and a service that deletes a lot pays one indexed pass an hour.
TOMBSTONE_PRUNE_INTERVAL_S = 3600.0
# Tombstones forgotten per transaction: each a short one, so SQLite's one writer is never held
# long by housekeeping, however many tombstones a pass finds (a first pass after an upgrade).
TOMBSTONE_PRUNE_ROWS = 5000

# The key a 1.x `InMemoryMemory` (and our 1.x `RemoteMemory`) saves its messages under, which
# AgentScope-Java 2.x's legacy loader reads when a slot has no `agent_state`.
LEGACY_MESSAGES_KEY = "memory_messages"


@dataclass(frozen=True)
class AgentStateLimits:
    """Sizes the engine accepts. The defaults keep every response under gRPC's 4 MiB.

    `max_value_bytes` bounds a value written or read whole in one message (`PutValue`,
    `GetValue`); `max_streamed_value_bytes` bounds a value written or read in pieces
    (`StreamPutValue`, `StreamGetValue`): the largest value the engine stores."""

    max_value_bytes: int = 4 * MiB - 64 * KiB
    max_streamed_value_bytes: int = 64 * MiB
    max_list_items: int = 100_000
    max_list_bytes: int = 256 * MiB
    max_page_bytes: int = 4 * MiB - 64 * KiB
    default_page_size: int = 1000
    max_page_size: int = 1000
    max_id_bytes: int = 512
    max_key_bytes: int = 256


@dataclass(frozen=True)
class Slot:
    """(user, session); an empty `user_id` is the anonymous user."""

    user_id: str
    session_id: str


@dataclass(frozen=True)
class StoredValue:
    found: bool
    json: str
    version: int


@dataclass(frozen=True)
class ListWrite:
    version: int
    length: int


@dataclass(frozen=True)
class ListPage:
    found: bool
    items: list[str]
    version: int
    length: int
    next_page_token: str


@dataclass(frozen=True)
class KeyPage:
    # (kind, key): kind is `value` or `list`.
    keys: list[tuple[str, str]]
    next_page_token: str


@dataclass(frozen=True)
class SessionIdPage:
    session_ids: list[str]
    next_page_token: str


class StateConflictError(AbortedError):
    """A compare-and-set found another version (or list length) than the caller expected."""

    def __init__(self, what: str, current_version: int, current_length: int | None = None) -> None:
        self.current_version = current_version
        self.current_length = current_length
        # Set by a client that sent the write more than once (a reply was lost): the version
        # found may be the write's own.
        self.retried = False
        length = f", current length {current_length}" if current_length is not None else ""
        super().__init__(
            f"{what} was changed by another writer{length}; current version {current_version}"
        )


class ValueTooLargeError(FailedPreconditionError):
    """A value asked for whole is larger than one response carries: read it in pieces."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        self.key = key
        self.size = size
        self.limit = limit
        super().__init__(f"value {key!r} is {size} bytes, more than one response carries ({limit}); read it in pieces")


class LegacyMessages(Protocol):
    """Where a slot without its own `memory_messages` list reads it from (a 1.x memory)."""

    async def messages(self, tenant: str, slot: Slot) -> list[str] | None:
        """The 1.x conversation of `slot` as message JSON, or None when there is none."""
        ...


def check_text_id(value: str, field: str, max_bytes: int, *, required: bool) -> str:
    """Any Unicode text within `max_bytes` of UTF-8, without NUL, control characters or unpaired
    surrogates; `required` ones must not be blank."""
    if required and not value.strip():
        raise InvalidArgumentError(field, "is required and must not be blank")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgumentError(field, "contains an unpaired surrogate (not valid Unicode text)") from None
    if size > max_bytes:
        raise InvalidArgumentError(field, f"is {size} bytes of UTF-8; at most {max_bytes}")
    for ch in value:
        if unicodedata.category(ch) == "Cc":
            raise InvalidArgumentError(field, f"contains the control character U+{ord(ch):04X}")
    return value


def _check_json(text: str, field: str, max_bytes: int, more: str = "") -> int:
    """Validates one JSON document under the service's one JSON rule (nesting, numbers, lone
    surrogate escapes: `validation.json_text`); returns its UTF-8 size. `more` follows the
    message of a document over `max_bytes`."""
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgumentError(field, "contains an unpaired surrogate (not valid Unicode text)") from None
    if size > max_bytes:
        raise ResourceExhaustedError(field, f"is {size} bytes; at most {max_bytes} per value{more}")
    # A state wraps messages (2.x's `context` list), so it may nest as deep as a 1.x state entry.
    parse_json(text, field, MAX_STATE_DEPTH)
    return size


# Which kind a ListKeys token's last row was (a token carries integers and one text).
_KINDS = ("list", "value")


class AgentStateEngine:
    """Every operation of AgentScope-Java 2.x's `AgentStateStore`, plus compare-and-set."""

    def __init__(
        self,
        store: Store,
        limits: AgentStateLimits | None = None,
        legacy: LegacyMessages | None = None,
        tokens: PageTokens | None = None,
        tombstone_retention_s: float = DEFAULT_TOMBSTONE_RETENTION_S,
    ) -> None:
        if not (math.isfinite(tombstone_retention_s) and tombstone_retention_s >= 0):
            raise ValueError(f"tombstone_retention_s must be 0 (never prune) or a number of seconds, not {tombstone_retention_s}")
        self.store = store
        self.limits = limits or AgentStateLimits()
        self.legacy = legacy
        # 0: deleted keys' versions are remembered for ever (as before pruning existed).
        self.tombstone_retention_s = tombstone_retention_s
        self._prune_due = 0.0
        # The background pass a delete started, while it runs (`pruning`).
        self._pruning: asyncio.Task[int] | None = None
        # Page tokens are signed with the server's key and bound to the tenant, the slot and the
        # key, so a forged or moved token is `page_token: invalid or expired` before any value
        # of it reaches the store.
        self.tokens = tokens or PageTokens(store)

    # -- validation -------------------------------------------------------------------------

    def _user(self, user_id: str, field: str) -> str:
        check_text_id(user_id, field, self.limits.max_id_bytes, required=False)
        # AgentScope's stores file a blank user id under the anonymous user, as null.
        return "" if not user_id.strip() else user_id

    def _slot(self, slot: Slot) -> Slot:
        user_id = self._user(slot.user_id, "slot.user_id")
        check_text_id(slot.session_id, "slot.session_id", self.limits.max_id_bytes, required=True)
        return Slot(user_id, slot.session_id)

    def _key(self, key: str) -> str:
        # Any key, the empty or a blank one included: AgentScope's own stores (the in-memory and
        # JSON-file ones, Redis, OSS, COS) take every key, only its JDBC ones refuse blank keys.
        return check_text_id(key, "key", self.limits.max_key_bytes, required=False)

    @staticmethod
    def _expected(expected_version: int | None, field: str = "condition.expected_version") -> int | None:
        if expected_version is not None and expected_version < 0:
            raise InvalidArgumentError(field, "must be 0 (create only) or a version; leave it unset for an unconditional write")
        return expected_version

    def _items(self, items: Sequence[str], field: str = "items") -> int:
        if len(items) > self.limits.max_list_items:
            raise ResourceExhaustedError(field, f"has {len(items)} items; at most {self.limits.max_list_items} per list")
        total = 0
        for i, item in enumerate(items):
            total += _check_json(item, f"{field}[{i}]", self.limits.max_value_bytes)
        if total > self.limits.max_list_bytes:
            raise ResourceExhaustedError(field, f"is {total} bytes; at most {self.limits.max_list_bytes} per list")
        return total

    # -- values -----------------------------------------------------------------------------

    def check_put(self, slot: Slot, key: str, expected_version: int | None, size: int = 0) -> None:
        """What `put_value(..., streamed=True)` checks before the value itself: for refusing a
        streamed value at its first piece, before the rest is sent. `size` 0: not known yet."""
        self._slot(slot)
        self._key(key)
        self._expected(expected_version)
        limit = self.limits.max_streamed_value_bytes
        if size > limit:
            raise ResourceExhaustedError("total_bytes", f"is {size} bytes; at most {limit} per value")

    async def put_value(
        self, tenant: str, slot: Slot, key: str, json_text: str, expected_version: int | None = None,
        *, streamed: bool = False,
    ) -> int:
        """Stores a value; returns this write's version. Raises `StateConflictError` when
        `expected_version` is given and the stored version differs (0: the value exists).
        At most `max_value_bytes`, or `max_streamed_value_bytes` when `streamed` (the value
        came in pieces); one write either way."""
        slot = self._slot(slot)
        self._key(key)
        self._expected(expected_version)
        if streamed:
            size = _check_json(json_text, "json", self.limits.max_streamed_value_bytes)
        else:
            more = ""
            if self.limits.max_streamed_value_bytes > self.limits.max_value_bytes:
                more = f"; up to {self.limits.max_streamed_value_bytes} when sent in pieces (StreamPutValue)"
            size = _check_json(json_text, "json", self.limits.max_value_bytes, more)
        now = time.time()

        def put(tx: Tx) -> StateWrite:
            return tx.state_put_value(slot.user_id, slot.session_id, key, json_text, size, expected_version, now)

        outcome = await self.store.run(tenant, put)
        if not outcome.ok:
            raise StateConflictError(f"value {key!r}", outcome.version)
        return outcome.version

    async def get_value(self, tenant: str, slot: Slot, key: str, *, whole: bool = False) -> StoredValue:
        """A value and its version. Unless `whole`, a value larger than `max_value_bytes` (one
        response) raises `ValueTooLargeError` without being read; `whole` reads any value (to
        send it in pieces, or in-process)."""
        slot = self._slot(slot)
        self._key(key)
        if whole:
            def get_whole(tx: Tx) -> tuple[str, int] | None:
                return tx.state_value(slot.user_id, slot.session_id, key)

            found = await self.store.run(tenant, get_whole, write=False)
            return StoredValue(False, "", 0) if found is None else StoredValue(True, found[0], found[1])
        limit = self.limits.max_value_bytes

        def get(tx: Tx) -> tuple[str | None, int, int] | None:
            return tx.state_value_within(slot.user_id, slot.session_id, key, limit)

        row = await self.store.run(tenant, get, write=False, small=True)
        if row is None:
            return StoredValue(False, "", 0)
        text, version, size = row
        if text is None:
            raise ValueTooLargeError(key, size, limit)
        return StoredValue(True, text, version)

    # -- lists ------------------------------------------------------------------------------

    async def put_list(self, tenant: str, slot: Slot, key: str, items: Sequence[str], expected_version: int | None = None) -> ListWrite:
        slot = self._slot(slot)
        self._key(key)
        self._expected(expected_version)
        size = self._items(items)
        items = list(items)
        now = time.time()

        def put(tx: Tx) -> StateWrite:
            return tx.state_put_list(slot.user_id, slot.session_id, key, items, size, expected_version, now)

        outcome = await self.store.run(tenant, put)
        if not outcome.ok:
            raise StateConflictError(f"list {key!r}", outcome.version)
        return ListWrite(outcome.version, outcome.length)

    async def append_list(
        self, tenant: str, slot: Slot, key: str, items: Sequence[str], expected_length: int,
        expected_version: int | None = None,
    ) -> ListWrite:
        """Appends when the stored list has `expected_length` items (and `expected_version`,
        when given); O(appended) in the store."""
        slot = self._slot(slot)
        self._key(key)
        self._expected(expected_version)
        if expected_length < 0:
            raise InvalidArgumentError("expected_length", "must not be negative")
        size = self._items(items)
        if expected_length + len(items) > self.limits.max_list_items:
            raise ResourceExhaustedError(
                "items", f"would make the list {expected_length + len(items)} items long; at most {self.limits.max_list_items}"
            )
        items = list(items)
        limits = self.limits
        now = time.time()

        def append(tx: Tx) -> StateWrite:
            if items:
                head = tx.state_head(slot.user_id, slot.session_id, "list", key)
                if head is not None and head.length == expected_length and head.size + size > limits.max_list_bytes:
                    raise ResourceExhaustedError(
                        "items", f"would make the list {head.size + size} bytes; at most {limits.max_list_bytes}"
                    )
            return tx.state_append_list(
                slot.user_id, slot.session_id, key, items, size, expected_length, expected_version, now
            )

        outcome = await self.store.run(tenant, append)
        if not outcome.ok:
            raise StateConflictError(f"list {key!r}", outcome.version, outcome.length)
        return ListWrite(outcome.version, outcome.length)

    def _page_size(self, requested: int) -> int:
        if requested < 0:
            raise InvalidArgumentError("page_size", "must not be negative")
        return min(requested or self.limits.default_page_size, self.limits.max_page_size)

    async def get_list(self, tenant: str, slot: Slot, key: str, page_size: int = 0, page_token: str = "") -> ListPage:
        """One page of a list. A token is bound to the list and its version: a list changed
        between pages raises `StateConflictError` (start again)."""
        slot = self._slot(slot)
        self._key(key)
        size = self._page_size(page_size)
        await self.tokens.ready()
        binding = [tenant, slot.user_id, slot.session_id, key]
        offset, token_version = 0, None
        if page_token:
            offset, token_version = self.tokens.read(page_token, "state_list", binding, 2)
        budget = self.limits.max_page_bytes

        resumable = key == LEGACY_MESSAGES_KEY and self.legacy is not None

        def read(tx: Tx) -> tuple[bool, int, int, list[str], bool]:
            head = tx.state_head(slot.user_id, slot.session_id, "list", key)
            if head is None:
                detached = resumable and tx.state_legacy_detached(slot.user_id, slot.session_id, key)
                return False, 0, 0, [], detached
            if token_version is not None and token_version != head.version:
                return True, head.version, head.length, [], False
            items = tx.state_read_list(slot.user_id, slot.session_id, key, offset, size, budget)
            return True, head.version, head.length, items, False

        found, version, length, items, detached = await self.store.run(tenant, read, write=False)
        if not found and resumable and not detached:
            assert self.legacy is not None
            legacy = await self.legacy.messages(tenant, slot)
            if legacy is not None:
                found, version, length, items = True, 0, len(legacy), self._legacy_page(legacy, offset, size)
        if token_version is not None and token_version != version:
            raise StateConflictError(f"list {key!r}", version, length)
        end = offset + len(items)
        token = self.tokens.issue("state_list", binding, [end, version]) if found and end < length else ""
        return ListPage(found, items, version, length, token)

    def _legacy_page(self, items: list[str], offset: int, size: int) -> list[str]:
        out: list[str] = []
        used = 0
        for item in items[offset : offset + size]:
            n = len(item.encode("utf-8"))
            if out and used + n > self.limits.max_page_bytes:
                break
            out.append(item)
            used += n
        return out

    async def get_whole_list(self, tenant: str, slot: Slot, key: str) -> ListPage:
        """Every page of a list, read until the end (restarting when it changes meanwhile)."""
        for _ in range(5):
            items: list[str] = []
            token = ""
            try:
                while True:
                    page = await self.get_list(tenant, slot, key, 0, token)
                    items += page.items
                    token = page.next_page_token
                    if not token:
                        return ListPage(page.found, items, page.version, page.length, "")
            except StateConflictError:
                continue
        raise AbortedError(f"list {key!r} kept changing while it was read; try again")

    # -- slots ------------------------------------------------------------------------------

    async def session_exists(self, tenant: str, slot: Slot) -> bool:
        slot = self._slot(slot)

        def exists(tx: Tx) -> tuple[bool, bool]:
            if tx.state_slot_exists(slot.user_id, slot.session_id):
                return True, False
            return False, tx.state_legacy_detached(slot.user_id, slot.session_id, LEGACY_MESSAGES_KEY)

        found, detached = await self.store.run(tenant, exists, write=False, small=True)
        if found:
            return True
        return self.legacy is not None and not detached and await self.legacy.messages(tenant, slot) is not None

    async def _resumes_legacy(self, tenant: str, slot: Slot) -> bool:
        """Whether the slot's `memory_messages` would be answered from a 1.x memory if absent."""
        return self.legacy is not None and await self.legacy.messages(tenant, slot) is not None

    async def delete_session(self, tenant: str, slot: Slot) -> int:
        """Deletes everything of the slot. A 1.x memory it resumed from is left as it is, but no
        longer answers for the slot: a deleted session does not come back from it."""
        slot = self._slot(slot)
        detach = await self._resumes_legacy(tenant, slot)
        now = time.time()

        def delete(tx: Tx) -> int:
            deleted = tx.state_delete_slot(slot.user_id, slot.session_id, now)
            if detach:
                tx.state_detach_legacy(slot.user_id, slot.session_id, LEGACY_MESSAGES_KEY, now)
            return deleted

        deleted = await self.store.run(tenant, delete)
        self._prune_if_due()
        return deleted

    async def delete_key(self, tenant: str, slot: Slot, key: str, *, list_: bool = False) -> bool:
        """Deletes the key's single value (as AgentScope's stores do), or its list (and then the
        `memory_messages` list no longer resumes a 1.x memory either)."""
        slot = self._slot(slot)
        self._key(key)
        kind = "list" if list_ else "value"
        detach = list_ and key == LEGACY_MESSAGES_KEY and await self._resumes_legacy(tenant, slot)
        now = time.time()

        def delete(tx: Tx) -> int:
            deleted = tx.state_delete_key(slot.user_id, slot.session_id, kind, key, now)
            if detach:
                tx.state_detach_legacy(slot.user_id, slot.session_id, key, now)
            return deleted

        deleted = await self.store.run(tenant, delete) > 0
        self._prune_if_due()
        return deleted or detach

    # -- tombstones -------------------------------------------------------------------------

    async def prune_tombstones(self, before: float | None = None) -> int:
        """Forgets the versions of keys deleted before `before` (unix seconds; default
        `tombstone_retention_s` ago, nothing when that is 0), in every tenant, raising each
        tenant's version floor in the same transactions; returns how many. A version handed
        out before stays refused to a compare-and-set on the key saved again."""
        if before is None:
            if not self.tombstone_retention_s:
                return 0
            before = time.time() - self.tombstone_retention_s
        cutoff = before

        def prune(tx: Tx) -> int:
            return tx.state_prune_tombstones(cutoff, TOMBSTONE_PRUNE_ROWS, time.time())

        pruned = 0
        while True:
            batch = await self.store.run(NO_TENANT, prune)
            pruned += batch
            if batch < TOMBSTONE_PRUNE_ROWS:
                return pruned

    @property
    def pruning(self) -> asyncio.Task[int] | None:
        """The background pruning pass a delete started, while it runs."""
        return self._pruning

    def _prune_if_due(self) -> None:
        # Tombstones come only from deletes, so a delete is what starts a pass: a service that
        # never deletes has nothing to prune.
        if not self.tombstone_retention_s or self._pruning is not None:
            return
        clock = time.monotonic()
        if clock < self._prune_due:
            return
        self._prune_due = clock + min(TOMBSTONE_PRUNE_INTERVAL_S, self.tombstone_retention_s)
        self._pruning = asyncio.get_running_loop().create_task(self._prune_in_background(),
                                                               name="agent-state tombstones")

    async def _prune_in_background(self) -> int:
        try:
            pruned = await self.prune_tombstones()
            if pruned:
                log.info("forgot deleted agent-state keys' versions", extra={"fields": {"tombstones": pruned}})
            return pruned
        except Exception as exc:  # noqa: BLE001 - housekeeping: the next pass tries again
            log.warning("pruning agent-state tombstones failed: %s", exc)
            return 0
        finally:
            self._pruning = None

    async def close(self) -> None:
        """Stops a pruning pass under way (what it committed stays; the rest waits for the next)."""
        task = self._pruning
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def keys(self, tenant: str, slot: Slot, page_size: int = 0, page_token: str = "") -> KeyPage:
        """What the slot holds, as (kind, key) with kind `value` or `list`, paged."""
        slot = self._slot(slot)
        size = self._page_size(page_size)
        await self.tokens.ready()
        binding = [tenant, slot.user_id, slot.session_id]
        after: tuple[str, str] | None = None
        if page_token:
            values, key = self.tokens.read_with_text(page_token, "state_keys", binding, 1)
            if values[0] >= len(_KINDS):
                raise InvalidArgumentError("page_token", INVALID_TOKEN)
            after = (_KINDS[values[0]], key)

        def keys(tx: Tx) -> list[tuple[str, str]]:
            return tx.state_keys(slot.user_id, slot.session_id, after, size + 1)

        rows = await self.store.run(tenant, keys, write=False)
        more = len(rows) > size
        rows = rows[:size]
        token = self.tokens.issue("state_keys", binding, [_KINDS.index(rows[-1][0])], rows[-1][1]) if more else ""
        return KeyPage(rows, token)

    async def list_session_ids(self, tenant: str, user_id: str, page_size: int = 0, page_token: str = "") -> SessionIdPage:
        user_id = self._user(user_id, "user_id")
        size = self._page_size(page_size)
        await self.tokens.ready()
        binding = [tenant, user_id]
        after: str | None = None
        if page_token:
            after = self.tokens.read_with_text(page_token, "state_session_ids", binding, 0)[1]

        def list_(tx: Tx) -> list[str]:
            return tx.state_session_ids(user_id, after, size + 1)

        ids = await self.store.run(tenant, list_, write=False)
        more = len(ids) > size
        ids = ids[:size]
        token = self.tokens.issue("state_session_ids", binding, [], ids[-1]) if more else ""
        return SessionIdPage(ids, token)
