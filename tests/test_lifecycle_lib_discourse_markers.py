"""A fact repeated with a discourse marker ("As I mentioned before: ...", "... (I said this
earlier)", "我之前说过：...", "...（再说一遍）") merges offline into the fact alone. The marker held
characters not said yet, so the offline merge kept the repetition whole beside the fact (or a
marker on its own as a sentence of the merge). Now a clause that only points back at what was
said keeps no sentence alive, and a sentence kept is kept without it."""

from __future__ import annotations

import itertools

import pytest

from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.keywords import is_discourse_marker, keywords, numbers
from agentscope_memory.lifecycle.summaries import extractive_merge, without_discourse_markers
from agentscope_memory.long_term import Scope
from tests.test_lifecycle_lib_llm_answers import add_facts, embedder, engine  # noqa: F401 (fixtures)

DEPLOY = "The deploy of release 2.4 is on Tuesday at 9 am, with Alice."
DOOR = "用户公寓的门禁密码是4711。"
REPEATED = {
    "en": ([f"As I mentioned before: {DEPLOY[0].lower()}{DEPLOY[1:]}", DEPLOY, f"{DEPLOY} (I said this earlier)",
            f"Just to repeat, {DEPLOY[0].lower()}{DEPLOY[1:]}", DEPLOY.replace(", with Alice.", ", with Alice, like I said.")],
           DEPLOY),
    # No original without a marker: the merge is the fact without one all the same.
    "en_all_marked": (["Again: the door code of the user's flat is 4711.", "Like I said, the door code of the user's flat is 4711.",
                       "The door code of the user's flat is 4711 (as I said before).",
                       "The door code of the user's flat, as I told you, is 4711."],
                      "The door code of the user's flat is 4711."),
    "zh": ([f"我之前说过：{DOOR}", DOOR, f"{DOOR[:-1]}（再说一遍）。", f"重复一下，{DOOR}"], DOOR),
    # Only the marker leaves: what stood between the clauses kept stays as written.
    "zh_colon": (["新习惯：用户骑自行车上班，每天5公里。", "我之前说过：新习惯：用户骑自行车上班，每天5公里。",
                  "新习惯：用户骑自行车上班，每天5公里（再说一遍）。"], "新习惯：用户骑自行车上班，每天5公里。"),
    "zh_all_marked": ([f"我之前说过：{DOOR}", f"{DOOR[:-1]}，如前所述。", f"再强调一次：{DOOR}"], DOOR),
}


@pytest.mark.parametrize("name", list(REPEATED))
def test_a_fact_repeated_with_a_discourse_marker_merges_into_the_fact_alone(name: str) -> None:
    texts, fact = REPEATED[name]
    # In every order (the consolidation's is by importance, then age, then id).
    merges = {extractive_merge(list(order)) for order in itertools.permutations(texts)}
    assert merges == {fact}


@pytest.mark.parametrize(("sentence", "without"), [
    ("As I mentioned before: the deploy is on Tuesday.", "The deploy is on Tuesday."),
    ("The deploy, as I said, is on Tuesday.", "The deploy is on Tuesday."),
    ("The deploy is on Tuesday (I said this earlier).", "The deploy is on Tuesday."),
    ("Once again, the code is 7:15 - I mentioned it already.", "The code is 7:15."),
    ("(I said this earlier)", ""),
    ("Again, -5 degrees is the limit.", "-5 degrees is the limit."),  # a minus is no dash
    # A clause of the fact stays, whatever words of saying it holds: a name, a negation, a word
    # that is not a speaker's or a time's.
    ("Bob said so: the deploy is on Tuesday.", "Bob said so: the deploy is on Tuesday."),
    ("The user said no.", "The user said no."),
    ("I didn't say that, the deploy is on Tuesday.", "I didn't say that, the deploy is on Tuesday."),
    ("The user failed the exam again.", "The user failed the exam again."),
    ("The alarm repeats at 7:15, 8:15 and 9:15.", "The alarm repeats at 7:15, 8:15 and 9:15."),
])
def test_only_a_clause_that_points_back_at_what_was_said_is_left_out(sentence: str, without: str) -> None:
    assert without_discourse_markers(sentence) == without


@pytest.mark.parametrize(("clause", "marker"), [
    ("我之前说过", True), ("再说一遍", True), ("重复一下", True), ("如前所述", True), ("just to repeat", True),
    ("like I said", True), ("again", True),
    ("张三说过", False), ("用户说过", False), ("上一次", False), ("用户不说", False), ("再说3遍", False),
    ("Bob said", False), ("the user repeated", False),
])
def test_a_discourse_marker_is_saying_with_nothing_but_speakers_and_time(clause: str, marker: bool) -> None:
    assert is_discourse_marker(clause) is marker


@pytest.mark.parametrize("name", list(REPEATED))
def test_a_discourse_marker_holds_no_keyword_a_merge_must_keep(name: str) -> None:
    texts, fact = REPEATED[name]
    assert set().union(*(keywords(t) for t in texts)) == keywords(fact)


def test_a_chinese_clause_of_the_fact_beside_a_marker_is_kept() -> None:
    merged = extractive_merge(["部署在周二。", "张三说过：部署在周二。", "我之前说过：部署在周二，和李娜一起。"])
    assert "张三说过" in merged and "李娜" in merged and "我之前说过" not in merged, merged


@pytest.mark.parametrize("name", ["en", "zh"])
async def test_the_consolidation_of_repeated_facts_offline_passes_its_fidelity_check(engine, name: str) -> None:  # noqa: F811
    scope = Scope("agent", "用户")
    texts, fact = REPEATED[name]
    originals = await add_facts(engine, scope, texts)
    report = await Consolidator(engine, settings=ConsolidationSettings(threshold=2, similarity=0.6)).consolidate_scope("t", scope)
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.method == "extractive" and merge.fidelity.passed and merge.applied, merge
    assert merge.text == fact and merge.fidelity.lost_keywords == [], merge
    assert numbers(merge.text) == set().union(*(numbers(t) for t in texts))
    assert (await engine.rows("t", [merge.memory_id]))[0].text == fact


@pytest.mark.parametrize("fact", [
    # Facts that merely hold words of saying or repeating: a fact each, kept whole.
    "Bob said the deploy is Tuesday.", "I said I'm allergic to peanuts.", "The user said again that the deploy is Tuesday.",
    "Alice repeated: the code is 4711.", "The user mentioned before that they moved to Berlin.",
    "He said, she said: the contract ends in May.", "Said differently, the deploy is Tuesday.",
    "用户说明天开会。", "用户说过他对花生过敏。", "用户再说一遍密码是4711。", "说明书在抽屉里。", "我之前说过的话不算数。",
    "前面说过的方案作废了。", "说好了，周五见。", "老板再三强调，周五前交。",
])
def test_a_fact_that_only_holds_words_of_saying_is_kept_whole(fact: str) -> None:
    assert without_discourse_markers(fact) == fact
    assert extractive_merge([fact]) == fact


@pytest.mark.parametrize(("texts", "merged"), [
    (["As I said, Bob said the deploy is Tuesday.", "Bob said the deploy is Tuesday."], "Bob said the deploy is Tuesday."),
    (["The user said the deploy is Tuesday.", "The deploy is Tuesday."], "The user said the deploy is Tuesday."),
    (["张三说明天开会。", "明天开会。"], "张三说明天开会。"),
])
def test_a_speaker_of_the_fact_is_kept_in_a_merge(texts: list[str], merged: str) -> None:
    assert {extractive_merge(list(order)) for order in itertools.permutations(texts)} == {merged}
