"""The offline merge of near-duplicate Chinese facts is one short note: it kept every sentence
(each held a Chinese segment not said yet), so a group of four came out longer than its parts.
Now a clause that says nothing more than what is kept is left out, every number and name kept."""

from __future__ import annotations

import itertools

import pytest

from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.keywords import numbers
from agentscope_memory.lifecycle.summaries import extractive_merge
from agentscope_memory.long_term import Scope
from tests.test_lifecycle_lib_llm_answers import add_facts, embedder, engine  # noqa: F401 (fixtures)

GROUPS = {
    "door": (["用户公寓的门禁密码是4711。", "用户的公寓门禁密码为4711。", "打开用户公寓的门，密码是4711。", "用户公寓门的密码：4711。"],
             ["4711"]),
    "meeting": (["用户每周三下午三点和张经理开会。", "每周三下午三点，用户要和张经理开会。", "用户和张经理的例会在每周三下午三点。"],
                ["张经理", "周3", "3点"]),
    "trip": (["用户计划四月去京都旅行，预算一万五千元。", "用户四月要去京都旅行，预算是一万五千元。",
              "四月份用户打算去京都玩，预算15000元，和李娜一起。"], ["京都", "李娜", "4月", "15000元"]),
    "memo": (["关于季度报告的备忘12：周6处理。", "备忘12：季度报告在周6处理。", "季度报告，备忘12，周6。"], ["季度报告", "12", "周6"]),
}


@pytest.mark.parametrize("name", list(GROUPS))
def test_an_offline_merge_of_chinese_near_duplicates_is_short_and_keeps_numbers_and_names(name: str) -> None:
    texts, details = GROUPS[name]
    total = sum(len(t) for t in texts)
    assert len(extractive_merge(texts)) <= 2 / 3 * total, extractive_merge(texts)
    # In every order (the consolidation's is by importance, then age, then id) shorter by a fifth.
    for order in itertools.permutations(texts):
        merged = extractive_merge(list(order))
        assert len(merged) <= 0.8 * total, merged
        stated = set().union(*(numbers(t) for t in texts))
        assert numbers(merged) >= stated, merged
        for detail in details:
            assert detail in merged or detail in numbers(merged), (detail, merged)


@pytest.mark.parametrize(("texts", "kept"), [
    (["用户和王明开会。", "用户和张明开会。"], ["王明", "张明"]),  # a name one character apart
    (["用户吃辣。", "用户不吃辣。"], ["不吃辣"]),  # a negation is one new character too
    (["用户很喜欢猫。", "用户很不喜欢猫。"], ["不喜欢"]),  # inserted inside what is said
    (["用户每天都喜欢猫。", "用户每天都喜欢狗。"], ["猫", "狗"]),  # one character replaced at the end
    (["张三打了李四。", "李四打了张三。"], ["张三打了李四", "李四打了张三"]),  # the same characters, roles reversed
    (["用户住在上海。", "用户住在上海，周末去杭州。"], ["杭州"]),  # the new clause of a sentence
    (["用户和Alice开会。", "用户和Bob开会。"], ["Alice", "Bob"]),  # Latin names glued to Chinese
    (["用户每天7:15跑步，跑1,000米。", "用户每天8:45跑步：跑1,000米。"], ["7:15", "8:45", "1,000米"]),
])
def test_a_clause_that_says_something_new_is_kept(texts: list[str], kept: list[str]) -> None:
    merged = extractive_merge(texts)
    for part in kept:
        assert part in merged, (part, merged)


async def test_the_consolidation_of_chinese_near_duplicates_offline_passes_its_fidelity_check(engine) -> None:  # noqa: F811
    scope = Scope("agent", "用户")
    texts = GROUPS["door"][0]
    originals = await add_facts(engine, scope, texts)
    report = await Consolidator(engine, settings=ConsolidationSettings(threshold=2, similarity=0.6)).consolidate_scope("t", scope)
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.method == "extractive" and merge.fidelity.passed and merge.applied
    assert "4711" in merge.text and len(merge.text) <= 0.6 * sum(len(t) for t in texts)
