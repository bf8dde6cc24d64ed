"""Keywords of a text, for the consolidation's fidelity check (what a merge must keep).

A keyword is what a reader would miss if a merge dropped it: capitalised words and phrases
(names, places, products) without stop words, snake_case identifiers, dotted paths
(`agentscope.memory.v1`, `config.yaml`), ALL_CAPS constants, Chinese segments (runs of CJK
characters cut at common function characters; no external segmenter), and numbers written in
digits (`7:15`, `2026-11-23`, `3.11`, `1,000`). Keywords are compared case-insensitively; a
number is kept only where it stands whole (`3` is not kept by `2023` or `3.5`).
"""

from __future__ import annotations

import re

# English words that start sentences or are capitalised without naming anything.
STOP_WORDS = frozenset(
    """a an the and or but if then so of to in on at by for with from as is are was were be been being
    i me my we our you your he she it its they them their this that these those there here what which who
    whom when where why how not no yes do does did has have had will would can could should may might must
    also just very all any each every some many much more most other such only own same than too again
    about after before over under into out up down off once during while until because between both
    user assistant today tomorrow yesterday please thanks thank hello hi ok okay""".split()
)
# Chinese function characters: a segment ends where one of them stands.
CHINESE_STOPS = frozenset("的了是在和与及或也就都而把被很吗呢吧啊呀这那有要会对从给让向我你他她它们个着过又还再并但却于以为之其就才将")

_SNAKE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_DOTTED = re.compile(r"\b[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+\b")
_ALL_CAPS = re.compile(r"\b[A-Z][A-Z0-9_]+\b")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9'’-]*(?:\s+[A-Z][A-Za-z0-9'’-]*)*")
# A number with its inner separators: a time, a date, a version, an amount, a code.
NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def _chinese_segments(text: str) -> list[str]:
    out: list[str] = []
    for run in _CJK_RUN.findall(text):
        segment = ""
        for ch in run:
            if ch in CHINESE_STOPS:
                if len(segment) >= 2:
                    out.append(segment)
                segment = ""
            else:
                segment += ch
        if len(segment) >= 2:
            out.append(segment)
    return out


def _capitalised(text: str) -> list[str]:
    out: list[str] = []
    for match in _CAPITALISED.findall(text):
        words = [w for w in match.split() if w.lower().strip("'’-") not in STOP_WORDS]
        if not words:
            continue
        phrase = " ".join(words)
        if len(phrase) >= 2:
            out.append(phrase)
    return out


def numbers(text: str) -> set[str]:
    """The numbers written in digits in `text`, whole."""
    return set(NUMBER.findall(text))


def keywords(text: str) -> set[str]:
    """The keywords of `text`, case-folded."""
    found: list[str] = list(numbers(text))
    found += _SNAKE.findall(text)
    found += _DOTTED.findall(text)
    found += [w for w in _ALL_CAPS.findall(text) if len(w) >= 2]
    # Identifiers and constants are keywords whole: their parts are not names of their own.
    rest = _ALL_CAPS.sub(" | ", _DOTTED.sub(" | ", _SNAKE.sub(" | ", text)))
    found += _capitalised(rest)
    found += _chinese_segments(text)
    return {k.casefold() for k in found if k.strip()}


def retained(keyword_set: set[str], text: str) -> tuple[float, list[str]]:
    """(share of `keyword_set` present in `text`, the keywords missing, sorted). No keywords
    to keep counts as everything kept."""
    if not keyword_set:
        return 1.0, []
    folded = text.casefold()
    present = numbers(text)
    lost = sorted(k for k in keyword_set if (k not in present if NUMBER.fullmatch(k) else k not in folded))
    return 1.0 - len(lost) / len(keyword_set), lost
