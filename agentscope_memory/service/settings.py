"""`ServiceSettings`: everything the memory service is built from, whatever the transport.

The server's `Settings` extends these with how to listen (host, port, TLS, API keys, metrics)
and reads them from flags, the environment and a config file; a Python program using the
service in-process constructs them directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from agentscope_memory.long_term.mem0.backend import Mem0Config
from agentscope_memory.short_term.manager import Limits

MiB = 1024 * 1024


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


class ServiceSettings(BaseModel):
    """Storage, limits, the LLM endpoint and long-term memory. Defaults are the embedded ones:
    sqlite under ./data, no LLM (deterministic offline fallbacks), mem0 with MiniLM."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # Storage.
    data_dir: Path = Path("./data")
    store: Literal["sqlite", "postgres", "memory"] = "sqlite"
    postgres_dsn: SecretStr | None = Field(None, description="e.g. postgresql://user:pw@host:5432/db")
    sqlite_synchronous: Literal["NORMAL", "FULL", "EXTRA"] = "NORMAL"
    sessions_dir: Path | None = Field(None, description="JsonSession root; default <data_dir>/sessions")

    # Limits.
    max_message_bytes: int = Field(4 * MiB, gt=0)
    max_batch_messages: int = Field(1000, gt=0)
    max_batch_bytes: int = Field(32 * MiB, gt=0)
    max_page_bytes: int = Field(4 * MiB, gt=0)

    # The OpenAI-compatible chat endpoint used for summaries and fact extraction; unset means
    # none (AutoContext then uses its extractive fallback, mem0 stores raw text).
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(2, ge=0)

    # Long-term memory (mem0 in-process). Embedded default: MiniLM with numpy, embedded Qdrant
    # under <data_dir>/mem0, and fact extraction only when llm_base_url is set.
    long_term_enabled: bool = True
    long_term_preload: bool = Field(True, description="load mem0 and the embedder at start, in the background")
    # Embedded: minilm (English), e5-small or use-multilingual (Chinese and English; the
    # `multilingual` extra, long_term/embedders.py); or any OpenAI-compatible endpoint.
    long_term_embedder: Literal["minilm", "e5-small", "use-multilingual", "openai"] = "minilm"
    long_term_embedder_base_url: str | None = None
    long_term_embedder_model: str = "text-embedding-3-small"
    long_term_embedder_api_key: SecretStr | None = None
    long_term_embedder_dims: int = Field(1536, gt=0)
    long_term_vector_store: Literal["qdrant", "qdrant_server", "pgvector"] = "qdrant"
    long_term_qdrant_url: str | None = None
    long_term_qdrant_api_key: SecretStr | None = None
    long_term_pgvector_dsn: SecretStr | None = None

    @model_validator(mode="after")
    def _postgres_needs_dsn(self) -> "ServiceSettings":
        if self.store == "postgres" and self.postgres_dsn is None:
            raise ValueError("store=postgres needs postgres_dsn")
        return self

    def mem0_config(self) -> Mem0Config:
        embedder = self.long_term_embedder
        if embedder not in ("minilm", "openai"):
            raise ValueError(f"long_term_embedder={embedder} is not available to the mem0 engine")
        return Mem0Config(
            data_dir=self.data_dir,
            embedder="openai" if embedder == "openai" else "minilm",
            embedder_base_url=self.long_term_embedder_base_url,
            embedder_model=self.long_term_embedder_model,
            embedder_api_key=_secret(self.long_term_embedder_api_key),
            embedder_dims=self.long_term_embedder_dims,
            vector_store=self.long_term_vector_store,
            qdrant_url=self.long_term_qdrant_url,
            qdrant_api_key=_secret(self.long_term_qdrant_api_key),
            pgvector_dsn=_secret(self.long_term_pgvector_dsn),
            llm_base_url=self.llm_base_url,
            llm_model=self.llm_model,
            llm_api_key=_secret(self.llm_api_key),
            llm_timeout_s=self.llm_timeout_s,
        )

    def sessions_root(self) -> Path:
        return self.sessions_dir or self.data_dir / "sessions"

    def limits(self) -> Limits:
        return Limits(
            max_message_bytes=self.max_message_bytes,
            max_batch_messages=self.max_batch_messages,
            max_batch_bytes=self.max_batch_bytes,
            max_page_bytes=self.max_page_bytes,
        )
