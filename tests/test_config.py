"""Configuration precedence (flags > environment > config file > defaults) and masking."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agentscope_memory_server.cli import main
from agentscope_memory_server.config import Settings, load_settings


def test_defaults() -> None:
    settings = load_settings()
    assert (settings.host, settings.port, settings.store) == ("127.0.0.1", 50051, "sqlite")
    assert settings.data_dir == Path("./data")


def test_flags_beat_environment_beat_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "memory.toml"
    config.write_text('port = 7000\nstore = "memory"\nhost = "0.0.0.0"\nmax_batch_messages = 9\n')
    monkeypatch.setenv("AGENTSCOPE_MEMORY_PORT", "7100")
    monkeypatch.setenv("AGENTSCOPE_MEMORY_STORE", "sqlite")
    settings = load_settings(config, port=7200)
    assert settings.port == 7200  # flag
    assert settings.store == "sqlite"  # environment over file
    assert settings.host == "0.0.0.0"  # file over default
    assert settings.max_batch_messages == 9


def test_invalid_values_are_rejected_with_the_field_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSCOPE_MEMORY_STORE", "mongo")
    with pytest.raises(ValidationError, match="store"):
        load_settings()


def test_secrets_are_masked_when_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSCOPE_MEMORY_LLM_API_KEY", "sk-very-secret")
    settings = load_settings()
    assert settings.llm_api_key.get_secret_value() == "sk-very-secret"
    assert "sk-very-secret" not in str(settings.printable())
    assert settings.printable()["llm_api_key"] == "********"


def test_api_keys_are_masked_and_every_tenant_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSCOPE_MEMORY_API_KEYS", '{"key-a-0123456789abcdef": "acme", "key-b-0123456789abcdef": "globex"}')
    printed = load_settings().printable()
    assert "key-a" not in str(printed) and "key-b" not in str(printed)
    assert printed["api_keys"] == ["********: acme", "********: globex"]


def test_inspector_admin_keys_are_masked_and_must_be_api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTSCOPE_MEMORY_API_KEYS", '{"key-a-0123456789abcdef": "acme"}')
    monkeypatch.setenv("AGENTSCOPE_MEMORY_INSPECTOR_ADMIN_KEYS", '["key-a-0123456789abcdef"]')
    printed = load_settings().printable()
    assert "key-a" not in str(printed) and printed["inspector_admin_keys"] == ["********: acme"]
    monkeypatch.setenv("AGENTSCOPE_MEMORY_INSPECTOR_ADMIN_KEYS", '["not-an-api-key-0123456"]')
    with pytest.raises(ValidationError, match="inspector_admin_keys"):
        load_settings()


def test_cli_reports_bad_configuration(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["serve", "--port", "99999", "--data-dir", str(tmp_path)]) == 2
    assert "port" in capsys.readouterr().err
    assert main(["serve", "--config", str(tmp_path / "missing.toml")]) == 2


def test_every_setting_is_documented_in_the_readme() -> None:
    # The README's Configuration section is where operators look a setting up.
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z0-9_]+)`", section))
    assert sorted(set(Settings.model_fields) - named) == []


@pytest.mark.parametrize("variable, value, reason", [
    ("AGENTSCOPE_MEMORY_LLM_BASE_URL", "localhost:8000/v1",
     "llm_base_url: must be an http:// or https:// URL with a host, not 'localhost:8000/v1'"),
    ("AGENTSCOPE_MEMORY_LONG_TERM_EMBEDDER_BASE_URL", "embedder",
     "long_term_embedder_base_url: must be an http:// or https:// URL with a host, not 'embedder'"),
    ("AGENTSCOPE_MEMORY_OTLP_ENDPOINT", "127.0.0.1:4318",
     "otlp_endpoint: must be an http:// or https:// URL with a host, not '127.0.0.1:4318'"),
    ("AGENTSCOPE_MEMORY_LOG_LEVEL", "LOUD",
     "log_level: Input should be 'DEBUG', 'INFO', 'WARNING' or 'ERROR' (got 'LOUD')"),
    # Lifecycle settings at their bounds: these passed the settings and then stopped the start
    # with a traceback from the scheduler, the reflector or the forgetter, or (an interval of
    # 1e-12) started a scheduler whose every tick failed.
    ("AGENTSCOPE_MEMORY_LIFECYCLE_FORGETTING_INTERVAL_S", "inf",
     "lifecycle_forgetting_interval_s: Input should be a finite number (got 'inf')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_CONSOLIDATION_INTERVAL_S", "Infinity",
     "lifecycle_consolidation_interval_s: Input should be a finite number (got 'Infinity')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_FORGETTING_INTERVAL_S", "1e-12",
     "lifecycle_forgetting_interval_s: Input should be greater than or equal to 1 (got '1e-12')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_CONSOLIDATION_INTERVAL_S", "0.5",
     "lifecycle_consolidation_interval_s: Input should be greater than or equal to 1 (got '0.5')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_REFLECTION_COOLDOWN_S", "inf",
     "lifecycle_reflection_cooldown_s: Input should be a finite number (got 'inf')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_REFLECTION_IMPORTANCE_THRESHOLD", "inf",
     "lifecycle_reflection_importance_threshold: Input should be a finite number (got 'inf')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_FORGETTING_STRENGTHENING_FACTOR", "inf",
     "lifecycle_forgetting_strengthening_factor: Input should be a finite number (got 'inf')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_PURGE_AFTER_S", "inf",
     "lifecycle_purge_after_s: Input should be a finite number (got 'inf')"),
    ("AGENTSCOPE_MEMORY_LIFECYCLE_FORGETTING_EXCLUDED_TYPES", '["fact", "备忘"]',
     "lifecycle_forgetting_excluded_types.1: Input should be 'message', 'fact', 'reflection' or 'summary'"
     " (got '备忘')"),
])
def test_a_bad_value_stops_the_start_with_one_line_naming_the_setting(
        variable: str, value: str, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # An endpoint without its scheme used to start a server whose every LLM call (or span) failed.
    monkeypatch.setenv(variable, value)
    assert main(["serve", "--port", "0", "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"agentscope-memory: invalid configuration: {reason}\n"


def test_a_config_file_that_is_not_toml_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "server.toml"
    config.write_text("port = \n")
    assert main(["serve", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"agentscope-memory: invalid configuration: config file {config} is not valid TOML:"
        " Invalid value (at line 1, column 8)\n")


def test_an_http_url_setting_takes_http_and_https() -> None:
    assert load_settings(llm_base_url="http://127.0.0.1:8000/v1").llm_base_url == "http://127.0.0.1:8000/v1"
    assert load_settings(otlp_endpoint="https://collector.example:4318").otlp_endpoint == "https://collector.example:4318"


def test_a_bad_api_keys_value_does_not_print_the_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # pydantic names a dict entry by its key: "api_keys.<the key>", and shows the input dict.
    config = tmp_path / "server.toml"
    config.write_text('api_keys = {"key-a-0123456789abcdef" = 5}\n')
    assert main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err == "agentscope-memory: invalid configuration: api_keys: Input should be a valid string\n"
