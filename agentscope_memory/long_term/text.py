"""Tokens for the lexical (BM25) leg of long-term recall, for English and Chinese alike.

`tokenize` turns a text into index terms, in text order and with repeats (BM25 counts them):

- Text is NFKC-normalised and case-folded, so full-width digits and letters (１２, ＡＢ) match
  their ASCII forms.
- Latin-script words lose English stop words and are lightly stemmed by a few suffix rules
  (plural, -ing, -ed, a final silent e), so "likes", "liked", "liking" and "like" share a term.
  Contractions keep their stem ("don't" -> "do", a stop word; "Tom's" -> "tom").
- Numbers are kept whole and split from units ("2024", "3.5km" -> "3.5" "km", "10:30";
  "10,000" -> "10000").
- Chinese has no spaces, and a word segmenter needs a dictionary that is either large or wrong
  on names, so each run of Han characters gives its characters (minus a few function
  characters) and every adjacent pair (character bigrams). A two-character word then matches
  exactly through its bigram and a paraphrase still shares characters. Japanese kana runs get the
  same bigrams; katakana characters (loanwords) also count alone, hiragana alone are mostly
  particles and do not.
- Korean Hangul and other scripts fall back to whitespace words.

Keep this function's output stable: stored lexical indexes are built from it.
"""

from __future__ import annotations

import itertools
import re
import unicodedata

__all__ = ["ENGLISH_STOP_WORDS", "tokenize"]

# Function words that carry no topic. Negations ("not", "no", "never") are here too: BM25 cannot
# use them (they match everything) and the dense leg handles polarity.
ENGLISH_STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other ought our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    also am im ive id ill youre youve theyre dont doesnt didnt cant wont isnt arent wasnt
    yes yeah ok okay oh um uh hmm well really just still ever never get got us let lets shall may
    might must
    """.split()
)

# Han characters that are grammar rather than topic. They are dropped as single-character terms
# only; bigrams containing them stay unless both characters are listed, so 现在 (now) or 不喜欢
# (dislike) keep their meaning.
_CHINESE_STOP_CHARS = frozenset("的了是在我你他她它们吗呢吧啊呀哦嗯和与及也都就还又把被给对从这那个之其而且或么")
_CHINESE_STOP_BIGRAMS = frozenset({"我们", "你们", "他们", "她们", "它们", "这个", "那个", "什么", "怎么", "一个", "就是"})

# Scripts handled as runs of characters rather than words.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_HIRAGANA = "\u3041-\u309f"
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_CJK = _HAN + _HIRAGANA + _KATAKANA

_TOKEN = re.compile(
    rf"(?P<cjk>[{_CJK}]+)"
    r"|(?P<num>\d+(?:[.,:]\d+)*)"
    rf"|(?P<word>[^\W_{_CJK}]+(?:'[^\W_{_CJK}]+)*)"
)
_HIRAGANA_CHAR = re.compile(rf"[{_HIRAGANA}]")
_VOWEL = re.compile(r"[aeiouy]")
_CONTRACTION = re.compile(r"(?:n't|'s|'re|'ve|'ll|'d|'m|')$")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+$")


def tokenize(text: str) -> list[str]:
    """Index terms of `text` for BM25: English stems without stop words, numbers, and CJK
    character unigrams and bigrams. Deterministic; the same function serves documents and queries."""
    normalised = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    tokens: list[str] = []
    for match in _TOKEN.finditer(normalised):
        if match.lastgroup == "cjk":
            tokens += _cjk_terms(match.group())
        elif match.lastgroup == "num":
            tokens.append(_number(match.group()))
        else:
            term = _word(match.group())
            if term:
                tokens.append(term)
    return tokens


def _number(raw: str) -> str:
    if _THOUSANDS.match(raw):
        return raw.replace(",", "")
    return raw.rstrip(".,:")


def _word(raw: str) -> str | None:
    word = raw
    while True:  # "we'd've" -> "we"
        stripped = _CONTRACTION.sub("", word)
        if stripped == word:
            break
        word = stripped
    if word.isdigit():
        return word
    if len(word) < 2 or word in ENGLISH_STOP_WORDS or raw.replace("'", "") in ENGLISH_STOP_WORDS:
        return None
    if not word.isascii():
        return word  # no stemming rules for other languages
    return stem(word)


def stem(word: str) -> str:
    """A light English stemmer: plural, -ing, -ed and a final silent e. Deliberately small: it
    must never merge unrelated words, and it only has to map a word's common forms together."""
    if len(word) <= 3 or not word.isalpha():
        return word
    # Plurals and third person.
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses") or (
        word.endswith("es") and ((word[-3] in "sxz" and len(word) > 4) or word[-4:-2] in ("ch", "sh"))
    ):
        word = word[:-2]
    elif word.endswith("s") and word[-2] not in "su'" and not word.endswith("is"):
        word = word[:-1]
    # -ing / -ed, only when a real stem with a vowel is left ("thing", "need", "bred" stay).
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and not word.endswith("eed"):
            base = word[: -len(suffix)]
            if len(base) >= 3 and _VOWEL.search(base):
                word = base
                # Undo a doubled final consonant: running -> run, stopped -> stop.
                if len(word) >= 4 and word[-1] == word[-2] and word[-1] in "bgmnprt":
                    word = word[:-1]
                elif word.endswith("i") and suffix == "ed":
                    word = word[:-1] + "y"  # tried -> try
                break
    # A final silent e: like/liked/liking -> lik, but coffee and free stay.
    if len(word) >= 4 and word.endswith("ie"):
        word = word[:-2] + "y"  # movie and movies (-> movy) meet where -ies plurals end
    elif len(word) >= 4 and word.endswith("e") and word[-2] not in "ey":
        word = word[:-1]
    return word


def _cjk_terms(run: str) -> list[str]:
    terms: list[str] = []
    for char in run:
        if _HIRAGANA_CHAR.match(char) or char in _CHINESE_STOP_CHARS or char == "\u30fc":
            continue
        terms.append(char)
    for first, second in itertools.pairwise(run):
        pair = first + second
        if pair in _CHINESE_STOP_BIGRAMS or (first in _CHINESE_STOP_CHARS and second in _CHINESE_STOP_CHARS):
            continue
        if _HIRAGANA_CHAR.match(first) and _HIRAGANA_CHAR.match(second):
            continue  # two particles/inflection endings in a row
        terms.append(pair)
    return terms
