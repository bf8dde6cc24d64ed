"""`ServiceSettings`: everything the memory service is built from, whatever the transport.

The server's `Settings` extends these with how to listen (host, port, TLS, API keys, metrics)
and reads them from flags, the environment and a config file; a Python program using the
service in-process constructs them directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from agentscope_memory.agent_state import AgentStateLimits
from agentscope_memory.agent_state.engine import DEFAULT_TOMBSTONE_RETENTION_S, MAX_STORABLE_VALUE_BYTES
from agentscope_memory.long_term.mem0.backend import Mem0Config
from agentscope_memory.long_term.memory_types import REFLECTION, MemoryType
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES
from agentscope_memory.short_term.manager import Limits

MiB = 1024 * 1024


def http_url(value: str | None) -> str | None:
    """An endpoint setting: an absolute http(s) URL, or None. Checked at start, so a URL without
    its scheme (`localhost:8000/v1`) stops the server instead of failing every call later."""
    if value is None:
        return None
    parsed = urlsplit(value.strip())
    if parsed.scheme.lower() not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"must be an http:// or https:// URL with a host, not {value[:100]!r}")
    return value.strip()


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
    # Coherent caching (MemoryService.WatchMessages): clients that watch a memory answer reads
    # from their own copy while their lease is fresh; every write waits until the watchers took
    # in the change (or their leases ran out). Embedded stores only (this process must see
    # every write): ignored with store=postgres. Turn it off when another process writes the
    # same sqlite file (local mode).
    coherent_cache: bool = True
    coherent_cache_lease_s: float = Field(2.0, gt=0, le=60)

    # Limits.
    # Both default to 4 MiB less 64 KiB: a page (and so a single message of the largest size)
    # fits under gRPC's default 4 MiB receive limit with room for the page's envelope.
    max_message_bytes: int = Field(DEFAULT_PAGE_BYTES, gt=0)
    max_batch_messages: int = Field(1000, gt=0)
    max_batch_bytes: int = Field(32 * MiB, gt=0)
    max_page_bytes: int = Field(DEFAULT_PAGE_BYTES, gt=0)

    # The key page tokens and etags are signed with. Unset: generated once and kept in the
    # store, so it survives restarts and replicas sharing one database agree on it. Set it
    # (alike on every replica) to rotate it, or for replicas that do not share a database.
    page_token_secret: SecretStr | None = None
    # AgentScope-Java 2.x agent state (AgentStateService). A value sent or read whole
    # (PutValue, GetValue) must fit one message: at most max_state_value_bytes. A larger value,
    # up to max_state_streamed_value_bytes, moves in pieces (StreamPutValue, StreamGetValue) and
    # is held whole in the server's memory while it is written or read.
    max_state_value_bytes: int = Field(4 * MiB - 64 * 1024, gt=0, le=4 * MiB - 64 * 1024)
    max_state_streamed_value_bytes: int = Field(64 * MiB, gt=0, le=MAX_STORABLE_VALUE_BYTES)
    max_state_list_items: int = Field(100_000, gt=0)
    max_state_list_bytes: int = Field(256 * MiB, gt=0)
    # A deleted value's or list's version is remembered this long (so the key saved again goes
    # on from it), then folded into its tenant's version floor (so it still never repeats).
    agent_state_tombstone_retention_s: float = Field(
        DEFAULT_TOMBSTONE_RETENTION_S, ge=0, allow_inf_nan=False,
        description="forget deleted agent-state keys' versions after (they still never repeat); 0 = never")

    # The OpenAI-compatible chat endpoint used for summaries and fact extraction; unset means
    # none (AutoContext then uses its extractive fallback, mem0 stores raw text).
    llm_base_url: str | None = None
    llm_model: str = "gpt-4o-mini"
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(2, ge=0)

    # Long-term memory: the server's own engine (`long_term/hybrid/`) in the configured store.
    # Embedded default: MiniLM with numpy; importance scoring and routing by offline heuristics,
    # or by the LLM when llm_base_url is set.
    long_term_enabled: bool = True
    long_term_preload: bool = Field(True, description="load the embedder at start, in the background")
    # Embedded: minilm (English), e5-small or use-multilingual (Chinese and English; the
    # `multilingual` extra, long_term/embedders.py), minilm+e5 (both, by script); or any
    # OpenAI-compatible endpoint. minilm+e5 by default: on the labelled recall set the shipped
    # ranking reached recall@5 en .877, zh .912 with it, against en .814, zh .912 with e5-small
    # alone and en .863 (dense MiniLM), zh .23 with MiniLM; see README "Long-term memory".
    long_term_embedder: Literal["minilm", "e5-small", "use-multilingual", "minilm+e5", "openai"] = "minilm+e5"
    long_term_embedder_base_url: str | None = None
    long_term_embedder_model: str = "text-embedding-3-small"
    long_term_embedder_api_key: SecretStr | None = None
    long_term_embedder_dims: int = Field(1536, gt=0)
    # Ranking defaults (every search may override them): S_final = alpha*semantic +
    # dense_n^2 * (beta*decay_rate^(hours since last access) + gamma*importance + delta*frequency);
    # the `seed` ranking drops the dense_n^2 (long_term/hybrid/ranking.py says why).
    long_term_alpha: float = Field(0.5, ge=0, le=1)
    long_term_beta: float = Field(0.2, ge=0, le=1)
    long_term_gamma: float = Field(0.3, ge=0, le=1)
    long_term_delta: float = Field(0.0, ge=0, le=1, description="weight of the access-frequency term")
    long_term_decay_rate: float = Field(0.99, gt=0, le=1, description="per hour since last access")
    long_term_dense_weight: float = Field(0.8, ge=0, le=1, description="dense share of S_semantic")
    long_term_top_k_semantic: int = Field(50, ge=1, le=1000)
    long_term_top_k: int = Field(10, ge=1, le=1000)
    long_term_index_max_vectors: int = Field(
        2_000_000, ge=0,
        description="memories the in-memory scope indexes may hold in all (least recently searched scopes are"
                    " dropped beyond it; a larger scope is searched in PostgreSQL, or indexed per search on sqlite)")
    # Background scoring of every recorded round (importance, domain, fact).
    long_term_scoring: bool = True
    long_term_fact_threshold: float = Field(0.7, ge=0, le=1)
    long_term_fact_extraction: Literal["mem0", "scorer"] = Field(
        "mem0", description="with an LLM: a round's facts from mem0's extraction (shown the scope's similar"
                            " memories), or the scorer's one fact")
    # Route queries by intent on Retrieve / the tools / BeginTurn (off: AgentScope parity).
    long_term_route_queries: bool = False
    # Lifecycle: reflection, consolidation and compressed recall (agentscope_memory/lifecycle/).
    lifecycle_reflection_enabled: bool = Field(True, description="check for a reflection after facts are written")
    lifecycle_reflection_importance_threshold: float = Field(4.0, ge=0, allow_inf_nan=False)
    lifecycle_reflection_min_facts: int = Field(2, ge=1, le=50)
    lifecycle_reflection_cooldown_s: float = Field(3600.0, ge=0, allow_inf_nan=False)
    lifecycle_consolidation_threshold: int = Field(150, ge=0, description="consolidate a scope holding more unpinned facts")
    lifecycle_consolidation_similarity: float = Field(0.75, ge=-1, le=1)
    lifecycle_consolidation_min_cluster_size: int = Field(3, ge=2, le=50)
    lifecycle_consolidation_fidelity_threshold: float = Field(0.5, ge=0, le=1)
    # Intervals of at least a second: the scheduler ticks once a second at most, and numbers its
    # runs `now // interval` in a 64-bit column (1e-12 overflowed it and no run ever started).
    lifecycle_consolidation_interval_s: float | None = Field(
        None, ge=1, allow_inf_nan=False, description="look for scopes to consolidate this often; unset = only on request")
    # Forgetting (Ebbinghaus): retention = base^(hours since last recall / (24 * factor^recalls))
    # * (0.5 + 0.5 * importance); below the threshold a memory is soft-deleted. Scheduled every
    # `lifecycle_forgetting_interval_s` (unset: only on request, the default).
    lifecycle_forgetting_interval_s: float | None = Field(None, ge=1, allow_inf_nan=False, description="run forgetting this often; unset = off")
    lifecycle_forgetting_base_retention: float = Field(0.9, gt=0, lt=1)
    lifecycle_forgetting_strengthening_factor: float = Field(1.5, ge=1, allow_inf_nan=False)
    lifecycle_forgetting_threshold: float = Field(0.1, ge=0, le=1)
    # A wrong type is a configuration error at start, not a traceback from the forgetter's check.
    lifecycle_forgetting_excluded_types: list[MemoryType] = Field(default_factory=lambda: [REFLECTION])
    lifecycle_purge_after_s: float = Field(30 * 86400.0, ge=0, allow_inf_nan=False, description="purge soft-deleted memories after; 0 = never")

    @field_validator("llm_base_url", "long_term_embedder_base_url")
    @classmethod
    def _endpoints_are_urls(cls, value: str | None) -> str | None:
        return http_url(value)

    @model_validator(mode="after")
    def _postgres_needs_dsn(self) -> "ServiceSettings":
        if self.store == "postgres" and self.postgres_dsn is None:
            raise ValueError("store=postgres needs postgres_dsn")
        return self

    @model_validator(mode="after")
    def _streamed_values_not_smaller(self) -> "ServiceSettings":
        if self.max_state_streamed_value_bytes < self.max_state_value_bytes:
            raise ValueError("max_state_streamed_value_bytes must not be smaller than max_state_value_bytes")
        return self

    def mem0_config(self) -> Mem0Config:
        """Where the mem0 engine of earlier versions kept its data (migrated once)."""
        # Earlier versions embedded with MiniLM or an OpenAI endpoint; vectors of another model
        # are embedded again by the engine (each row names its embedding model).
        return Mem0Config(
            data_dir=self.data_dir,
            embedder="openai" if self.long_term_embedder == "openai" else "minilm",
            embedder_base_url=self.long_term_embedder_base_url,
            embedder_model=self.long_term_embedder_model,
            embedder_api_key=_secret(self.long_term_embedder_api_key),
            embedder_dims=self.long_term_embedder_dims,
            llm_base_url=self.llm_base_url,
            llm_model=self.llm_model,
            llm_api_key=_secret(self.llm_api_key),
            llm_timeout_s=self.llm_timeout_s,
        )

    def sessions_root(self) -> Path:
        return self.sessions_dir or self.data_dir / "sessions"

    def agent_state_limits(self) -> AgentStateLimits:
        return AgentStateLimits(
            max_value_bytes=self.max_state_value_bytes,
            max_streamed_value_bytes=self.max_state_streamed_value_bytes,
            max_list_items=self.max_state_list_items,
            max_list_bytes=self.max_state_list_bytes,
            # Headroom for the response's own fields below gRPC's 4 MiB.
            max_page_bytes=min(self.max_page_bytes, 4 * MiB) - 64 * 1024,
        )

    def limits(self) -> Limits:
        return Limits(
            max_message_bytes=self.max_message_bytes,
            max_batch_messages=self.max_batch_messages,
            max_batch_bytes=self.max_batch_bytes,
            max_page_bytes=self.max_page_bytes,
        )
