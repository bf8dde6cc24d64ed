"""Running the one-off move of the earlier mem0 layout (`long_term/hybrid/migrate.py`) on
request, into the store `settings` name, instead of at a server's start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentscope_memory.long_term.hybrid.migrate import MARKER, Mem0Migration, Progress
from agentscope_memory.service.settings import ServiceSettings
from agentscope_memory.store import NO_TENANT, open_store


@dataclass(frozen=True)
class Mem0Moved:
    # Memories stored by this run.
    moved: int
    # The store's record of a migration done before (nothing was read then), else None.
    done_before: str | None = None


async def migrate_mem0(settings: ServiceSettings, mem0_dir: Path, progress: Progress | None = None) -> Mem0Moved:
    """Move the memories under `mem0_dir` (`qdrant/` and `history.db`) into the configured store,
    embedding with the configured embedder where a vector is of another model. Raises
    ValueError when `mem0_dir` holds no such data."""
    from agentscope_memory.long_term.hybrid import HybridEngine, embedder_factory
    from agentscope_memory.long_term.importance import HeuristicScorer
    from agentscope_memory.long_term.router import HeuristicRouter

    migration = Mem0Migration(mem0_dir, progress)
    if not migration.has_data():
        raise ValueError(f"{mem0_dir} holds no mem0 data of an earlier version (no qdrant/collection/agentscope_memory)")
    store = open_store(settings.store, settings.data_dir, sqlite_synchronous=settings.sqlite_synchronous,
                       postgres_dsn=settings.postgres_dsn.get_secret_value() if settings.postgres_dsn else None)
    try:
        done = await store.run(NO_TENANT, lambda tx: tx.meta_get(MARKER), write=False)
        if done:
            return Mem0Moved(0, done)
        # Only the embedder is used: scoring and routing have nothing to do in a migration.
        engine = HybridEngine(store, embedder_factory(settings), scorer=HeuristicScorer(), router=HeuristicRouter(),
                              in_database=settings.store == "postgres")
        await engine.open()
        try:
            return Mem0Moved(await migration(engine))
        finally:
            await engine.close()
    finally:
        await store.close()
