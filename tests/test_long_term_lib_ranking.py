"""The ranking formulas on hand-made candidates: the shipped ranking's relevance-weighted boosts
against the seed formula's unconditional ones."""

from __future__ import annotations

import pytest

from agentscope_memory.long_term.hybrid.ranking import RankOptions, final_scores, merge_legs, semantic_scores

NOW = 1_000_000.0


def _rank(ranking: str, facts: dict[str, tuple[float, float, int]]) -> list[str]:
    # "about": the query's subject; "near": a weaker match; "far": unrelated (the dense floor).
    dense = [("about", 0.80), ("near", 0.45), ("far", 0.20)]
    options = RankOptions().with_overrides(ranking=ranking)
    scores = semantic_scores(merge_legs(dense, []), options)
    final_scores(scores, facts, options, NOW)
    return sorted(scores, key=lambda m: -scores[m].final)


def test_importance_cannot_lift_a_weak_match_over_the_subject_in_the_shipped_ranking() -> None:
    # The weak match is fresh and judged important; the memory the query is about is old and plain.
    facts = {"about": (0.1, NOW - 90 * 24 * 3600, 0), "near": (1.0, NOW, 0), "far": (1.0, NOW, 0)}
    assert _rank("shipped", facts) == ["about", "near", "far"]
    # The seed formula adds the same boosts whatever the relevance: the weak match wins.
    assert _rank("seed", facts)[0] == "near"


def test_importance_and_recency_still_reorder_equally_relevant_memories() -> None:
    dense = [("old", 0.80), ("new", 0.80), ("far", 0.20)]
    options = RankOptions()
    scores = semantic_scores(merge_legs(dense, []), options)
    facts = {"old": (0.5, NOW - 30 * 24 * 3600, 0), "new": (0.5, NOW, 0), "far": (0.0, NOW, 0)}
    final_scores(scores, facts, options, NOW)
    assert scores["new"].final > scores["old"].final > scores["far"].final


def test_the_shipped_formula_scales_every_boost_by_the_squared_dense_score() -> None:
    options = RankOptions(delta=0.1)
    scores = semantic_scores(merge_legs([("a", 0.9), ("b", 0.7), ("c", 0.1)], [("b", 3.0), ("c", 6.0)]), options)
    facts = {"a": (0.2, NOW - 3600, 4), "b": (0.9, NOW - 7200, 1), "c": (0.6, NOW, 0)}
    final_scores(scores, facts, options, NOW)
    for s in scores.values():
        boosts = 0.2 * s.decay + 0.3 * s.importance + 0.1 * s.frequency
        assert s.final == pytest.approx(0.5 * s.semantic + s.dense**2 * boosts)
    # Only a lexical match ("c" is the dense floor): no boost at all.
    assert scores["c"].dense == 0 and scores["c"].final == pytest.approx(0.5 * scores["c"].semantic)
    seed = RankOptions(delta=0.1, ranking="seed")
    final_scores(scores, facts, seed, NOW)
    for s in scores.values():
        assert s.final == pytest.approx(0.5 * s.semantic + 0.2 * s.decay + 0.3 * s.importance + 0.1 * s.frequency)
