"""The per-scope indexes one process keeps in memory, within a budget of rows.

An index costs its scope's rows (a float32 vector each plus postings). When the indexes held
exceed `max_vectors` rows in all, the least recently searched scopes are dropped; a dropped
scope is loaded again by its next search. A scope larger than the whole budget is never kept:
on SQLite it is loaded for each search, on PostgreSQL it is searched in the database.
"""

from __future__ import annotations

from collections import OrderedDict

from agentscope_memory.long_term.hybrid.memory_index import ScopeIndex

Key = tuple[str, str]  # (tenant, scope key)


class IndexCache:
    def __init__(self, max_vectors: int) -> None:
        self.max_vectors = max_vectors
        self._indexes: OrderedDict[Key, ScopeIndex] = OrderedDict()
        self.evictions = 0

    def get(self, key: Key) -> ScopeIndex | None:
        """The index of a scope if kept (writers keep it current), without counting a use."""
        return self._indexes.get(key)

    def use(self, key: Key) -> ScopeIndex | None:
        """The index of a scope if kept, now the most recently used."""
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
        return index

    def fits(self, rows: int) -> bool:
        return rows <= self.max_vectors

    def put(self, key: Key, index: ScopeIndex) -> None:
        """Keep `index`, dropping the least recently used others while over budget."""
        self._indexes[key] = index
        self._indexes.move_to_end(key)
        total = sum(i.slots for i in self._indexes.values())
        while total > self.max_vectors and len(self._indexes) > 1:
            _, dropped = self._indexes.popitem(last=False)
            total -= dropped.slots
            self.evictions += 1

    def __contains__(self, key: Key) -> bool:
        return key in self._indexes

    def __len__(self) -> int:
        return len(self._indexes)

    @property
    def vectors(self) -> int:
        return sum(i.slots for i in self._indexes.values())

    def clear(self) -> None:
        self._indexes.clear()
