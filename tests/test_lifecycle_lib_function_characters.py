"""Keywords are cut at function characters where they are function characters, and only there:
"用户用Python写脚本" had the keyword "用户用" (用 was no function character), which a merge saying
"用户使用Python" lost; and "过敏", "会议", "开会" were no keywords at all (过 and 会 are function
characters elsewhere, so 敏 and 议 were left alone and dropped). English has the same: a word that
only begins a sentence ("Using Python", "Like I said") was taken into the name after it."""

from __future__ import annotations

import numpy as np
import pytest

from agentscope_memory.lifecycle.fidelity import check
from agentscope_memory.lifecycle.keywords import keywords
from agentscope_memory.lifecycle.summaries import extractive_merge


@pytest.mark.parametrize(("text", "found"), [
    ("用户用Python写脚本。", {"用户", "python", "写脚本"}),
    ("用户对花生过敏。", {"用户", "花生", "过敏"}),
    ("下午三点的重要会议在三楼。", {"下午三点", "3点", "重要", "会议", "三楼", "3楼"}),
    ("每周三用户要和张经理开会。", {"每周三", "周3", "用户", "张经理", "开会"}),
    ("有用户跟Bob比赛跑步。", {"用户", "bob", "比赛", "跑步"}),
    ("用户跑得很快，住在成都。", {"用户", "成都"}),
    ("Using Python, the user writes scripts.", {"python"}),
    ("Like I said, Bob Smith uses Python.", {"bob smith", "python"}),
    ("Use snake_case for config_loader.", {"snake_case", "config_loader"}),
])
def test_keywords_are_cut_at_function_characters_and_words(text: str, found: set[str]) -> None:
    assert keywords(text) == found


@pytest.mark.parametrize(("originals", "merged"), [
    (["用户用Python写脚本。"], "用户使用Python写脚本。"),
    (["Using Python, the user writes scripts.", "The user writes scripts in Python."], "The user writes scripts in Python."),
])
def test_a_rewording_of_a_function_word_loses_no_keyword(originals: list[str], merged: str) -> None:
    vectors = np.ones((len(originals), 2), dtype=np.float32)
    fidelity = check(merged, np.ones(2, dtype=np.float32), originals, vectors)
    assert fidelity.lost_keywords == [] and fidelity.keyword_retention == 1.0


def test_a_chinese_merge_keeps_a_word_made_with_a_function_character() -> None:
    # 开会 weighed as 开 alone: "用户明天开会" said nothing "用户明天开车" had not, and went.
    merged = extractive_merge(["用户明天开会。", "用户明天开车。"])
    assert "开会" in merged and "开车" in merged, merged


@pytest.mark.parametrize(("text", "found"), [
    # 比, 得 and 地 are function characters after what they belong to, not where a word begins.
    ("用户持有比特币。", {"用户", "比特币"}),
    ("用户跟地勤比较熟。", {"用户", "地勤", "比较"}),
    ("用户比较喜欢喝茶。", {"用户", "比较", "喜欢喝茶"}),
    ("他很得意。", {"得意"}),
    ("慢慢地走到地铁站。", {"慢慢", "走到", "地铁"}),
    ("用户比张三高。", {"用户", "张三高"}),
])
def test_a_word_beginning_with_a_trailing_function_character_is_kept(text: str, found: set[str]) -> None:
    assert keywords(text) == found


def test_a_chinese_merge_keeps_two_coins_apart() -> None:
    # 比特币 weighed as 特币, which 莱特币 already said: the bitcoin fact went.
    merged = extractive_merge(["用户持有莱特币。", "用户持有比特币。"])
    assert "莱特币" in merged and "比特币" in merged, merged
