"""The fidelity check compares a number with its unit or counter: the "3" of "3 pm" was kept by
"March 3", "5 kg" by "5 km", 三杯 (no counter it knew: no number at all) by 三瓶. English and
Chinese, digits and Chinese numerals."""

from __future__ import annotations

import numpy as np
import pytest

from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.fidelity import check
from agentscope_memory.lifecycle.keywords import numbers
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term import Scope
from tests.scripted_llm import ScriptedLLM, ScriptedReply
from tests.test_lifecycle_lib_llm_answers import add_facts, embedder, engine  # noqa: F401 (fixtures)


@pytest.mark.parametrize(("text", "expected"), [
    ("Meet Bob at 3 pm.", {"3pm"}),
    ("Meet Bob at 3 p.m., or 9am.", {"3pm", "9am"}),
    ("Meet Bob on March 3.", {"3月", "3日"}),
    ("on the 3rd of March 2026", {"3月", "3日", "2026"}),
    ("It costs $5, 30% off, 2 kg, 10 km, 5m and 3h.", {"5usd", "30%", "2kg", "10km", "5m", "3h"}),
    ("May I call 3 people since May 2023?", {"3people", "2023"}),  # a month beside a year is no day
    ("door code 4711 at 7:15 in 2023, reminder 12 on day 5", {"4711", "7:15", "2023", "12", "5"}),
    ("a 3-hour call on the 3rd day, 0x1F, 5a, room 5B", {"3h", "3", "0", "1", "5"}),  # a letter that is no unit
    ("会议持续三小时，休息三分钟，孩子三周岁", {"3小时", "3分钟", "3岁"}),
    ("两个小时，打七折是30％", {"2小时", "30%"}),
])
def test_numbers_carry_their_unit(text: str, expected: set[str]) -> None:
    assert numbers(text) == expected


ALIKE = np.array([[1.0, 0.0], [0.99, 0.14]], dtype=np.float32)


@pytest.mark.parametrize(("originals", "wrong", "right", "lost"), [
    (["Meet Bob at 3 pm.", "The meeting with Bob is at 3 pm."], "Meet Bob on March 3.", "Meet Bob at 3 p.m.", "3pm"),
    (["The user's bag weighs 5 kg.", "The bag of the user is 5 kg."], "The user's bag weighs 5 km.",
     "The user's bag weighs 5kg.", "5kg"),
    (["用户每天喝三杯咖啡。", "用户每天都要喝三杯咖啡。"], "用户每天喝三瓶咖啡。", "用户每天喝3杯咖啡。", "3杯"),
    (["用户每天喝2瓶水。", "用户每天都喝2瓶水。"], "用户每天喝2杯水。", "用户每天喝两瓶水。", "2瓶"),
    (["这件衣服打折30％。", "衣服的折扣是30%。"], "这件衣服打折30元。", "这件衣服打折30%。", "30%"),
], ids=["en-time", "en-weight", "zh-numerals", "zh-digits", "zh-percent"])
def test_a_number_is_kept_only_with_its_unit(originals: list[str], wrong: str, right: str, lost: str) -> None:
    bad = check(wrong, np.array([1.0, 0.0]), originals, ALIKE)
    assert not bad.passed and lost in bad.lost_keywords
    good = check(right, np.array([1.0, 0.0]), originals, ALIKE)
    assert good.passed and lost not in good.lost_keywords and good.invented_numbers == []


def test_a_unit_added_to_a_number_standing_alone_is_no_new_number() -> None:
    # "at 3" then "at 3 pm" says more, not something else; a day the originals never gave is made up.
    originals = ["The meeting is at 3.", "The meeting starts at 3."]
    assert check("The meeting is at 3 pm.", np.array([1.0, 0.0]), originals, ALIKE).passed
    dated = check("The meeting is on March 3 at 3.", np.array([1.0, 0.0]), ["Meet at 3 pm.", "Meet at 3 pm!"], ALIKE)
    assert not dated.passed and dated.invented_numbers == ["3日", "3月"]


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_llm_merge_changing_what_a_number_counts_keeps_the_originals(engine, lang) -> None:  # noqa: F811
    facts = {"en": ["The user meets Bob at 3 pm.", "The user's meeting with Bob is at 3 pm.",
                    "At 3 pm the user meets Bob.", "The user has a meeting with Bob at 3 pm."],
             "zh": ["用户每天喝三杯咖啡。", "用户每天都要喝三杯咖啡。", "每天喝三杯咖啡是用户的习惯。", "用户每天坚持喝三杯咖啡。"]}[lang]
    moved = {"en": "The user meets Bob on March 3.", "zh": "用户每天喝三瓶咖啡。"}[lang]
    scope = Scope("agent", "用户")
    originals = await add_facts(engine, scope, facts)
    with ScriptedLLM(default=ScriptedReply.text(moved)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, ConsolidationSettings(threshold=2, similarity=0.6)
                                    ).consolidate_scope("t", scope)
        await client.close()
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.method == "llm" and not merge.fidelity.passed and not merge.applied
    assert {"en": "3pm", "zh": "3杯"}[lang] in merge.fidelity.lost_keywords
    assert all(not r.deleted for r in await engine.rows("t", originals))
