"""The lexical leg's tokenizer: what a stored memory and a query have in common after tokenising
decides whether BM25 can find it, in English and in Chinese."""

from __future__ import annotations

import pytest

from agentscope_memory.long_term.text import stem, tokenize


def shared(a: str, b: str) -> set[str]:
    return set(tokenize(a)) & set(tokenize(b))


def test_english_drops_stop_words_and_case() -> None:
    assert tokenize("I switched from Tea to COFFEE") == ["switch", "tea", "coffee"]
    assert tokenize("What is it that you are doing?") == []


@pytest.mark.parametrize(
    "forms",
    [
        ["like", "likes", "liked", "liking"],
        ["run", "runs", "running"],
        ["study", "studies", "studied", "studying"],
        ["hike", "hikes", "hiked", "hiking"],
        ["box", "boxes"],
        ["dish", "dishes"],
        ["stop", "stopped", "stopping"],
        ["try", "tries", "tried"],
        ["house", "houses"],
        ["movie", "movies"],
        ["city", "cities"],
    ],
)
def test_english_word_forms_share_one_term(forms: list[str]) -> None:
    assert len({stem(f) for f in forms}) == 1, {f: stem(f) for f in forms}


@pytest.mark.parametrize("word", ["coffee", "tennis", "need", "thing", "bus", "free", "analysis"])
def test_stemming_leaves_words_without_those_suffixes_alone(word: str) -> None:
    assert stem(word) == word


def test_contractions_and_possessives_keep_their_stem() -> None:
    assert tokenize("Tom's sister doesn't eat meat") == ["tom", "sister", "eat", "meat"]
    assert tokenize("Tom’s") == ["tom"]  # typographic apostrophe


def test_numbers_are_kept() -> None:
    assert tokenize("Flight at 10:30 on 2024-03-05, costs 10,000 yen, 3.5km") == [
        "flight", "10:30", "2024", "03", "05", "cost", "10000", "yen", "3.5", "km",
    ]
    # Full-width digits (common in Chinese text) are the same numbers.
    assert tokenize("２０２４年") == ["2024", "年"]


def test_chinese_gives_characters_and_bigrams() -> None:
    tokens = tokenize("我喜欢喝咖啡")
    assert {"喜欢", "咖啡", "喝咖", "咖", "啡", "喝"} <= set(tokens)
    assert "我" not in tokens  # function character alone
    assert tokens.count("咖啡") == 1


def test_chinese_keeps_negation_and_time_words() -> None:
    tokens = tokenize("我现在不喜欢喝茶")
    assert {"现在", "不喜", "不", "喝茶"} <= set(tokens)


def test_chinese_memory_and_rephrased_query_share_the_topic_word() -> None:
    memory = "用户最近从喝茶改成了喝咖啡"
    query = "他现在早上喝什么咖啡？"
    assert "咖啡" in shared(memory, query)
    assert not shared(memory, "我周末去爬山")


def test_mixed_chinese_and_english_split_at_the_script_boundary() -> None:
    assert {"iphon", "手机", "手", "机"} <= set(tokenize("我用iPhone手机"))
    assert "iphon" in shared("我用iPhone手机", "Which phone? iPhone")


def test_japanese_kana() -> None:
    tokens = tokenize("東京でラーメンを食べました")
    assert {"東京", "ラ", "メン", "食べ"} <= set(tokens)
    assert "で" not in tokens and "を" not in tokens  # particles alone are not terms


def test_other_scripts_are_whitespace_words() -> None:
    assert tokenize("Café résumé") == ["café", "résumé"]
    assert tokenize("안녕하세요 반갑습니다") == ["안녕하세요", "반갑습니다"]


def test_empty_and_punctuation_only() -> None:
    assert tokenize("") == []
    assert tokenize("？！…，。 --- !!!") == []
