"""The offline merge of the same facts is the same text whatever order they come in: what it
keeps of a fact depends on what was said before it, and the consolidation hands it the facts by
importance, then age, then id, so the same facts stored with other importances (or ids) merged
into another text. Now each original goes first in turn and the shortest merge is kept."""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.keywords import is_number, keywords, numbers
from agentscope_memory.lifecycle.summaries import extractive_merge
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store.base import LongTermRow
from tests.test_lifecycle_lib_chinese_merge import GROUPS
from tests.test_lifecycle_lib_llm_answers import embedder, engine  # noqa: F401 (fixtures)

TENNIS = ["用户每周五下午四点和Bob打网球。", "The user plays tennis with Bob every Friday at 4 pm.",
          "每周五下午四点，用户跟Bob去打网球。", "Every Friday at 4 pm the user plays tennis with Bob."]
MERGED = {**{name: texts for name, (texts, _) in GROUPS.items()}, "tennis": TENNIS,
          "door_en": ["The door code of the user's flat is 4711.", "The user's flat has the door code 4711.",
                      "To open the user's flat, the door code is 4711."]}


@pytest.mark.parametrize("name", list(MERGED))
def test_the_offline_merge_is_the_same_text_in_every_order(name: str) -> None:
    texts = MERGED[name]
    merges = {extractive_merge(list(order)) for order in itertools.permutations(texts)}
    assert len(merges) == 1, merges
    merged = merges.pop()
    assert numbers(merged) >= set().union(*(numbers(t) for t in texts)), merged
    names = {k for t in texts for k in keywords(t) if k.isascii() and not is_number(k)}
    assert all(name in merged.casefold() for name in names), (names, merged)
    # Cut at a size it does not fit in, too.
    cut = {extractive_merge(list(order), max_chars=len(merged) - 1) for order in itertools.permutations(texts)}
    assert len(cut) == 1, cut


def _row(scope: Scope, text: str, importance: float, now: float) -> LongTermRow:
    return LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                       user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                       memory_type="fact", importance=importance, importance_method="user", created=now,
                       updated=now, last_accessed=now, content_hash=content_hash(text))


async def test_the_same_facts_with_other_importances_consolidate_offline_into_the_same_facts(engine) -> None:  # noqa: F811
    # Importance decides first the order the consolidation hands the facts over: reversed in the
    # second scope. A Chinese and an English cluster, each merged on its own.
    now = time.time()
    clusters = [MERGED["door"], MERGED["door_en"] + ["The user's flat door opens with code 4711."]]
    merged: list[list[str]] = []
    for user, reverse in (("用户甲", False), ("用户乙", True)):
        scope = Scope("agent", user)
        texts = [t for cluster in clusters for t in cluster]
        importances = [0.9 - 0.1 * i for i in range(len(texts))]
        if reverse:
            importances.reverse()
        rows = await engine.insert("t", scope, [_row(scope, t, i, now) for t, i in zip(texts, importances, strict=True)])
        report = await Consolidator(engine, settings=ConsolidationSettings(threshold=2, similarity=0.6)
                                    ).consolidate_scope("t", scope)
        ids = {r.text: r.memory_id for r in rows}
        scope_merges = []
        for cluster in clusters:
            merge = next(m for m in report.merges if {ids[t] for t in cluster} <= set(m.original_ids))
            assert merge.method == "extractive" and merge.fidelity.passed and merge.applied, merge
            assert (await engine.rows("t", [merge.memory_id]))[0].text == merge.text
            scope_merges.append(merge.text)
        merged.append(scope_merges)
    assert merged[0] == merged[1]
