"""The server's own long-term engine: records in the store, dense + lexical recall per scope,
ranked by the seed formula (see `engine.py`, `ranking.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from agentscope_memory.long_term.hybrid.embedders import Embedder, OpenAiEmbedder
from agentscope_memory.long_term.hybrid.engine import SCORE_JOB, EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.ranking import RANKINGS, RankOptions, Ranking, Scores

if TYPE_CHECKING:
    from agentscope_memory.service.settings import ServiceSettings

__all__ = [
    "RANKINGS", "SCORE_JOB", "Embedder", "EngineSettings", "HybridEngine", "OpenAiEmbedder", "RankOptions",
    "Ranking", "Scores", "embedder_factory",
]


def embedder_factory(settings: ServiceSettings) -> Callable[[], Embedder]:
    """What builds the configured embedder (called once, on a thread, when the engine opens)."""
    if settings.long_term_embedder == "openai":
        if not settings.long_term_embedder_base_url:
            raise ValueError("long_term_embedder=openai needs long_term_embedder_base_url")
        base_url = settings.long_term_embedder_base_url
        key = settings.long_term_embedder_api_key.get_secret_value() if settings.long_term_embedder_api_key else None
        return lambda: OpenAiEmbedder(base_url, settings.long_term_embedder_model, key,
                                      settings.long_term_embedder_dims, settings.llm_timeout_s)

    name = settings.long_term_embedder
    if name in ("e5-small", "use-multilingual", "minilm+e5"):
        from agentscope_memory.long_term.embedders import load_embedder

        return lambda: load_embedder(name)

    def minilm() -> Embedder:
        from agentscope_memory.long_term.embedder import MiniLMEmbedder

        embedder = MiniLMEmbedder()
        embedder.model_id = "sentence-transformers/all-MiniLM-L6-v2"  # type: ignore[attr-defined]
        return embedder  # type: ignore[return-value]

    return minilm
