"""Moving the memories of earlier versions (mem0 with embedded Qdrant under `<data_dir>/mem0`)
into the store, once.

Every point becomes a row with the same id, tenant, scope, text, hash, metadata, role and times,
and its vector when it came from the same model (MiniLM, 384 dimensions; otherwise the text is
embedded again). mem0's history of each migrated memory comes along. The old directory is left
as it was (nothing is lost if anything goes wrong), and a marker in the store's `meta` table
says the migration is done. An interrupted migration starts over and skips what it already
moved (by id), so running it twice stores nothing twice.

Memories deleted before the migration have no point any more, and mem0's history does not say
whose they were: their history stays in the old directory only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from agentscope_memory.long_term.engine import Scope
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.short_term.manager import DEFAULT_TENANT
from agentscope_memory.store.base import NO_TENANT, LongTermRow, Tx

if TYPE_CHECKING:
    from agentscope_memory.long_term.hybrid.engine import HybridEngine

log = logging.getLogger("agentscope_memory.long_term")

MARKER = "long_term.migrated_mem0"
COLLECTION = "agentscope_memory"
MEM0_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
_PAYLOAD_KEYS = {"asm_tenant", "user_id", "agent_id", "run_id", "role", "data", "hash", "created_at",
                 "updated_at", "text_lemmatized", "actor_id"}
_BATCH = 500


def _time(value: Any) -> float:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except (TypeError, ValueError):
        return 0.0


# `progress(points_done, points_total)`, after each batch of points read.
Progress = Callable[[int, int], None]


class Mem0Migration:
    def __init__(self, mem0_dir: Path, progress: Progress | None = None) -> None:
        self.mem0_dir = Path(mem0_dir)
        self.progress = progress

    def has_data(self) -> bool:
        """Whether `mem0_dir` holds the earlier layout's collection."""
        return (self.mem0_dir / "qdrant" / "collection" / COLLECTION).exists()

    async def __call__(self, engine: HybridEngine) -> int:
        qdrant_dir = self.mem0_dir / "qdrant"
        if not self.has_data():
            return 0
        store = engine._store
        if await store.run(NO_TENANT, lambda tx: tx.meta_get(MARKER), write=False):
            return 0
        history = self._history()
        from qdrant_client import QdrantClient

        client = QdrantClient(path=str(qdrant_dir))
        moved = read = 0
        try:
            total = client.count(COLLECTION, exact=True).count if self.progress else 0
            offset = None
            while True:
                points, offset = client.scroll(COLLECTION, limit=_BATCH, offset=offset, with_payload=True, with_vectors=True)
                moved += await self._move(engine, points, history)
                read += len(points)
                if self.progress:
                    self.progress(read, total)
                if offset is None:
                    break
        finally:
            client.close()
        await store.run(NO_TENANT, lambda tx: tx.meta_put(MARKER, json.dumps({"memories": moved})))
        log.info("migrated long-term memories from mem0", extra={"fields": {"count": moved, "from": str(self.mem0_dir)}})
        return moved

    def _history(self) -> dict[str, list[tuple[Any, ...]]]:
        path = self.mem0_dir / "history.db"
        out: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
        if not path.exists():
            return out
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT memory_id, event, old_memory, new_memory, created_at, updated_at FROM history"
                " ORDER BY COALESCE(updated_at, created_at), rowid"
            ).fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            conn.close()
        for row in rows:
            out[str(row[0])].append(row)
        return out

    async def _move(self, engine: HybridEngine, points: list[Any], history: dict[str, list[tuple[Any, ...]]]) -> int:
        # Runs inside `engine.open()`: the embedder is loaded, the engine not open yet.
        embedder = engine._embedder
        assert embedder is not None
        model = engine.embedding_model
        dims = embedder.dimensions
        by_tenant: dict[str, list[LongTermRow]] = defaultdict(list)
        for point in points:
            payload = dict(point.payload or {})
            text = str(payload.get("data") or "")
            if not text:
                continue
            scope = Scope(str(payload.get("agent_id") or ""), str(payload.get("user_id") or ""), str(payload.get("run_id") or ""))
            created = _time(payload.get("created_at"))
            updated = _time(payload.get("updated_at")) or created
            metadata = {k: v for k, v in payload.items() if k not in _PAYLOAD_KEYS}
            source: dict[str, Any] = {"migrated_from": "mem0"}
            if payload.get("role"):
                source["role"] = payload["role"]
            vector = point.vector if isinstance(point.vector, list) else None
            same_model = model == MEM0_MODEL and vector is not None and len(vector) == dims
            by_tenant[str(payload.get("asm_tenant") or DEFAULT_TENANT)].append(LongTermRow(
                memory_id=str(point.id), scope_key=scope_key(scope), agent_name=scope.agent_name,
                user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                metadata=metadata, memory_type="message", created=created, updated=updated, last_accessed=updated,
                content_hash=str(payload.get("hash") or content_hash(text)),
                source=source,
                embedding=np.asarray(vector, dtype=np.float32).tobytes() if same_model else None,
                embedding_model=model if same_model else "",
            ))
        moved = 0
        for tenant, rows in by_tenant.items():
            stale = [r for r in rows if r.embedding is None]
            if stale:
                vectors = await asyncio.to_thread(embedder.embed, [r.text for r in stale])
                for row, vec in zip(stale, vectors, strict=True):
                    row.embedding, row.embedding_model = np.asarray(vec, dtype=np.float32).tobytes(), model

            def write(tx: Tx, rows: list[LongTermRow] = rows) -> int:
                present = {r.memory_id for r in tx.ltm_get_many([r.memory_id for r in rows])}
                fresh = [r for r in rows if r.memory_id not in present]
                for row in fresh:
                    tx.ltm_register_scope(row.scope_key, row.agent_name, row.user_id, row.run_name, row.created)
                inserted = set(tx.ltm_insert(fresh))
                for row in fresh:
                    if row.memory_id not in inserted:
                        continue
                    for _, event, old, new, created, updated in history.get(row.memory_id, []):
                        tx.ltm_history_add(row.memory_id, str(event), old, new, {"migrated_from": "mem0"},
                                           _time(updated) or _time(created))
                return len(inserted)

            moved += await engine._store.run(tenant, write)
        return moved
