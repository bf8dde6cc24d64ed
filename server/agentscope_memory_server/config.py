"""Server configuration: flags > environment (`AGENTSCOPE_MEMORY_*`) > config file > defaults."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from agentscope_memory.memory.manager import Limits

if TYPE_CHECKING:
    from agentscope_memory.long_term.mem0_store import LongTermConfig

MiB = 1024 * 1024


class Settings(BaseSettings):
    """Everything the server can be told. Printed at start with secrets masked."""

    model_config = SettingsConfigDict(
        env_prefix="AGENTSCOPE_MEMORY_", extra="forbid", validate_default=True
    )

    # Where and how to listen.
    host: str = "127.0.0.1"
    port: int = Field(50051, ge=0, le=65535, description="0 picks a free port")
    port_file: Path | None = Field(None, description="write the bound port here once listening")
    tls_cert_file: Path | None = Field(None, description="PEM certificate chain; with tls_key_file enables TLS")
    tls_key_file: Path | None = Field(None, description="PEM private key")

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
    grpc_max_receive_bytes: int = Field(64 * MiB, gt=0)

    # Authentication: API key -> tenant. Empty means no authentication (tenant "default").
    api_keys: dict[str, str] = Field(default_factory=dict)

    # Operations.
    metrics_port: int | None = Field(None, ge=0, le=65535, description="Prometheus /metrics port; unset = off")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    shutdown_grace_s: float = Field(10.0, ge=0)

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
    long_term_embedder: Literal["minilm", "openai"] = "minilm"
    long_term_embedder_base_url: str | None = None
    long_term_embedder_model: str = "text-embedding-3-small"
    long_term_embedder_api_key: SecretStr | None = None
    long_term_embedder_dims: int = Field(1536, gt=0)
    long_term_vector_store: Literal["qdrant", "qdrant_server", "pgvector"] = "qdrant"
    long_term_qdrant_url: str | None = None
    long_term_qdrant_api_key: SecretStr | None = None
    long_term_pgvector_dsn: SecretStr | None = None

    @field_validator("api_keys")
    @classmethod
    def _keys_and_tenants_valid(cls, value: dict[str, str]) -> dict[str, str]:
        from agentscope_memory.ids import check_id

        for key, tenant in value.items():
            if len(key) < 16:
                raise ValueError("API keys must be at least 16 characters")
            check_id(tenant, "api_keys tenant")
        return value

    @model_validator(mode="after")
    def _postgres_needs_dsn(self) -> "Settings":
        if self.store == "postgres" and self.postgres_dsn is None:
            raise ValueError("store=postgres needs postgres_dsn")
        return self

    @model_validator(mode="after")
    def _tls_pair(self) -> "Settings":
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file must be given together")
        for path in (self.tls_cert_file, self.tls_key_file):
            if path is not None and not path.is_file():
                raise ValueError(f"TLS file {path} does not exist")
        return self

    @field_validator("host")
    @classmethod
    def _host_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # init (flags) > environment > the TOML config file, if one was named.
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if settings_cls.model_config.get("toml_file"):
            sources.append(TomlConfigSettingsSource(settings_cls))
        return tuple(sources)

    def long_term_config(self) -> "LongTermConfig":
        from agentscope_memory.long_term.mem0_store import LongTermConfig

        def secret(value: SecretStr | None) -> str | None:
            return value.get_secret_value() if value is not None else None

        return LongTermConfig(
            data_dir=self.data_dir,
            embedder=self.long_term_embedder,
            embedder_base_url=self.long_term_embedder_base_url,
            embedder_model=self.long_term_embedder_model,
            embedder_api_key=secret(self.long_term_embedder_api_key),
            embedder_dims=self.long_term_embedder_dims,
            vector_store=self.long_term_vector_store,
            qdrant_url=self.long_term_qdrant_url,
            qdrant_api_key=secret(self.long_term_qdrant_api_key),
            pgvector_dsn=secret(self.long_term_pgvector_dsn),
            llm_base_url=self.llm_base_url,
            llm_model=self.llm_model,
            llm_api_key=secret(self.llm_api_key),
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

    def printable(self) -> dict[str, Any]:
        """The effective settings with secrets masked, for the start-up log."""
        out = self.model_dump(mode="json")
        for name, value in self:
            if isinstance(value, SecretStr):
                out[name] = "********"
        out["api_keys"] = {"********": tenant for tenant in self.api_keys.values()}
        return out


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build settings from flags (`overrides`, None meaning "not given"), env and a file."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if config_file is None:
        return Settings(**given)
    if not Path(config_file).is_file():
        raise FileNotFoundError(f"config file {config_file} does not exist")
    # A subclass carries the file name so the source order stays declarative above.
    bound = type(
        "FileSettings",
        (Settings,),
        {"model_config": SettingsConfigDict(**{**Settings.model_config, "toml_file": Path(config_file)})},
    )
    return bound(**given)
