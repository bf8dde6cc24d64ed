"""A TIERED memory's configuration (Loom's L1-L4 budgets and thresholds), stored as JSON with
the memory. Every field has Loom's default; validation names the field it rejects."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.validation.ids import check_id

ESTIMATE = "estimate"
CL100K = "cl100k"
TOKEN_COUNTERS = (ESTIMATE, CL100K)
FIELD = "tiered_config"


@dataclass(frozen=True)
class TieredConfig:
    # Token budgets of the tiers (Loom's defaults). L4's is what status reports against.
    l1_budget: int = 8_000
    l2_budget: int = 16_000
    l3_budget: int = 32_000
    l4_budget: int = 100_000
    # An added item whose importance is above this is promoted from L1 to L2.
    promote_threshold: float = 0.6
    # L2 is summarised into L3 when it reaches `l2_compact_at` of its budget, down to `l2_compact_to`.
    l2_compact_at: float = 0.85
    l2_compact_to: float = 0.80
    # L3's oldest `l3_vectorize_fraction` of summaries go to long-term memory at `l3_vectorize_at`.
    l3_vectorize_at: float = 0.90
    l3_vectorize_fraction: float = 0.20
    # L1 compaction (Loom's "📦 History compacted"): when L1 reaches this many tokens its oldest
    # items are summarised into L3 until L1 holds at most `l1_compact_keep` of the trigger.
    # 0 switches compaction off (L1 then only evicts FIFO beyond its budget, summarising too).
    l1_compact_trigger: int = 4_000
    l1_compact_keep: float = 0.5
    # `estimate` (by script: 4 ASCII characters a token, 1.25 tokens a CJK character, a token a
    # UTF-8 byte for characters tokenizers have no pieces for; `tokens.py`)
    # or `cl100k` (tiktoken's cl100k_base).
    token_counter: str = ESTIMATE
    # Score an item the caller gives no importance with the long-term engine's offline scorer;
    # off, such items get `default_importance`.
    score_importance: bool = True
    default_importance: float = 0.5
    # Score with the server's LLM (the long-term engine's `LlmScorer`, one call per message, at
    # most `service.LLM_SCORING_CONCURRENCY` in flight, each batch taking its turn) instead of the
    # offline heuristic, when the server has an LLM; a failed call (and the rest of its batch), and
    # what `service.LLM_SCORING_BUDGET_S` (or the caller's nearer deadline) leaves unscored, fall
    # back to the heuristic. Only `AddTieredItems` scores this way (a plain `AddMessages` uses the
    # heuristic).
    llm_importance: bool = False
    # The long-term scope L4 writes to and searches; an empty scope means agent_name = memory id.
    agent_name: str = ""
    user_id: str = ""
    run_name: str = ""
    # Vectorise into long-term memory (needs the server's long-term engine); off, summaries
    # beyond L3's budget leave oldest first and only their event keeps the text.
    vectorize: bool = True

    def validate(self) -> TieredConfig:
        for name in ("l1_budget", "l2_budget", "l3_budget", "l4_budget"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100_000_000:
                raise InvalidArgumentError(f"{FIELD}.{name}", f"is {value!r}; must be an integer from 1 to 100000000")
        if not isinstance(self.l1_compact_trigger, int) or not 0 <= self.l1_compact_trigger <= 100_000_000:
            raise InvalidArgumentError(f"{FIELD}.l1_compact_trigger", "must be an integer from 0 (off) to 100000000")
        for name in ("promote_threshold", "default_importance"):
            _fraction(name, getattr(self, name), allow_zero=True)
        for name in ("l2_compact_at", "l2_compact_to", "l3_vectorize_at", "l3_vectorize_fraction", "l1_compact_keep"):
            _fraction(name, getattr(self, name), allow_zero=False)
        if self.l2_compact_to >= self.l2_compact_at:
            raise InvalidArgumentError(f"{FIELD}.l2_compact_to", "must be below l2_compact_at")
        if self.token_counter not in TOKEN_COUNTERS:
            raise InvalidArgumentError(f"{FIELD}.token_counter", f"is {self.token_counter!r}; must be estimate or cl100k")
        for name in ("agent_name", "user_id", "run_name"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InvalidArgumentError(f"{FIELD}.{name}", "must be text")
            if value:
                check_id(value, f"{FIELD}.{name}")
        for name in ("score_importance", "vectorize", "llm_importance"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgumentError(f"{FIELD}.{name}", "must be true or false")
        return self

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TieredConfig:
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise InvalidArgumentError(f"{FIELD}.{key}", "is not a field of the tiered configuration")
        values = dict(data)
        for name in ("promote_threshold", "default_importance", "l2_compact_at", "l2_compact_to",
                     "l3_vectorize_at", "l3_vectorize_fraction", "l1_compact_keep"):
            if name in values and isinstance(values[name], int) and not isinstance(values[name], bool):
                values[name] = float(values[name])
        return cls(**values).validate()

    @classmethod
    def from_json(cls, text: str) -> TieredConfig:
        try:
            data = json.loads(text or "{}")
        except ValueError as exc:
            raise InvalidArgumentError(FIELD, f"is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidArgumentError(FIELD, "must be a JSON object")
        return cls.from_dict(data)

    def budget(self, tier: int) -> int:
        return (self.l1_budget, self.l2_budget, self.l3_budget, self.l4_budget)[tier - 1]


def _fraction(name: str, value: Any, *, allow_zero: bool) -> None:
    ok = isinstance(value, float) and math.isfinite(value) and (0.0 <= value if allow_zero else 0.0 < value) and value <= 1.0
    if not ok:
        low = "[0" if allow_zero else "(0"
        raise InvalidArgumentError(f"{FIELD}.{name}", f"is {value!r}; must be a number in {low}, 1]")
