"""mem0 running in-process: its configuration, the embedder adapter, and serialised access.

Embedded by default and fully offline: embedded Qdrant and mem0's history database under the
data dir, MiniLM run with numpy, and no LLM (memories are stored as given, `infer=False`). With
an OpenAI-compatible LLM configured, mem0 extracts facts (`infer=True`). Telemetry is switched
off before mem0 is imported, and mem0's own files stay inside the data dir.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentscope_memory.errors import DeadlineExceededError, UnavailableError

log = logging.getLogger("agentscope_memory.long_term")

COLLECTION = "agentscope_memory"
# Tenants share one collection; every point carries its tenant in the payload and every query
# filters on it.
TENANT_KEY = "asm_tenant"


@dataclass
class Mem0Config:
    """Where mem0 keeps its data and which models it uses."""

    data_dir: Path
    # "minilm" (embedded, default) or "openai" (any OpenAI-compatible embeddings endpoint).
    embedder: Literal["minilm", "openai"] = "minilm"
    embedder_base_url: str | None = None
    embedder_model: str = "text-embedding-3-small"
    embedder_api_key: str | None = None
    embedder_dims: int = 384
    # An OpenAI-compatible chat endpoint enables mem0's fact extraction (infer=True).
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str | None = None
    llm_timeout_s: float = 60.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def infer(self) -> bool:
        return self.llm_base_url is not None

    @property
    def mem0_dir(self) -> Path:
        return self.data_dir / "mem0"


class _MiniLMForMem0:
    """mem0's embedder interface over `MiniLMEmbedder` (constructed without mem0's factory)."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self.config = None

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self._embedder.embed([text])[0].tolist()

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        return [v.tolist() for v in self._embedder.embed(list(texts))]


def _mem0_config(config: Mem0Config) -> dict[str, Any]:
    dims = 384 if config.embedder == "minilm" else config.embedder_dims
    vector = {"provider": "qdrant", "config": {
        "collection_name": COLLECTION, "embedding_model_dims": dims,
        "path": str(config.mem0_dir / "qdrant"), "on_disk": True}}
    # mem0 builds an OpenAI client at construction even when it never calls it, and that
    # client refuses to exist without a key; a placeholder satisfies it without any request.
    llm: dict[str, Any] = {"api_key": config.llm_api_key or "unused-no-llm-configured", "model": config.llm_model}
    if config.llm_base_url:
        llm["openai_base_url"] = config.llm_base_url
    embedder: dict[str, Any] = {"api_key": config.embedder_api_key or "unused", "embedding_dims": dims}
    if config.embedder == "openai":
        embedder["model"] = config.embedder_model
        if config.embedder_base_url:
            embedder["openai_base_url"] = config.embedder_base_url
    return {
        "vector_store": vector,
        "embedder": {"provider": "openai", "config": embedder},
        "llm": {"provider": "openai", "config": llm},
        "history_db_path": str(config.mem0_dir / "history.db"),
        **config.extra,
    }


class Mem0Backend:
    """One `mem0.AsyncMemory` for the process, opened lazily, every call serialised.

    Embedded Qdrant is not safe for concurrent writers (it fails with "cannot start a
    transaction within a transaction"), so calls go one at a time through a lock.
    """

    def __init__(self, config: Mem0Config, embedder: Any | None = None) -> None:
        self.config = config
        self._embedder = embedder
        self._memory: Any = None
        self._open_lock = asyncio.Lock()
        self._call_lock = asyncio.Lock()

    async def open(self) -> Any:
        async with self._open_lock:
            if self._memory is None:
                self._memory = await asyncio.to_thread(self._build)
            return self._memory

    def _build(self) -> Any:
        self.config.mem0_dir.mkdir(parents=True, exist_ok=True)
        # Read by mem0 at import time: no telemetry, and its files inside our data dir.
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ.setdefault("MEM0_DIR", str(self.config.mem0_dir))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from mem0 import AsyncMemory
        from mem0.configs.base import MemoryConfig

        logging.getLogger("mem0").setLevel(logging.WARNING)
        # Optional mem0 extras we leave out on purpose (spaCy lemmas; BM25 via fastembed, which
        # would download a model): their "not installed" warnings are expected, not actionable.
        for name in ("mem0.utils.spacy_models", "mem0.vector_stores.qdrant"):
            logging.getLogger(name).setLevel(logging.ERROR)
        memory = AsyncMemory(MemoryConfig(**_mem0_config(self.config)))
        if self.config.embedder == "minilm":
            if self._embedder is None:
                from agentscope_memory.long_term.embedder import MiniLMEmbedder

                self._embedder = MiniLMEmbedder()
            memory.embedding_model = _MiniLMForMem0(self._embedder)
        return memory

    async def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        memory = await self.open()
        async with self._call_lock:
            try:
                return await getattr(memory, method)(*args, **kwargs)
            except (TimeoutError, asyncio.TimeoutError) as exc:
                raise DeadlineExceededError(f"long-term memory {method} timed out: {exc}") from exc
            except (ValueError, KeyError, TypeError):
                raise
            except Exception as exc:  # mem0 raises many kinds for a failing backend
                name = type(exc).__name__
                if "Connection" in name or "APIError" in name or "LLMError" in name or "Timeout" in name:
                    raise UnavailableError(f"long-term memory backend failed in {method}: {name}: {exc}") from exc
                raise

    async def close(self) -> None:
        async with self._open_lock:
            memory, self._memory = self._memory, None
        if memory is not None:
            client = getattr(getattr(memory, "vector_store", None), "client", None)
            if client is not None and hasattr(client, "close"):
                await asyncio.to_thread(client.close)
