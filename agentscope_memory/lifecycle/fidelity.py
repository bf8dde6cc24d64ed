"""The fidelity check of a merge: does the merged fact still say what its originals said?

composite = 0.6 · mean cosine similarity between the merged embedding and each original's
+ 0.4 · keyword retention (`keywords.py`); a merge passes at `threshold` (default 0.5) or more,
when it keeps every number of its originals, and when it holds no number they do not.

The number rule is ours, beyond the composite: near-duplicates are so alike that similarity
alone passes them (0.6 · 0.9 > 0.5), so a merge that turned "the door code is 4711" and "the
code of the door is 4711, since May" into "the user has a door code" would pass, and the
originals, which leave recall, were the only place the code was kept. A number is a detail no
rewording makes up for; a merge that drops one keeps its originals. The other way round too: a
number none of the originals holds (a date, an amount, a code the model made up) is a fact
nobody stated, and similarity alone passed it as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from agentscope_memory.lifecycle.keywords import is_number, keywords, number_kept, number_value, numbers, retained

EMBEDDING_WEIGHT = 0.6
KEYWORD_WEIGHT = 0.4
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class Fidelity:
    embedding_similarity: float
    keyword_retention: float
    composite_score: float
    passed: bool
    lost_keywords: list[str] = field(default_factory=list)
    # Numbers of the merged text that none of the originals holds (made up), sorted.
    invented_numbers: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        """The fields a merged memory carries in its metadata."""
        return {
            "fidelity_embedding_similarity": round(self.embedding_similarity, 6),
            "fidelity_keyword_retention": round(self.keyword_retention, 6),
            "fidelity_composite_score": round(self.composite_score, 6),
            "fidelity_passed": self.passed,
            "fidelity_lost_keywords": list(self.lost_keywords),
        }


def _unit(v: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norm == 0, 1.0, norm)


def check(merged_text: str, merged_vector: np.ndarray, original_texts: Sequence[str],
          original_vectors: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> Fidelity:
    sims = _unit(np.asarray(original_vectors, dtype=np.float32)) @ _unit(np.asarray(merged_vector, dtype=np.float32))
    similarity = float(np.mean(sims)) if len(sims) else 0.0
    wanted: set[str] = set()
    for text in original_texts:
        wanted |= keywords(text)
    retention, lost = retained(wanted, merged_text)
    composite = EMBEDDING_WEIGHT * similarity + KEYWORD_WEIGHT * retention
    keeps_numbers = not any(is_number(k) for k in lost)
    stated: set[str] = set()
    for text in original_texts:
        stated |= numbers(text)
    # Stated when an original holds it (with its unit where it has one), or holds its value
    # alone: "at 3" and then "at 3 pm" says more, not something else; "3 pm" after "March 3" does.
    invented = sorted(n for n in numbers(merged_text) if not number_kept(n, stated) and number_value(n) not in stated)
    return Fidelity(similarity, retention, composite, composite >= threshold and keeps_numbers and not invented,
                    lost, invented)
