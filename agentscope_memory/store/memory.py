"""In-process backend for tests and throwaway use: same semantics as sqlite, nothing on disk.

Transactions are all-or-nothing like the durable backends: every mutation records its inverse,
and a callback that raises has its changes undone in reverse order.
"""

from __future__ import annotations

import bisect
import copy
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypeVar

from agentscope_memory.store.base import MemoryRecord, RequestRecord, Row

T = TypeVar("T")


@dataclass
class _StoredList:
    rows: list[Row] = field(default_factory=list)
    next_seq: int = 1


@dataclass
class _Tenant:
    memories: dict[str, MemoryRecord] = field(default_factory=dict)
    lists: dict[tuple[str, str], _StoredList] = field(default_factory=dict)
    kv: dict[tuple[str, str], str] = field(default_factory=dict)
    requests: dict[tuple[str, str], RequestRecord] = field(default_factory=dict)


class MemoryTx:
    def __init__(self, data: _Tenant, tenant: str) -> None:
        self._data = data
        self.tenant = tenant
        self.undo: list[Callable[[], None]] = []

    # -- memories ---------------------------------------------------------------------------

    def get_memory(self, memory_id: str) -> MemoryRecord | None:
        record = self._data.memories.get(memory_id)
        return copy.deepcopy(record) if record else None

    def insert_memory(self, record: MemoryRecord) -> None:
        if record.memory_id in self._data.memories:
            raise KeyError(f"memory {record.memory_id} exists")
        self._data.memories[record.memory_id] = copy.deepcopy(record)
        self.undo.append(lambda: self._data.memories.pop(record.memory_id, None))

    def touch_memory(self, memory_id: str) -> int:
        record = self._data.memories[memory_id]
        before = (record.version, record.update_time)
        record.version += 1
        record.update_time = time.time()

        def restore() -> None:
            record.version, record.update_time = before

        self.undo.append(restore)
        return record.version

    def delete_memory(self, memory_id: str) -> None:
        data = self._data
        saved = (
            data.memories.get(memory_id),
            {k: v for k, v in data.lists.items() if k[0] == memory_id},
            {k: v for k, v in data.kv.items() if k[0] == memory_id},
            {k: v for k, v in data.requests.items() if k[0] == memory_id},
        )
        data.memories.pop(memory_id, None)
        for table, removed in zip((data.lists, data.kv, data.requests), saved[1:]):
            for key in removed:
                del table[key]

        def restore() -> None:
            if saved[0] is not None:
                data.memories[memory_id] = saved[0]
            data.lists.update(saved[1])
            data.kv.update(saved[2])
            data.requests.update(saved[3])

        self.undo.append(restore)

    def list_memories(self, after_id: str, limit: int) -> list[MemoryRecord]:
        ids = sorted(i for i in self._data.memories if i > after_id)[:limit]
        return [copy.deepcopy(self._data.memories[i]) for i in ids]

    # -- lists ------------------------------------------------------------------------------

    def _list(self, memory_id: str, list_name: str) -> _StoredList:
        key = (memory_id, list_name)
        stored = self._data.lists.get(key)
        if stored is None:
            stored = self._data.lists[key] = _StoredList()
        return stored

    def _snapshot(self, stored: _StoredList) -> None:
        rows, next_seq = stored.rows, stored.next_seq

        def restore() -> None:
            stored.rows, stored.next_seq = rows, next_seq

        self.undo.append(restore)

    def append(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None:
        stored = self._list(memory_id, list_name)
        count, next_seq = len(stored.rows), stored.next_seq
        stored.rows.extend(Row(next_seq + i, data) for i, data in enumerate(items))
        stored.next_seq += len(items)

        def restore() -> None:
            del stored.rows[count:]
            stored.next_seq = next_seq

        self.undo.append(restore)

    def read(
        self, memory_id: str, list_name: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Row]:
        rows = self._data.lists.get((memory_id, list_name), _StoredList()).rows
        start = bisect.bisect_right(rows, after_seq, key=lambda r: r.seq)
        return rows[start:] if limit is None else rows[start : start + limit]

    def length(self, memory_id: str, list_name: str) -> int:
        return len(self._data.lists.get((memory_id, list_name), _StoredList()).rows)

    def delete_at(self, memory_id: str, list_name: str, index: int) -> bool:
        stored = self._list(memory_id, list_name)
        if not 0 <= index < len(stored.rows):
            return False
        removed = stored.rows.pop(index)
        self.undo.append(lambda: stored.rows.insert(index, removed))
        return True

    def clear(self, memory_id: str, list_name: str) -> None:
        stored = self._list(memory_id, list_name)
        self._snapshot(stored)
        stored.rows = []

    def replace(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None:
        stored = self._list(memory_id, list_name)
        self._snapshot(stored)
        stored.rows = [Row(stored.next_seq + i, data) for i, data in enumerate(items)]
        stored.next_seq += len(items)

    # -- key/value --------------------------------------------------------------------------

    def _put(self, table: dict, key: tuple[str, str], value: object | None) -> None:
        missing = object()
        old = table.get(key, missing)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value

        def restore() -> None:
            if old is missing:
                table.pop(key, None)
            else:
                table[key] = old

        self.undo.append(restore)

    def kv_get(self, memory_id: str, key: str) -> str | None:
        return self._data.kv.get((memory_id, key))

    def kv_put(self, memory_id: str, key: str, value: str) -> None:
        self._put(self._data.kv, (memory_id, key), value)

    def kv_delete(self, memory_id: str, key: str) -> None:
        self._put(self._data.kv, (memory_id, key), None)

    def kv_keys(self, memory_id: str, prefix: str = "") -> list[str]:
        return sorted(k for m, k in self._data.kv if m == memory_id and k.startswith(prefix))

    # -- idempotency ------------------------------------------------------------------------

    def request_get(self, memory_id: str, request_id: str) -> RequestRecord | None:
        return self._data.requests.get((memory_id, request_id))

    def request_put(self, memory_id: str, request_id: str, record: RequestRecord) -> None:
        self._put(self._data.requests, (memory_id, request_id), record)


class MemoryStore:
    """Everything in process memory; lost when the process ends."""

    def __init__(self) -> None:
        self._tenants: dict[str, _Tenant] = {}
        self._closed = False

    async def run(
        self, tenant: str, fn: Callable[[MemoryTx], T], *, write: bool = True, small: bool = False
    ) -> T:
        if self._closed:
            raise RuntimeError("store is closed")
        # Runs inline on the event loop: no await inside, so transactions never interleave.
        tx = MemoryTx(self._tenants.setdefault(tenant, _Tenant()), tenant)
        try:
            return fn(tx)
        except BaseException:
            for restore in reversed(tx.undo):
                restore()
            raise

    async def close(self) -> None:
        self._closed = True
