"""Which shared pools a memory reads: a memory of any kind may name pools (and a token budget)
whose rendering its context-building call includes: AUTO_CONTEXT's `PrepareReasoningInput`
(as a second text block of the system message) and TIERED's projection (its shared section).
Kept in the memory's own key/value rows, so it goes when the memory goes, and copied to a child
created from the memory (`ScopeEngine.child_hooks`), as a sub-agent inherits its parent's pools.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.message import Msg
from agentscope_memory.pool.engine import SharedPools
from agentscope_memory.store.base import MemoryRecord, Store, Tx
from agentscope_memory.validation.ids import check_id

KEY = "shared_pools"


@dataclass(frozen=True)
class MemoryPools:
    pool_ids: list[str]
    # The rendering's budget; 0: the pools' default.
    max_tokens: int


def _read(tx: Tx, memory_id: str) -> MemoryPools:
    raw = tx.kv_get(memory_id, KEY)
    if raw is None:
        return MemoryPools([], 0)
    value = json.loads(raw)
    return MemoryPools(list(value["pool_ids"]), int(value["max_tokens"]))


def _require(tx: Tx, memory_id: str) -> None:
    if tx.get_memory(memory_id) is None:
        raise NotFoundError(f"memory {memory_id!r} does not exist")


class PoolAttachments:
    def __init__(self, pools: SharedPools, store: Store) -> None:
        self._pools = pools
        self._store = store

    async def set(self, tenant: str, memory_id: str, pool_ids: Sequence[str], max_tokens: int = 0) -> MemoryPools:
        """Name the pools `memory_id` reads (an empty list: none)."""
        check_id(memory_id, "memory_id")
        limits = self._pools.limits
        if len(pool_ids) > limits.max_render_pools:
            raise InvalidArgumentError("pool_ids", f"name at most {limits.max_render_pools} pools, not {len(pool_ids)}")
        for i, pool_id in enumerate(pool_ids):
            self._pools._pool(pool_id, f"pool_ids[{i}]")
        if max_tokens < 0 or max_tokens > limits.max_render_tokens:
            raise InvalidArgumentError("max_tokens", f"must be between 0 and {limits.max_render_tokens}, not {max_tokens}")
        chosen = MemoryPools(list(dict.fromkeys(pool_ids)), max_tokens)

        def write(tx: Tx) -> MemoryPools:
            _require(tx, memory_id)
            if chosen.pool_ids:
                tx.kv_put(memory_id, KEY, json.dumps({"pool_ids": chosen.pool_ids, "max_tokens": max_tokens},
                                                     ensure_ascii=False))
            else:
                tx.kv_delete(memory_id, KEY)
            return chosen

        return await self._store.run(tenant, write, small=True)

    async def get(self, tenant: str, memory_id: str) -> MemoryPools:
        check_id(memory_id, "memory_id")

        def read(tx: Tx) -> MemoryPools:
            _require(tx, memory_id)
            return _read(tx, memory_id)

        return await self._store.run(tenant, read, write=False, small=True)

    async def context(self, tenant: str, memory_id: str) -> list[Msg]:
        """The rendering of the memory's pools as SYSTEM messages, newest first ([] without pools)."""
        chosen = await self._store.run(tenant, lambda tx: _read(tx, memory_id), write=False, small=True)
        if not chosen.pool_ids:
            return []
        return (await self._pools.render(tenant, chosen.pool_ids, chosen.max_tokens, as_messages=True)).messages

    @staticmethod
    def inherit(tx: Tx, parent: MemoryRecord, child: MemoryRecord) -> None:
        """A child created from `parent` reads the parent's pools."""
        raw = tx.kv_get(parent.memory_id, KEY)
        if raw is not None:
            tx.kv_put(child.memory_id, KEY, raw)
