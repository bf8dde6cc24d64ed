"""`AutoContextConfig`: AgentScope-Java 1.0.12's ten fields with Java's defaults, plus our two."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.validation.text import MAX_PROMPT_BYTES, check_text

PARITY = "parity"
IMPROVED = "improved"
JAVA_ESTIMATE = "java_estimate"
CL100K = "cl100k"


@dataclass(frozen=True)
class PromptConfig:
    """Java `PromptConfig`: per-strategy prompt overrides; blank means the default."""

    previous_round_tool_compress_prompt: str | None = None
    previous_round_summary_prompt: str | None = None
    current_round_large_message_prompt: str | None = None
    current_round_compress_prompt: str | None = None


@dataclass(frozen=True)
class AutoContextConfig:
    """Field names follow Java's (snake_case); defaults are Java's."""

    msg_threshold: int = 100
    max_token: int = 128 * 1024
    token_ratio: float = 0.75
    last_keep: int = 50
    large_payload_threshold: int = 5 * 1024
    offload_single_preview: int = 200
    min_consecutive_tool_messages: int = 6
    current_round_compression_ratio: float = 0.3
    min_compression_token_threshold: int = 5000
    custom_prompt: PromptConfig = field(default_factory=PromptConfig)
    # `parity` behaves exactly like Java 1.0.12; `improved` fixes its known bugs (see engine).
    profile: str = PARITY
    # `java_estimate` counts as Java does; `cl100k` (improved profile only) uses a real tokenizer.
    token_counter: str = JAVA_ESTIMATE

    @property
    def token_threshold(self) -> int:
        # Java: (int) (maxToken * tokenRatio), truncated toward zero.
        return int(self.max_token * self.token_ratio)

    def validate(self) -> AutoContextConfig:
        def need(ok: bool, name: str, reason: str) -> None:
            if not ok:
                raise InvalidArgumentError(f"auto_context_config.{name}", reason)

        for prompt in fields(PromptConfig):
            text = getattr(self.custom_prompt, prompt.name)
            if text is not None:
                check_text(text, f"auto_context_config.custom_prompt.{prompt.name}", MAX_PROMPT_BYTES)
        need(self.msg_threshold > 0, "msg_threshold", "must be positive")
        need(self.max_token > 0, "max_token", "must be positive")
        need(0 < self.token_ratio <= 1, "token_ratio", "must be in (0, 1]")
        need(self.last_keep >= 0, "last_keep", "must not be negative")
        need(self.large_payload_threshold > 0, "large_payload_threshold", "must be positive")
        need(self.offload_single_preview >= 0, "offload_single_preview", "must not be negative")
        need(self.min_consecutive_tool_messages >= 0, "min_consecutive_tool_messages", "must not be negative")
        need(0 < self.current_round_compression_ratio <= 1, "current_round_compression_ratio", "must be in (0, 1]")
        need(self.min_compression_token_threshold >= 0, "min_compression_token_threshold", "must not be negative")
        need(self.profile in (PARITY, IMPROVED), "profile", "must be parity or improved")
        need(self.token_counter in (JAVA_ESTIMATE, CL100K), "token_counter", "must be java_estimate or cl100k")
        need(
            not (self.token_counter == CL100K and self.profile != IMPROVED),
            "token_counter",
            "cl100k is available in the improved profile only (parity counts as Java does)",
        )
        return self

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> AutoContextConfig:
        data: dict[str, Any] = json.loads(text or "{}")
        prompt = PromptConfig(**(data.pop("custom_prompt", None) or {}))
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidArgumentError("auto_context_config", f"unknown fields {sorted(unknown)}")
        return cls(custom_prompt=prompt, **data).validate()
