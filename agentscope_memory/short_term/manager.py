"""The short-term memory operations every client uses, over any store and any memory kind.

A `MemoryManager` validates input, enforces limits, makes retried appends idempotent and runs
each operation as one store transaction. What an operation means for a kind of memory (which
lists it touches) is the kind's `MemoryKindHandler`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

from agentscope_memory.errors import (
    AbortedError,
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnimplementedError,
)
from agentscope_memory.ids import check_id, check_request_id
from agentscope_memory.message import Msg
from agentscope_memory.store.codec import decode_msg, encode_msg, stored_bytes
from agentscope_memory.session.state import StateEntry
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
# Transactions below this many bytes run without a thread hop (see Store.run).
SMALL_TRANSACTION_BYTES = 256 * 1024
SMALL_PAGE = 1000


@dataclass(frozen=True)
class NewMessage:
    """A message being added: the parsed message and the form the store keeps."""

    msg: Msg
    data: bytes


class MemoryKindHandler(Protocol):
    """What a kind of memory does for the plain `Memory` operations, inside a transaction."""

    kind: str
    state_keys: list[tuple[str, bool]]

    def validate_config(self, config_json: str) -> str: ...
    def add(self, tx: Tx, record: MemoryRecord, new: list[NewMessage]) -> None: ...
    def read(self, tx: Tx, record: MemoryRecord, after_seq: int, limit: int | None) -> list[Row]: ...
    def count(self, tx: Tx, record: MemoryRecord) -> int: ...
    def delete_at(self, tx: Tx, record: MemoryRecord, index: int) -> bool: ...
    def clear(self, tx: Tx, record: MemoryRecord) -> None: ...
    # State in AgentScope session terms (StateService, JsonSession).
    def export_state(self, tx: Tx, record: MemoryRecord) -> list[StateEntry]: ...
    def parse_state(self, entries: list[StateEntry], encode: Callable[[Msg, str], NewMessage]) -> Any: ...
    def apply_state(self, tx: Tx, record: MemoryRecord, parsed: Any) -> None: ...


@dataclass(frozen=True)
class Limits:
    """Input limits; exceeding one is RESOURCE_EXHAUSTED naming the field."""

    max_message_bytes: int = 4 * 1024 * 1024
    max_batch_messages: int = 1000
    max_batch_bytes: int = 32 * 1024 * 1024
    default_page_size: int = 1000
    max_page_size: int = 10_000
    max_page_bytes: int = 4 * 1024 * 1024
    max_labels: int = 64


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
class MessagePage:
    """A page of messages in their stored form (serialized `Msg` protos)."""

    stored: list[bytes]
    next_page_token: str
    total_size: int
    etag: str = ""
    # True when the caller's `if_none_match` is still current; `stored` is then empty.
    not_modified: bool = False

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


def message_etag(record: MemoryRecord) -> str:
    """Names one state of a memory's messages. Every change bumps the version; the creation time
    tells apart a memory deleted and created again under the same id."""
    return f"{round(record.create_time * 1_000_000)}-{record.version}"


def _encode_token(kind: str, scope: str, position: str) -> str:
    raw = json.dumps([kind, scope, position], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str, kind: str, scope: str, field: str) -> str:
    try:
        padded = token + "=" * (-len(token) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if (
            isinstance(value, list)
            and len(value) == 3
            and value[0] == kind
            and value[1] == scope
            and isinstance(value[2], str)
        ):
            return value[2]
    except (ValueError, binascii.Error, UnicodeDecodeError):
        pass
    raise InvalidArgumentError(field, "is not a page token issued for this listing")


class MemoryManager:
    def __init__(
        self, store: Store, handlers: Sequence[MemoryKindHandler], limits: Limits | None = None
    ) -> None:
        self.store = store
        self.limits = limits or Limits()
        self._handlers = {h.kind: h for h in handlers}

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
            if existing is not None:
                if allow_existing and existing.kind == kind:
                    return MemoryInfo(existing, handler.count(tx, existing)), False
                raise AlreadyExistsError(
                    f"memory {memory_id!r} already exists (kind {existing.kind})"
                )
            record = MemoryRecord(memory_id, kind, config, labels, now, now, 1)
            tx.insert_memory(record)
            return MemoryInfo(record, 0), True

        return await self.store.run(tenant, create)

    def _check_labels(self, labels: dict[str, str]) -> None:
        if len(labels) > self.limits.max_labels:
            raise InvalidArgumentError("labels", f"has {len(labels)} entries; at most {self.limits.max_labels}")
        for key, value in labels.items():
            if not key or len(key) > 63:
                raise InvalidArgumentError(f"labels[{key!r}]", "keys must be 1 to 63 characters")
            if len(value) > 256:
                raise InvalidArgumentError(f"labels[{key!r}]", "values must be at most 256 characters")

    async def get_memory(self, tenant: str, memory_id: str) -> MemoryInfo:
        check_id(memory_id, "memory_id")

        def get(tx: Tx) -> MemoryInfo:
            record = self._require(tx, memory_id)
            return MemoryInfo(record, self.handler(record.kind).count(tx, record))

        return await self.store.run(tenant, get, write=False, small=True)

    async def list_memories(self, tenant: str, page_size: int = 0, page_token: str = "") -> MemoryPage:
        size = self._page_size(page_size, default=100, maximum=1000)
        after = _decode_token(page_token, "memories", tenant, "page_token") if page_token else ""

        def list_(tx: Tx) -> MemoryPage:
            records = tx.list_memories(after, size + 1)
            more = len(records) > size
            records = records[:size]
            infos = [MemoryInfo(r, self.handler(r.kind).count(tx, r)) for r in records]
            token = _encode_token("memories", tenant, records[-1].memory_id) if more else ""
            return MemoryPage(infos, token)

        return await self.store.run(tenant, list_, write=False)

    async def delete_memory(self, tenant: str, memory_id: str) -> None:
        check_id(memory_id, "memory_id")

        def delete(tx: Tx) -> None:
            self._require(tx, memory_id)
            tx.delete_memory(memory_id)

        await self.store.run(tenant, delete)

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
            data = encode_msg(msg)
            if len(data) > self.limits.max_message_bytes:
                raise ResourceExhaustedError(
                    f"messages[{i}]",
                    f"is {len(data)} bytes; at most {self.limits.max_message_bytes}",
                )
            total += len(data)
            encoded.append(NewMessage(msg, data))
        if total > self.limits.max_batch_bytes:
            raise ResourceExhaustedError(
                "messages", f"is {total} bytes; at most {self.limits.max_batch_bytes} per call"
            )
        return encoded

    async def add_messages(
        self, tenant: str, memory_id: str, msgs: Sequence[Msg], request_id: str | None = None
    ) -> AddResult:
        check_id(memory_id, "memory_id")
        request_id = check_request_id(request_id or "")
        encoded = self._encode_batch(msgs)
        digest = hashlib.sha256()
        for item in encoded:
            digest.update(len(item.data).to_bytes(8, "big"))
            digest.update(item.data)
        fingerprint = digest.hexdigest()
        small = sum(len(item.data) for item in encoded) < SMALL_TRANSACTION_BYTES

        def add(tx: Tx) -> AddResult:
            record = self._require(tx, memory_id)
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
            handler.add(tx, record, encoded)
            version = tx.touch_memory(memory_id)
            result = AddResult(handler.count(tx, record), version, replayed=False,
                               etag=message_etag(replace(record, version=version)),
                               previous_etag=message_etag(record))
            if request_id is not None:
                tx.request_put(
                    memory_id,
                    request_id,
                    RequestRecord(
                        fingerprint,
                        json.dumps({"message_count": result.message_count, "version": version}),
                    ),
                )
            return result

        return await self.store.run(tenant, add, small=small)

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
        self, tenant: str, memory_id: str, page_size: int = 0, page_token: str = "", if_none_match: str = ""
    ) -> MessagePage:
        """A page of messages. With `if_none_match` (the etag of an earlier first page) and no
        change since, only `not_modified` and the etag come back: a client's cache is current."""
        check_id(memory_id, "memory_id")
        if if_none_match and page_token:
            raise InvalidArgumentError("if_none_match", "applies to the first page only; leave it empty with page_token")
        size = self._page_size(
            page_size, default=self.limits.default_page_size, maximum=self.limits.max_page_size
        )
        after = 0
        if page_token:
            position = _decode_token(page_token, "messages", memory_id, "page_token")
            if not position.isdigit():
                raise InvalidArgumentError("page_token", "is not a page token issued for this listing")
            after = int(position)

        def read(tx: Tx) -> tuple[list[Row], bool, int, str]:
            record = self._require(tx, memory_id)
            handler = self.handler(record.kind)
            etag = message_etag(record)
            if if_none_match == etag:
                return [], False, handler.count(tx, record), etag
            rows = handler.read(tx, record, after, size + 1)
            return rows, len(rows) > size, handler.count(tx, record), etag

        rows, more, total, etag = await self.store.run(tenant, read, write=False, small=size <= SMALL_PAGE)
        if if_none_match == etag:
            return MessagePage([], "", total, etag, not_modified=True)
        rows = rows[:size]
        # Cut the page at the byte budget so no response outgrows a client's receive limit;
        # a single message larger than the budget still travels alone.
        budget = self.limits.max_page_bytes
        kept = 0
        used = 0
        for row in rows:
            used += len(row.data)
            if kept and used > budget:
                more = True
                break
            kept += 1
        rows = rows[:kept]
        token = _encode_token("messages", memory_id, str(rows[-1].seq)) if more and rows else ""
        return MessagePage([stored_bytes(r.data) for r in rows], token, total, etag)

    async def delete_message(self, tenant: str, memory_id: str, index: int) -> tuple[bool, int]:
        check_id(memory_id, "memory_id")
        if index < 0:
            raise InvalidArgumentError("index", f"is {index}; must not be negative")

        def delete(tx: Tx) -> tuple[bool, int]:
            record = self._require(tx, memory_id)
            handler = self.handler(record.kind)
            deleted = handler.delete_at(tx, record, index)
            if deleted:
                tx.touch_memory(memory_id)
            return deleted, handler.count(tx, record)

        return await self.store.run(tenant, delete, small=True)

    async def clear_messages(self, tenant: str, memory_id: str) -> None:
        check_id(memory_id, "memory_id")

        def clear(tx: Tx) -> None:
            record = self._require(tx, memory_id)
            self.handler(record.kind).clear(tx, record)
            tx.touch_memory(memory_id)

        await self.store.run(tenant, clear)

    # -- state ------------------------------------------------------------------------------

    def _encode_one(self, msg: Msg, field: str) -> NewMessage:
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
    ) -> int:
        """Replace the memory's contents with `entries` (AgentScope's `loadFrom`), atomically:
        everything is validated first, and a failure changes nothing. Returns the new version."""
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

        def apply(tx: Tx) -> int:
            record = self._require(tx, memory_id)
            if record.kind != kind:
                raise AbortedError(f"memory {memory_id!r} was replaced while its state was loading")
            if expected_version is not None and record.version != expected_version:
                raise AbortedError(
                    f"memory {memory_id!r} is at version {record.version}, not the expected "
                    f"{expected_version}; reload and retry"
                )
            handler.apply_state(tx, record, parsed)
            return tx.touch_memory(memory_id)

        return await self.store.run(tenant, apply)
