"""Token counts of tier items: cl100k (AutoContext's `Cl100kCounter`) or an estimate by script:
Loom's four characters per token for ASCII, about one token per CJK character, a token a
UTF-8 byte for characters tokenizers have no pieces for (see `text_tokens`)."""

from __future__ import annotations

import math
import re
from typing import Iterable

from agentscope_memory.message import (
    Base64Source, ContentBlock, Msg, MsgRole, TextBlock, ThinkingBlock, ToolResultBlock, URLSource,
)
from agentscope_memory.short_term.auto_context.summarizers import render
from agentscope_memory.short_term.auto_context.tokens import Cl100kCounter, TokenCounter
from agentscope_memory.short_term.tiered.config import CL100K

# What a chat format adds per message (role, separators).
MESSAGE_OVERHEAD = 4


def _unrendered(block: ContentBlock) -> Iterable[str]:
    """Text a block carries that its text rendering leaves out: thinking, and media inline or by
    URL. They travel in every message returned (a projection's too), so a budget counts them:
    a 2 MB thinking block or image counted as one word let a projection of 100 tokens exceed 4 MiB."""
    if isinstance(block, ThinkingBlock):
        yield block.thinking
    elif isinstance(block, ToolResultBlock):
        for inner in block.output:
            yield from _unrendered(inner)
    else:
        source = getattr(block, "source", None)
        if isinstance(source, Base64Source):
            yield source.data
        elif isinstance(source, URLSource):
            yield source.url


# Tokens per character by script, fitted to cl100k_base on running text (Chinese, Japanese,
# Korean, Russian, Greek, Arabic, Hebrew, Hindi, Thai, German, French, Polish, Vietnamese; the
# bounds are tested in tests/test_tiered_lib_tokens.py). Loom's one token per four characters holds for English
# only: a Chinese character is a token or more, so at 4 characters a token a Chinese
# conversation overran every budget about fourfold. Where a class errs, it errs high: a
# budget overrun is the failure that matters, a few tokens of slack is not.
_WEIGHTS: list[tuple[re.Pattern[str], float]] = [
    # Common Han, kana, hangul (rare Han, radicals, bopomofo and yi are in _BYTE_FALLBACK).
    (re.compile("[\u3040-\u30ff\u3130-\u319f\u31f0-\u31ff\u4e00-\u9fff\uac00-\ud7ff]+"), 1.25),
    # CJK punctuation and fullwidth forms: mostly a token each (，。「」（）). Not the halfwidth
    # katakana and hangul between them (ｶﾀｶﾅ), two tokens each and more.
    (re.compile("[\u3000-\u303f\uff00-\uff60\uffdd-\uffef]+"), 1.0),
    # Accented Latin (Latin-1 to Extended-B): words break at them. Vietnamese letters (U+1E00 on)
    # are about a token each, as other scripts.
    (re.compile("[\u0080-\u024f]+"), 0.75),
    # Cyrillic: cl100k holds many Russian pieces.
    (re.compile("[\u0400-\u052f]+"), 0.4),
    # Emoji and the other symbols of plane 1 (mathematical letters, music): two to three tokens.
    (re.compile("[\U0001d000-\U0001ffff\U00040000-\U000dffff]+"), 2.5),
    # Circled and parenthesised numbers (①②③ numbering a Chinese list, ⑴, ⒈), halfwidth
    # katakana and hangul: two tokens each; at a token each (as the symbols and the fullwidth
    # forms around them) a budget of them held twice their tokens. Circled letters (ⓐ Ⓐ) are
    # spelled byte by byte (_BYTE_FALLBACK).
    (re.compile("[\u2460-\u24b5\u24ea-\u24ff\uff61-\uffdc]+"), 2.0),
]
# Blocks a byte-level BPE tokenizer has next to no tokens for, so it spells each character in
# its UTF-8 bytes, up to a token a byte: cl100k spends 0.95-1 token a byte on a sample of each
# block (Qwen's larger vocabulary 0.5-1). Rare Han (CJK extension A, B and on, compatibility
# ideographs, radicals, description characters), bopomofo, CJK strokes, enclosed and compatibility
# CJK (㈱ ㎡), circled Latin letters (ⓐ), hexagrams, yi; Braille; combining marks (a Zalgo text,
# a Vietnamese or Korean one decomposed: every mark or jamo its own code point); IPA, Armenian, Ethiopic, Cherokee, Canadian
# syllabics, Ogham, runes, Mongolian, polytonic Greek; private use; plane 1's scripts (Linear B,
# hieroglyphs, cuneiform) and the planes beyond it but for emoji. Counted at a token a character
# or so, a budget of these held two to four times its tokens; a token a byte is what such text
# costs, never less.
_BYTE_FALLBACK = re.compile(
    "[\u0250-\u02af\u0300-\u036f\u0530-\u058f\u1100-\u11ff\u1200-\u139f\u13a0-\u13ff\u1400-\u169f"
    "\u16a0-\u16ff\u1800-\u18ff\u1ab0-\u1aff\u1dc0-\u1dff\u1f00-\u1fff\u20d0-\u20ff\u24b6-\u24e9\u2800-\u28ff"
    "\u2e80-\u2fff\u3100-\u312f\u31a0-\u31ef\u3200-\u33ff\u3400-\u4dff\ua000-\ua4cf\ue000-\uf8ff"
    "\uf900-\ufaff\ufe20-\ufe2f\U00010000-\U0001cfff\U00020000-\U0003ffff\U000e0000-\U0010ffff]+")
# Every other non-ASCII character (Greek, Hebrew, Arabic, Indic, Thai, symbols, ...).
_OTHER = 1.0
_ASCII = 0.25
_ASCII_RUNS = re.compile("[\x00-\x7f]+")


def text_tokens(text: str) -> float:
    """The estimated tokens of `text`, unrounded (a message adds up its parts, then rounds up).
    ASCII is Loom's four characters a token; other scripts weigh what cl100k gives them, and
    characters tokenizers have no pieces for their UTF-8 bytes. Never more than those bytes."""
    if text.isascii():
        return len(text) * _ASCII
    ascii_chars = sum(map(len, _ASCII_RUNS.findall(text)))
    total = ascii_chars * _ASCII
    rest = len(text) - ascii_chars
    for pattern, weight in _WEIGHTS:
        n = sum(map(len, pattern.findall(text)))
        total += n * weight
        rest -= n
    for run in _BYTE_FALLBACK.findall(text):
        total += len(run.encode("utf-8"))
        rest -= len(run)
    return total + rest * _OTHER


class CharEstimate:
    """The message as text, with what that text leaves out (thinking, media), at `text_tokens`'
    rates, rounded up, plus the per-message overhead."""

    def count(self, msgs: Iterable[Msg | None]) -> int:
        return sum(MESSAGE_OVERHEAD + math.ceil(text_tokens(render(m)) + sum(text_tokens(t) for b in m.content for t in _unrendered(b)))
                   for m in msgs if m is not None)


class Counters:
    """One counter of each kind, made when first needed (cl100k loads its tables once)."""

    def __init__(self) -> None:
        self._estimate = CharEstimate()
        self._cl100k: Cl100kCounter | None = None

    def get(self, name: str) -> TokenCounter:
        if name == CL100K:
            if self._cl100k is None:
                self._cl100k = Cl100kCounter()
            return self._cl100k
        return self._estimate

    def text(self, name: str, text: str) -> int:
        return self.get(name).count([Msg(role=MsgRole.SYSTEM, content=[TextBlock(text)])])
