"""Ranking: fuse the dense and lexical legs into S_semantic, then the seed formula with relevance-
weighted boosts.

    S_semantic = w_dense * dense_n + (1 - w_dense) * lexical_n          (linear fusion, in [0, 1])
    shipped:  S_final = alpha * S_semantic
                        + dense_n ** 2 * (beta * decay + gamma * importance + delta * frequency)
    seed:     S_final = alpha * S_semantic + beta * decay + gamma * importance + delta * frequency
    decay     = decay_rate ** hours_since_last_access   (1 for a pinned memory)

`dense_n` is the cosine similarity min-max normalised over the dense candidates (the best is 1,
the 50th 0); `lexical_n` is the BM25 (or ts_rank) score divided by the best lexical score among
the candidates (a non-match scores 0). On the sibling recall set (bench/recall_bench.py, 444
queries, English and Chinese) min-max fusion beat a clipped cosine (MiniLM: en 0.858 vs 0.841,
zh 0.542 vs 0.407 recall@5 at weight 0.5/0.6) and RRF by far (en 0.49, zh 0.36). `frequency` is
log(1 + access_count) / log(1 + the largest access count among the candidates), off by default
(delta = 0). The seed's defaults: alpha 0.5, beta 0.2, gamma 0.3, decay 0.99 per hour, semantic
top 50 -> final top 10.

Why the shipped ranking scales the boosts by the memory's relevance (a deliberate difference from
the seed formula, which stays available as the `seed` ranking): recency and importance do not
depend on the query, so in the seed formula they lift whatever is recent or important into every
result list, and a misjudged importance (the offline heuristic scorer cannot know that "Maya" is
the user's daughter) outweighs the semantic evidence. Scaled by dense_n squared they reorder
memories the query is about and cannot lift an unrelated one. On the second recall set
(bench/ltm_recall_data_b.py), written after the seed defaults were chosen, the seed formula was
behind plain dense retrieval in English (recall@5 .887 at dense weight 0.7, .899 at 0.8, dense
.958); relevance-weighted, .982. On set A it gives .934 / .919 (en / zh) against the seed
formula's .941 / .946 at 0.7 (.926 / .946 at 0.8), all far above dense (.875 / .855). The dense leg rather than S_semantic measures relevance because the lexical
leg, normalised by its best candidate, calls a one-word reply that shares a single stem with the
query fully relevant.

A pinned memory (a user's "remember this for ever") has decay 1, as if recalled this moment:
pinning says its age does not matter, so time neither lowers it nor lets newer memories pass it
for being newer. Its importance stays what it is (a pin does not claim the memory is important to
every query; the shipped ranking still scales the boost by its relevance).

Other rankings exist for measuring (the benchmark needs the legs on their own): `dense`,
`lexical`, `rrf` (reciprocal rank fusion, k = 60), `semantic` (the fusion without the time and
importance terms) and `seed`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.domains import DOMAINS
from agentscope_memory.long_term.memory_types import MEMORY_TYPES
from agentscope_memory.store.base import LongTermFilter
from agentscope_memory.validation.messages import check_json_value

Ranking = Literal["shipped", "seed", "semantic", "dense", "lexical", "rrf"]
RANKINGS: tuple[Ranking, ...] = get_args(Ranking)
RRF_K = 60.0
MAX_TOP_K = 1000


@dataclass(frozen=True)
class RankOptions:
    """How one search ranks; every field has the server's default."""

    alpha: float = 0.5
    beta: float = 0.2
    gamma: float = 0.3
    delta: float = 0.0
    decay_rate: float = 0.99
    # Weight of the dense leg inside S_semantic (the lexical leg gets the rest). With the
    # relevance-weighted boosts, 0.8 against 0.7 / 0.85 / 0.9 gave recall@5 (set A en, zh; set B
    # en, zh) .934 .919 .982 .976 against .939 .931 .952 .976 / .934 .912 .976 .976 /
    # .931 .907 .976 .976: the lexical leg matches single stems of short replies, so more of it
    # costs English recall on set B, and less of it Chinese recall on set A.
    dense_weight: float = 0.8
    top_k_semantic: int = 50
    top_k: int = 10
    ranking: Ranking = "shipped"
    where: LongTermFilter = field(default_factory=LongTermFilter)

    def with_overrides(self, **overrides: Any) -> RankOptions:
        """These options with the given non-None fields replaced, validated."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None}).validate()

    def validate(self) -> RankOptions:
        for name in ("alpha", "beta", "gamma", "delta", "dense_weight"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                raise InvalidArgumentError(name, f"must be between 0 and 1, not {value}")
        if not (math.isfinite(self.decay_rate) and 0.0 < self.decay_rate <= 1.0):
            raise InvalidArgumentError("decay_rate", f"must be in (0, 1], not {self.decay_rate}")
        for name in ("top_k_semantic", "top_k"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_TOP_K:
                raise InvalidArgumentError(name, f"must be between 1 and {MAX_TOP_K}, not {value}")
        if self.ranking not in RANKINGS:
            raise InvalidArgumentError("ranking", f"must be one of {', '.join(RANKINGS)}, not {self.ranking!r}")
        for t in self.where.memory_types:
            if t not in MEMORY_TYPES:
                raise InvalidArgumentError("memory_types", f"{t!r} is not one of {', '.join(MEMORY_TYPES)}")
        for d in self.where.domains:
            if d not in DOMAINS:
                raise InvalidArgumentError("domains", f"{d!r} is not one of {', '.join(DOMAINS)}")
        after, before = self.where.created_after, self.where.created_before
        if after is not None and before is not None and after >= before:
            raise InvalidArgumentError("created_before", "must be later than created_after")
        # Stored metadata never holds NUL (Record refuses it), and PostgreSQL, which filters a
        # scope too large for the in-memory index itself, cannot read a jsonb value that does.
        check_json_value(self.where.metadata, "metadata_filter_json", allow_nul=False)
        return self


@dataclass
class Scores:
    """Why a memory came back: every component of its final score."""

    semantic: float = 0.0
    dense: float = 0.0
    lexical: float = 0.0
    decay: float = 0.0
    importance: float = 0.0
    frequency: float = 0.0
    final: float = 0.0


@dataclass
class Candidate:
    memory_id: str
    dense: float | None = None  # cosine similarity
    lexical: float | None = None  # raw lexical score
    dense_rank: int | None = None
    lexical_rank: int | None = None


def merge_legs(dense: list[tuple[str, float]], lexical: list[tuple[str, float]]) -> dict[str, Candidate]:
    """The union of both legs' candidates (each list best first)."""
    out: dict[str, Candidate] = {}
    for rank, (memory_id, score) in enumerate(dense):
        c = out.setdefault(memory_id, Candidate(memory_id))
        c.dense, c.dense_rank = score, rank
    for rank, (memory_id, score) in enumerate(lexical):
        c = out.setdefault(memory_id, Candidate(memory_id))
        c.lexical, c.lexical_rank = score, rank
    return out


def semantic_scores(candidates: dict[str, Candidate], options: RankOptions) -> dict[str, Scores]:
    """S_semantic (and the normalised legs) of every candidate, by the requested ranking."""
    best_lexical = max((c.lexical for c in candidates.values() if c.lexical), default=0.0)
    dense = [c.dense for c in candidates.values() if c.dense is not None]
    low, high = (min(dense), max(dense)) if dense else (0.0, 0.0)
    out: dict[str, Scores] = {}
    for memory_id, c in candidates.items():
        if c.dense is None:
            dense_n = 0.0
        else:
            dense_n = (c.dense - low) / (high - low) if high > low else 1.0
        lexical_n = (c.lexical / best_lexical) if (c.lexical and best_lexical > 0) else 0.0
        if options.ranking == "dense":
            semantic = dense_n if c.dense is not None else -1.0
        elif options.ranking == "lexical":
            semantic = lexical_n if c.lexical else -1.0
        elif options.ranking == "rrf":
            semantic = sum(1.0 / (RRF_K + 1 + r) for r in (c.dense_rank, c.lexical_rank) if r is not None)
        else:
            semantic = options.dense_weight * dense_n + (1.0 - options.dense_weight) * lexical_n
        out[memory_id] = Scores(semantic=semantic, dense=dense_n, lexical=lexical_n)
    return out


def final_scores(
    scores: dict[str, Scores], facts: dict[str, tuple[float, float, int]], options: RankOptions, now: float,
    pinned: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Fill decay, importance, frequency and final. `facts`: id -> (importance, last_accessed,
    access_count); `pinned`: the ids of pinned memories (no decay). Rankings other than `shipped`
    and `seed` keep S_semantic as the final score."""
    most = max((f[2] for f in facts.values()), default=0)
    for memory_id, s in scores.items():
        importance, last_accessed, count = facts[memory_id]
        hours = max(0.0, now - last_accessed) / 3600.0
        s.decay = 1.0 if memory_id in pinned else options.decay_rate**hours
        s.importance = min(1.0, max(0.0, importance))
        s.frequency = math.log1p(count) / math.log1p(most) if most > 0 else 0.0
        boosts = options.beta * s.decay + options.gamma * s.importance + options.delta * s.frequency
        if options.ranking == "shipped":
            s.final = options.alpha * s.semantic + s.dense**2 * boosts
        elif options.ranking == "seed":
            s.final = options.alpha * s.semantic + boosts
        else:
            s.final = s.semantic
