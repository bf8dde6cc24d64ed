"""Server configuration: flags > environment (`AGENTSCOPE_MEMORY_*`) > config file > defaults."""

from __future__ import annotations

import difflib
import ssl
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping, get_args

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from agentscope_memory.service.settings import MiB, ServiceSettings, http_url


class Settings(BaseSettings, ServiceSettings):
    """Everything the server can be told: the service's settings (`ServiceSettings`: storage,
    limits, LLM, long-term memory) and how to serve them. Printed at start with secrets masked."""

    model_config = SettingsConfigDict(
        env_prefix="AGENTSCOPE_MEMORY_", extra="forbid", validate_default=True
    )

    # Where and how to listen.
    host: str = "127.0.0.1"
    port: int = Field(50051, ge=0, le=65535, description="0 picks a free port")
    port_file: Path | None = Field(None, description="write the bound port here once listening")
    tls_cert_file: Path | None = Field(None, description="PEM certificate chain; with tls_key_file enables TLS")
    tls_key_file: Path | None = Field(None, description="PEM private key")

    grpc_max_receive_bytes: int = Field(64 * MiB, gt=0)
    # Open connections each HTTP surface (mem0 REST, MCP, inspector, /metrics) holds at most;
    # more are answered 503 and closed. MCP's SSE clients each hold one for as long as they
    # stay connected: raise it for more of them (and the process's open-file limit with it).
    http_max_connections: int = Field(512, ge=1, description="open connections per HTTP port; more get 503")

    # Authentication: API key -> tenant. Empty means no authentication (tenant "default").
    api_keys: dict[str, str] = Field(default_factory=dict)
    # A client address presenting this many wrong keys (or forged inspector sessions) within a
    # minute is refused for a minute, on every surface; 0 = no limit (behind a proxy that
    # hides client addresses, raise it or turn it off).
    auth_failure_limit: int = Field(10, ge=0, description="wrong keys per client address per minute before a minute's refusal; 0 = no limit")

    # mem0-compatible REST API (AgentScope's Mem0LongTermMemory, mem0's MemoryClient) on its
    # own HTTP port, same keys and tenants as gRPC; unset = off; 0 picks one.
    mem0_rest_port: int | None = Field(None, ge=0, le=65535, description="mem0 REST port; unset = off; 0 picks one")
    mem0_rest_port_file: Path | None = Field(None, description="write the bound mem0 REST port here once listening")

    # MCP (streamable HTTP at /mcp, SSE at /sse) on its own port, same keys and tenants as
    # gRPC; unset = off. `mcp_bind` fixes scope fields for every MCP connection
    # (user_id, agent_name, run_name, working_memory_id), so a model cannot leave them.
    mcp_port: int | None = Field(None, ge=0, le=65535, description="MCP HTTP port; unset = off; 0 picks one")
    mcp_port_file: Path | None = Field(None, description="write the bound MCP port here once listening")
    mcp_bind: dict[str, str] = Field(default_factory=dict)

    # The web inspector (server-rendered pages) on its own port; unset = off. Same keys and
    # tenants as gRPC (a browser logs in with its key); read-only unless the key presented is
    # one of `inspector_admin_keys`, which may also delete memories.
    inspector_port: int | None = Field(None, ge=0, le=65535, description="web inspector port; unset = off; 0 picks one")
    inspector_port_file: Path | None = Field(None, description="write the bound inspector port here once listening")
    inspector_admin_keys: list[str] = Field(default_factory=list, description="API keys that may change things in the inspector")

    # Operations.
    metrics_port: int | None = Field(None, ge=0, le=65535, description="Prometheus /metrics port; unset = off")
    # OpenTelemetry traces over OTLP/HTTP to `{otlp_endpoint}/v1/traces` (e.g. a collector at
    # http://127.0.0.1:4318); unset = off. Needs the `tracing` extra.
    otlp_endpoint: str | None = Field(None, description="OTLP/HTTP base URL for traces; unset = off")
    otel_service_name: str = Field("agentscope-memory", min_length=1, description="service.name of the spans")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["json", "text"] = "json"
    shutdown_grace_s: float = Field(10.0, ge=0)

    @model_validator(mode="after")
    def _admin_keys_are_api_keys(self) -> Settings:
        unknown = [k for k in self.inspector_admin_keys if k not in self.api_keys]
        if unknown:
            raise ValueError("inspector_admin_keys: every admin key must also be one of api_keys")
        return self

    @field_validator("api_keys")
    @classmethod
    def _keys_and_tenants_valid(cls, value: dict[str, str]) -> dict[str, str]:
        from agentscope_memory.validation.ids import check_tenant

        for key, tenant in value.items():
            if len(key) < 16:
                raise ValueError("API keys must be at least 16 characters")
            check_tenant(tenant, "api_keys tenant")
        return value

    @field_validator("mcp_bind")
    @classmethod
    def _mcp_bind_valid(cls, value: dict[str, str]) -> dict[str, str]:
        from agentscope_memory.memory_tools import Connection

        Connection.from_params(value)
        return value

    @model_validator(mode="after")
    def _tls_pair(self) -> "Settings":
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file must be given together")
        for path in (self.tls_cert_file, self.tls_key_file):
            if path is not None and not path.is_file():
                raise ValueError(f"TLS file {path} does not exist")
        if self.tls_cert_file is not None and self.tls_key_file is not None:
            _check_tls_pair(self.tls_cert_file, self.tls_key_file)
        return self

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp_endpoint_is_a_url(cls, value: str | None) -> str | None:
        return http_url(value)

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

    def printable(self) -> dict[str, Any]:
        """The effective settings with secrets masked, for the start-up log."""
        out = self.model_dump(mode="json")
        for name, value in self:
            if isinstance(value, SecretStr):
                out[name] = "********"
        # every tenant that has a key, each key masked (one masked dict key would show one tenant)
        out["api_keys"] = [f"********: {tenant}" for tenant in self.api_keys.values()]
        out["inspector_admin_keys"] = [f"********: {self.api_keys.get(k, '?')}" for k in self.inspector_admin_keys]
        return out


def _check_tls_pair(cert: Path, key: Path) -> None:
    """gRPC reports a bad pair only as "Failed to bind to address": OpenSSL says what is wrong."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        # An empty password: an encrypted key fails here instead of prompting on the terminal.
        context.load_cert_chain(cert, key, password=lambda: b"")
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"tls_cert_file {cert} and tls_key_file {key} must be a PEM certificate chain and"
                         f" its unencrypted private key ({exc})") from None


# Names under the prefix that are not server settings: the client commands' key and the build's cache.
NOT_SETTINGS = frozenset({"API_KEY", "TARGET", "VENV_CACHE"})


def unknown_environment(environ: Mapping[str, str]) -> list[str]:
    """A sentence for every `AGENTSCOPE_MEMORY_*` variable that sets nothing. pydantic-settings
    ignores them, so a misspelt one (`..._METRIC_PORT`) would leave its default in force unseen;
    the config file, by contrast, refuses unknown keys."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    fields = {name.upper() for name in Settings.model_fields}
    found = []
    for name in sorted(environ):
        rest = name[len(prefix):].upper() if name.upper().startswith(prefix) else None
        if rest is None or rest in fields or rest in NOT_SETTINGS:
            continue
        close = difflib.get_close_matches(rest, fields, n=1)
        hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
        found.append(f"environment variable {name} is not a setting and is ignored{hint}")
    return found


# Never shown in an error: the settings typed SecretStr (which `printable` masks) and the keys.
SECRET_SETTINGS = frozenset(
    {name for name, field in Settings.model_fields.items()
     if field.annotation is SecretStr or SecretStr in get_args(field.annotation)}
    | {"api_keys", "inspector_admin_keys"})


def describe_invalid(exc: ValidationError) -> str:
    """A settings error in one line per setting (pydantic's own text spans four, with a link)."""
    parts = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        secret = bool(loc) and loc[0] in SECRET_SETTINGS
        # A key of api_keys is a secret too: neither it (in the location) nor a value is shown.
        where = (loc[0] if secret else ".".join(loc)) or "settings"
        text = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] not in ("value_error", "extra_forbidden", "missing") and not secret:
            text += f" (got {str(error.get('input'))[:100]!r})"
        parts.append(f"{where}: {text}")
    return "; ".join(parts)


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
    try:
        return bound(**given)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"config file {config_file} is not valid TOML: {exc}") from None
