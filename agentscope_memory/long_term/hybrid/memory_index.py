"""The embedded candidate index: per exact scope, a float32 matrix and a BM25 inverted index.

A scope's index is built from its rows the first time the scope is searched (so opening the
server costs nothing per stored memory) and kept up to date by the engine's writes. Dense
candidates are an exact top-k (one matrix-vector product over the scope's rows only); lexical
candidates are BM25 over the scope's postings only. Nothing here depends on the size of any
other scope.

Other processes write too (PostgreSQL replicas; a local-mode program on a server's SQLite
store): the engine applies the rows changed since the index's `generation` (`apply`). Deleted rows stay in the arrays with `alive` false until they outnumber
the live ones; then the arrays are compacted.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any, Sequence

import numpy as np

from agentscope_memory.long_term.metadata_filter import metadata_matches
from agentscope_memory.store.base import LongTermFilter, LongTermRow
from agentscope_memory.tracing import traced

BM25_K1 = 1.2
BM25_B = 0.75


class ScopeIndex:
    def __init__(self, dimensions: int) -> None:
        self._dims = dimensions
        self.ids: list[str] = []
        self._pos: dict[str, int] = {}
        self._matrix = np.zeros((16, dimensions), dtype=np.float32)
        self._alive = np.zeros(16, dtype=bool)
        self._lengths = np.zeros(16, dtype=np.float32)
        self._postings: dict[str, tuple[list[int], list[int]]] = {}
        # The postings as arrays, built on first use after a change (a query reads a term's
        # postings whole; converting Python lists every time costs more than the scoring).
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # Per row, for filters: memory_type, domain, created, metadata.
        self._types: list[str] = []
        self._domains: list[str] = []
        self._created: list[float] = []
        self._metadata: list[dict[str, Any]] = []
        self._live = 0
        self._total_length = 0.0
        # What search reads of each live row: a changed row seen again (another replica's
        # write, or this process's own write read back) is applied only when this differs.
        self._signatures: dict[str, tuple[Any, ...]] = {}
        # The scope generation this index reflects.
        self.generation = 0

    def __len__(self) -> int:
        return self._live

    @property
    def slots(self) -> int:
        """Rows held, deleted ones included (what the index costs in memory)."""
        return len(self.ids)

    def _grow(self, need: int) -> None:
        capacity = len(self._alive)
        if need <= capacity:
            return
        new = max(need, capacity * 2)
        matrix = np.zeros((new, self._dims), dtype=np.float32)
        matrix[:capacity] = self._matrix
        self._matrix = matrix
        self._alive = np.concatenate([self._alive, np.zeros(new - capacity, dtype=bool)])
        self._lengths = np.concatenate([self._lengths, np.zeros(new - capacity, dtype=np.float32)])

    def add(self, rows: Sequence[LongTermRow]) -> None:
        for row in rows:
            if row.memory_id in self._pos:
                self.remove(row.memory_id)
            if row.embedding is None or row.deleted:
                continue
            self._signatures[row.memory_id] = _signature(row)
            i = len(self.ids)
            self._grow(i + 1)
            self.ids.append(row.memory_id)
            self._pos[row.memory_id] = i
            self._matrix[i] = np.frombuffer(row.embedding, dtype=np.float32)
            self._alive[i] = True
            terms = Counter(row.lex_terms.split())
            length = float(sum(terms.values()))
            self._lengths[i] = length
            self._total_length += length
            for term, tf in terms.items():
                docs, tfs = self._postings.setdefault(term, ([], []))
                docs.append(i)
                tfs.append(tf)
                self._arrays.pop(term, None)
            self._types.append(row.memory_type)
            self._domains.append(row.domain)
            self._created.append(row.created)
            self._metadata.append(row.metadata)
            self._live += 1

    def remove(self, memory_id: str) -> None:
        i = self._pos.pop(memory_id, None)
        self._signatures.pop(memory_id, None)
        if i is not None and self._alive[i]:
            self._alive[i] = False
            self._total_length -= float(self._lengths[i])
            self._live -= 1
        if len(self.ids) - self._live > max(256, self._live):
            self._compact()

    def set_metadata(self, row: LongTermRow) -> None:
        """Update what filters read (type, domain, metadata) without touching the vectors."""
        i = self._pos.get(row.memory_id)
        if i is not None:
            self._types[i], self._domains[i], self._metadata[i] = row.memory_type, row.domain, row.metadata
            self._signatures[row.memory_id] = _signature(row)

    def apply(self, rows: Sequence[LongTermRow], generation: int) -> int:
        """Bring the index to `generation` given the rows changed since its own (deleted ones
        included). Returns how many rows changed what search reads."""
        changed = 0
        for row in rows:
            known = self._signatures.get(row.memory_id)
            if row.deleted or row.embedding is None:
                if row.memory_id in self._pos:
                    self.remove(row.memory_id)
                    changed += 1
                continue
            signature = _signature(row)
            if known == signature:
                continue
            if known is not None and known[:2] == signature[:2]:
                self.set_metadata(row)  # same text and vector model: only filters changed
            else:
                self.add([row])
            changed += 1
        self.generation = max(self.generation, generation)
        return changed

    def _compact(self) -> None:
        """Drop the deleted rows from the arrays and postings."""
        n = len(self.ids)
        keep = np.flatnonzero(self._alive[:n])
        new_pos = np.full(n, -1, dtype=np.int64)
        new_pos[keep] = np.arange(len(keep))
        capacity = max(16, len(keep))
        matrix = np.zeros((capacity, self._dims), dtype=np.float32)
        matrix[: len(keep)] = self._matrix[keep]
        self._matrix = matrix
        self._alive = np.zeros(capacity, dtype=bool)
        self._alive[: len(keep)] = True
        lengths = np.zeros(capacity, dtype=np.float32)
        lengths[: len(keep)] = self._lengths[keep]
        self._lengths = lengths
        self.ids = [self.ids[i] for i in keep]
        self._pos = {memory_id: i for i, memory_id in enumerate(self.ids)}
        self._types = [self._types[i] for i in keep]
        self._domains = [self._domains[i] for i in keep]
        self._created = [self._created[i] for i in keep]
        self._metadata = [self._metadata[i] for i in keep]
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for term, (docs, tfs) in self._postings.items():
            kept = [(int(new_pos[d]), tf) for d, tf in zip(docs, tfs, strict=True) if new_pos[d] >= 0]
            if kept:
                postings[term] = ([d for d, _ in kept], [tf for _, tf in kept])
        self._postings = postings
        self._arrays = {}

    def _mask(self, where: LongTermFilter) -> np.ndarray:
        n = len(self.ids)
        mask = self._alive[:n].copy()
        if where.memory_types:
            mask &= np.fromiter((t in where.memory_types for t in self._types), bool, n)
        if where.domains:
            mask &= np.fromiter((d in where.domains for d in self._domains), bool, n)
        if where.created_after is not None or where.created_before is not None:
            created = np.asarray(self._created, dtype=np.float64)
            if where.created_after is not None:
                mask &= created >= where.created_after
            if where.created_before is not None:
                mask &= created < where.created_before
        if where.metadata:
            wanted = where.metadata
            mask &= np.fromiter((metadata_matches(m, wanted) for m in self._metadata), bool, n)
        return mask

    def search(
        self, vector: np.ndarray | None, terms: Sequence[str], k: int, where: LongTermFilter
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """(dense, lexical) candidates, each best first, at most k each."""
        return self.dense(vector, k, where) if vector is not None else [], self.lexical(terms, k, where)

    def _filter(self, where: LongTermFilter) -> np.ndarray:
        n = len(self.ids)
        return self._alive[:n] if where == LongTermFilter() else self._mask(where)

    @traced("vector_search")
    def dense(self, vector: np.ndarray, k: int, where: LongTermFilter) -> list[tuple[str, float]]:
        """Exact top-k by cosine (unit vectors: a dot product), best first."""
        n = len(self.ids)
        if n == 0 or self._live == 0:
            return []
        sims = self._matrix[:n] @ vector.astype(np.float32)
        sims[~self._filter(where)] = -np.inf
        return self._top(sims, k)

    def lexical(self, terms: Sequence[str], k: int, where: LongTermFilter) -> list[tuple[str, float]]:
        """BM25 top-k over the scope's postings, best first. Needs no query vector, so the
        engine runs it while the query is being embedded."""
        n = len(self.ids)
        if n == 0 or self._live == 0 or not terms:
            return []
        scores = np.zeros(n, dtype=np.float32)
        touched = False
        average = self._total_length / self._live if self._live else 1.0
        for term, count in Counter(terms).items():
            arrays = self._arrays.get(term)
            if arrays is None:
                posting = self._postings.get(term)
                if posting is None:
                    continue
                arrays = self._arrays[term] = (np.asarray(posting[0], dtype=np.int64),
                                               np.asarray(posting[1], dtype=np.float32))
            docs, tfs = arrays
            df = int(self._alive[docs].sum())
            if df == 0:
                continue
            idf = math.log(1.0 + (self._live - df + 0.5) / (df + 0.5))
            # The length norm only at this term's documents (not over the whole scope).
            norm = BM25_K1 * (1 - BM25_B + BM25_B * self._lengths[docs] / max(average, 1e-9))
            scores[docs] += count * idf * tfs * (BM25_K1 + 1) / (tfs + norm)
            touched = True
        if not touched:
            return []
        scores[~(self._filter(where) & (scores > 0))] = -np.inf
        return self._top(scores, k)

    def _top(self, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(self.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])]


def _signature(row: LongTermRow) -> tuple[Any, ...]:
    return (row.content_hash, row.embedding_model, row.lex_terms, row.memory_type, row.domain, row.created,
            json.dumps(row.metadata, sort_keys=True, ensure_ascii=False))

