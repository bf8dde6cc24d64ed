"""The storage protocol every backend implements.

Memory logic talks to storage through `Tx`, a synchronous view of one tenant inside one
transaction: everything a callback does commits together or not at all. Callbacks run on the
backend's worker thread, so they must not await or do network I/O; slow work (an LLM call)
happens outside, followed by a second transaction that re-checks `version`.

A few `Tx` methods are not scoped to the transaction's tenant (the `meta` table, `kv_scan`):
they serve process-wide machinery (migrations) that works for every tenant at once. Their docstrings say so. A transaction that
only uses them may pass `NO_TENANT` to `Store.run`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Protocol, Sequence, TypeVar

T = TypeVar("T")

# The tenant argument of a transaction that only touches cross-tenant tables.
NO_TENANT = ""


@dataclass
class MemoryRecord:
    """One memory's row: what it is, not what it holds."""

    memory_id: str
    kind: str
    config_json: str = "{}"
    labels: dict[str, str] = field(default_factory=dict)
    create_time: float = 0.0
    update_time: float = 0.0
    version: int = 0


@dataclass(frozen=True)
class Row:
    """One item of a stored list. `seq` grows within a (memory, list) and is never reused."""

    seq: int
    # A message is its serialized `Msg` proto (`proto_convert.msg_to_stored`); other lists may
    # hold JSON text.
    data: str | bytes


@dataclass(frozen=True)
class RequestRecord:
    """The outcome of an idempotent request, kept so a retry can be answered without redoing it."""

    fingerprint: str
    result_json: str


class KvEntry(NamedTuple):
    """One key/value row found by a cross-tenant `kv_scan`."""

    tenant: str
    memory_id: str
    key: str
    value: str


class Tx(Protocol):
    tenant: str

    def get_memory(self, memory_id: str) -> MemoryRecord | None: ...
    def insert_memory(self, record: MemoryRecord) -> None:
        """Raises `AlreadyExistsError` if the id is taken (the transaction stays usable)."""
        ...
    def touch_memory(self, memory_id: str) -> int: ...
    def delete_memory(self, memory_id: str) -> None: ...
    def list_memories(self, after_id: str, limit: int) -> list[MemoryRecord]: ...

    def append(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None: ...
    def read(
        self, memory_id: str, list_name: str, after_seq: int = 0, limit: int | None = None
    ) -> list[Row]: ...
    def length(self, memory_id: str, list_name: str) -> int: ...
    def delete_at(self, memory_id: str, list_name: str, index: int) -> bool: ...
    def clear(self, memory_id: str, list_name: str) -> None: ...
    def replace(self, memory_id: str, list_name: str, items: Sequence[str | bytes]) -> None: ...

    def kv_get(self, memory_id: str, key: str) -> str | None: ...
    def kv_put(self, memory_id: str, key: str, value: str) -> None: ...
    def kv_delete(self, memory_id: str, key: str) -> None: ...
    def kv_keys(self, memory_id: str, prefix: str = "") -> list[str]: ...
    def kv_scan(self, prefix: str) -> list[KvEntry]:
        """Cross-tenant: every key starting with `prefix`, of every memory of every tenant,
        ordered by (tenant, memory_id, key). For one-off migrations; it reads the whole table."""
        ...

    def request_get(self, memory_id: str, request_id: str) -> RequestRecord | None: ...
    def request_put(self, memory_id: str, request_id: str, record: RequestRecord) -> None: ...

    def meta_get(self, key: str) -> str | None:
        """Cross-tenant: a value of the global `meta` table (schema version, migration markers)."""
        ...
    def meta_put(self, key: str, value: str) -> None:
        """Cross-tenant: set a value of the global `meta` table."""
        ...


class Store(Protocol):
    async def run(
        self, tenant: str, fn: Callable[[Tx], T], *, write: bool = True, small: bool = False
    ) -> T:
        """Run `fn` in one transaction. `small` promises a short, bounded transaction (a few
        rows), which a backend may run without a thread hop."""
        ...

    async def close(self) -> None: ...
