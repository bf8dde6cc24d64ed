"""Texts the lifecycle writes: reflections, merged facts, compressed recall summaries.

Each comes from the configured LLM (prompts written for this project) or, offline, from a
deterministic extractive method; the caller marks which in the memory's metadata.
"""

from __future__ import annotations

import itertools
import logging
import re
from typing import Sequence

from agentscope_memory.errors import DeadlineExceededError, UnavailableError
from agentscope_memory.lifecycle.keywords import (function_characters, is_discourse_marker, is_number, keywords,
                                                  without_numbers)
from agentscope_memory.llm import ChatClient, strip_thinking

log = logging.getLogger("agentscope_memory.lifecycle")

EXTRACTIVE = "extractive"
LLM = "llm"
# What a failed LLM call raises (`llm.py`): the offline method answers instead.
LLM_ERRORS = (UnavailableError, DeadlineExceededError)

REFLECTION_PROMPT = (
    "You maintain the long-term memory of an assistant. Below are facts it learned recently about "
    "one user or task, one per line. Write ONE short paragraph of higher-level insight that states "
    "what these facts say together (patterns, preferences, plans), keeping every name, place, "
    "number and identifier they mention. Write in the language of the facts. Answer with the "
    "paragraph only."
)
MERGE_PROMPT = (
    "These notes from an assistant's long-term memory say nearly the same thing. Rewrite them as "
    "ONE note that keeps every distinct detail (names, values, dates, identifiers) and drops the "
    "repetition. Write in the language of the notes. Answer with the note only."
)
COMPRESS_PROMPT = (
    "An assistant recalled the memories below for the question given. Summarise what they say "
    "that helps answer it in at most {max_chars} characters, keeping names, numbers and "
    "identifiers. Write in the language of the memories. Answer with the summary only."
)

# A Latin full stop ends a sentence only before whitespace: "3.11", "config.yaml" and
# "alice@example.com" are one word. Chinese ones end it where they stand.
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])\s*")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text.strip()) if s.strip()]


def _bigrams(sentence: str) -> set[str]:
    folded = sentence.casefold()
    return {folded[i:i + 2] for i in range(max(1, len(folded) - 1))}


def _novel(sentence: str, seen: set[str], min_share: float) -> bool:
    """A sentence adds something when at least `min_share` of its characters' bigrams are new."""
    grams = _bigrams(sentence)
    fresh = grams - seen
    if len(fresh) < min_share * len(grams) or not fresh:
        return False
    seen |= grams
    return True


def extractive_merge(texts: Sequence[str], max_chars: int = 4000, min_share: float = 0.25) -> str:
    """The originals' sentences, each kept only if at least `min_share` of it is not said yet or
    it holds a detail (number, keyword) not said yet: "at 7:15" and "at 8:45" differ in two
    characters and are two facts. A Chinese sentence is weighed clause by clause
    (`_ChineseClauses`): near-duplicate Chinese facts word the same things differently, so
    nearly every sentence of theirs held a keyword (a segment) not said yet, and the merge kept
    them all.

    The same originals merge into the same text whatever order they come in (of importance, of
    age, of id: the consolidation's): what is kept of one depends on what was said before it,
    and above all on which went first, whose wording the others are weighed against. So each
    original in turn goes first, the others after it longest first (ties in code-point order),
    and the shortest merge is the one (ties in code-point order): every one keeps every number
    and name, the shortest repeats least. Merges cut at `max_chars` come after whole ones, the
    longest of them first (it kept the most)."""
    ordered = sorted(texts, key=lambda t: (-len(t), t))
    best: tuple[bool, int, str] | None = None  # (cut, length or minus it when cut, text): least is best
    for i, first in enumerate(ordered):
        if first in ordered[:i]:
            continue  # the same text first: the same merge
        # A merge longer than a whole one already made cannot be the one: given up there.
        limit = best[1] if best is not None and not best[0] else None
        merged = _merge_in_order([first, *ordered[:i], *ordered[i + 1:]], max_chars, min_share, limit)
        if merged is None:
            continue
        cut, text = merged
        candidate = (cut, -len(text) if cut else len(text), text)
        if best is None or candidate < best:
            best = candidate
    return best[2] if best is not None else ""


# What closes a sentence with no space needed after it (`_join`).
_CLOSERS = "。！？；）」』”"


def _merge_in_order(texts: Sequence[str], max_chars: int, min_share: float,
                    limit: int | None) -> tuple[bool, str] | None:
    """The originals' sentences in this order (see `extractive_merge`), and whether they were cut
    at `max_chars`; None once the merge is longer than `limit` characters."""
    seen: set[str] = set()
    said: set[str] = set()
    chinese = _ChineseClauses()
    kept: list[str] = []
    size = length = 0
    for text in texts:
        for sentence in _sentences(text):
            if _CJK.search(sentence):
                sentence = chinese.novel(sentence, said)
                if not sentence:
                    continue
                seen |= _bigrams(sentence)
            else:
                # Weighed and kept without what only points back at what was said ("As I
                # mentioned before:"), which would have made a repeated fact look new.
                sentence = without_discourse_markers(sentence)
                if not sentence:
                    continue
                # What a merge must not drop however little of the sentence is new: its keywords
                # (numbers, names, identifiers, Chinese segments).
                new_details = keywords(sentence) - said
                if not new_details and not _novel(sentence, seen, min_share):
                    continue
                said |= new_details
                if new_details:  # kept without asking `_novel`, which adds what it accepts to `seen`
                    seen |= _bigrams(sentence)
            if size + len(sentence) + 1 > max_chars:
                return True, _join(kept)
            length += len(sentence) + (1 if kept and kept[-1][-1] not in _CLOSERS else 0)
            if limit is not None and length > limit:
                return None
            kept.append(sentence)
            size += len(sentence) + 1
    return False, _join(kept)


_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# Where a Chinese sentence's clauses meet: commas, colons, brackets and quotes; a Latin comma or
# colon only where no digit follows ("7:15" and "1,000" are one number).
_CLAUSE = re.compile(r"(?:[，、：；（）()“”\"「」『』]|[,:;](?!\d))+")
_CLAUSE_SPLIT = re.compile(f"({_CLAUSE.pattern})")  # the same, keeping what stood between
_PLAIN_SEPARATORS = "，、：；,:;"
_NEGATIONS = frozenset("不没无非未别勿莫否")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.@-]*")
_SENTENCE_END_MARK = re.compile(r"[。！？；.!?;]+$")

# Discourse markers (`keywords.is_discourse_marker`) are left out of an English sentence where
# they are clauses of it. Where a Latin sentence's clauses meet, kept in the split: a comma, colon or semicolon (not inside
# a number: "7:15", "1,000"), a bracket, a dash.
_LATIN_CLAUSE = re.compile(r"(\s*(?:[,;:](?!\d)|[()\[\]（）—–]|\s-\s)\s*)")
_PAIRED = {(",", ","), ("(", ")"), ("[", "]"), ("（", "）"), ("—", "—"), ("–", "–"), ("-", "-")}


def without_discourse_markers(sentence: str) -> str:
    """A Latin sentence without its discourse-marker clauses and the punctuation that set them
    apart ("As I mentioned before: the deploy is on Tuesday." -> "The deploy is on Tuesday."); ""
    when it is nothing else. The sentence as it is when it has none."""
    end = _SENTENCE_END_MARK.search(sentence)
    body, tail = (sentence[:end.start()], end.group()) if end else (sentence, "")
    parts = _LATIN_CLAUSE.split(body)  # clause, separator, clause, ..., clause
    if not any(is_discourse_marker(parts[j]) for j in range(0, len(parts), 2)):
        return sentence
    j = 0
    while j < len(parts):
        if not is_discourse_marker(parts[j]):
            j += 2
            continue
        if len(parts) == 1:
            return ""
        if j == 0:  # first: with the separator after it
            del parts[0:2]
        elif j == len(parts) - 1:  # last: with the separator before it
            del parts[j - 1:j + 1]
        else:  # between two: set apart by a pair ("X, as I said, Y", "X (again) Y") or after the other
            left, right = parts[j - 1], parts[j + 1]
            parts[j - 1:j + 2] = [" " if (left.strip(), right.strip()) in _PAIRED else left]
        j = max(0, j - 2)
    text = "".join(parts).strip()
    text = re.sub(r"\s+", " ", re.sub(r"\s+([,;:.!?)\]）])", r"\1", re.sub(r"([(\[（])\s+", r"\1", text)))
    # A separator left at either end; a hyphen only with a space beside it ("-5 degrees" is a number).
    text = re.sub(r"^(?:[,;:—–]|-(?=\s))\s*|\s*(?:[,;:—–]|(?<=\s)-)$", "", text)
    if not re.search(r"\w", text):
        return ""
    if sentence[:1].isupper() and text[:1].islower():  # it began the sentence: "As I said, the..." -> "The..."
        text = text[0].upper() + text[1:]
    return text + tail


def _join(sentences: list[str]) -> str:
    """Sentences as one text: a space after a Latin sentence, none after a Chinese full stop."""
    out = ""
    for sentence in sentences:
        out += sentence if not out or out[-1] in _CLOSERS else " " + sentence
    return out


def _details(clause: str) -> set[str]:
    """What a Chinese clause must not lose in a merge however alike it is: its numbers (with
    their counters, "周6", "3点") and its keywords that are not Chinese segments (names and
    identifiers in Latin letters)."""
    found = {k for k in keywords(clause) if is_number(k) or not _CJK.search(k)}
    # Every Latin word of a Chinese clause is a name or an identifier, also one in lower case
    # ("用python写"), which `keywords` takes for an English word.
    return found | {w.casefold() for w in _LATIN_WORD.findall(clause)}


class _ChineseClauses:
    """What a Chinese merge has said so far, and which clauses of a new sentence say nothing more.

    A clause adds nothing when its numbers and names (`_details`) are said, and what it says
    (function characters aside: 的, 是, 在...) is said: every character, and at least 60% of its
    character pairs (a reordering, "用户过敏，因为花生" after "用户对花生过敏"; "李四打张三" after
    "张三打李四" is 50% and stays), or, but for one character inserted between two said side by
    side ("用户的公寓门禁密码" after "用户公寓门的密码"), the same. A character that replaces one ("张明" for
    "王明", "喜欢狗" for "喜欢猫": the pair around it is not said) or a negation (不, 没...)
    keeps the clause."""

    def __init__(self) -> None:
        self.chars: set[str] = set()
        self.pairs: set[str] = set()

    @staticmethod
    def _content(clause: str) -> str:
        """The clause's Chinese characters, function characters and numbers left out (numbers
        are weighed whole, by `_details`); "|" where a number stood, which no pair spans."""
        text = without_numbers(clause, "|")
        functions = function_characters(text)
        return "".join(ch for i, ch in enumerate(text) if ch == "|" or (_CJK.match(ch) and i not in functions))

    @staticmethod
    def _pairs(content: str) -> list[str]:
        return [p for p in (content[i:i + 2] for i in range(len(content) - 1)) if "|" not in p]

    def _adds_nothing(self, clause: str, said: set[str]) -> bool:
        if is_discourse_marker(clause):  # "我之前说过", "再说一遍": no fact of its own
            return True
        if _details(clause) - said:
            return False
        content = self._content(clause)
        new = [i for i, ch in enumerate(content) if ch != "|" and ch not in self.chars]
        if not new:
            pairs = self._pairs(content)
            return (sum(p in self.pairs for p in pairs) / len(pairs) if pairs else 1.0) >= 0.6
        # One character inserted inside what is said ("门禁密码" after "门的密码", "过敏" after
        # "过敏"): the clause without it is said pair by pair. Not at either end, where a new
        # character replaces one ("喜欢狗" after "喜欢猫"), and never a negation.
        if len(new) != 1 or not 0 < new[0] < len(content) - 1 or content[new[0]] in _NEGATIONS:
            return False
        at = new[0]
        if content[at - 1] + content[at + 1] not in self.pairs:  # replaced, not inserted: "和王经理" for "和张经理"
            return False
        rest = self._pairs(content[:at] + content[at + 1:])
        return sum(p in self.pairs for p in rest) / len(rest) >= 0.6

    def novel(self, sentence: str, said: set[str]) -> str:
        """`sentence` with the clauses that add nothing left out ("" when none adds anything),
        and what it says from now on said."""
        end = _SENTENCE_END_MARK.search(sentence)
        body = sentence[:end.start()] if end else sentence
        parts = _CLAUSE_SPLIT.split(body)  # clause, separator, clause, ..., clause
        clauses = [(i, c.strip()) for i, c in enumerate(parts[0::2]) if c.strip()]
        kept = [(i, c) for i, c in clauses if not self._adds_nothing(c, said)]
        for _, clause in kept:
            said |= _details(clause)
            content = self._content(clause)
            self.chars |= set(content) - {"|"}
            self.pairs |= set(self._pairs(content))
        if not kept:
            return ""
        if len(kept) == len(clauses):
            return sentence  # whole, as it was written
        # Two clauses kept side by side keep what stood between them ("新习惯：我..." after a
        # "我之前说过：" left out), unless it opens or closes a bracket or quote; else a comma.
        out = kept[0][1]
        for (before, _), (at, clause) in itertools.pairwise(kept):
            between = parts[2 * at - 1].strip()
            out += (between if at == before + 1 and between and all(ch in _PLAIN_SEPARATORS for ch in between)
                    else "，") + clause
        return out + (end.group() if end and _CJK.search(end.group()) is None else "。")


def extractive_summary(texts: Sequence[str], max_chars: int) -> str:
    """The texts' novel sentences, best first, cut to at most `max_chars` characters."""
    out = ""
    seen: set[str] = set()
    for text in texts:
        for sentence in _sentences(text):
            if not _novel(sentence, seen, 0.25):
                continue
            candidate = f"{out} {sentence}".strip() if out else sentence
            if len(candidate) > max_chars:
                if not out:
                    return sentence[: max(0, max_chars - 1)] + "…" if max_chars > 1 else sentence[:max_chars]
                return out
            out = candidate
    return out


# What a chat model puts before the note it was asked for, stored word for word until removed:
# a courtesy ("Sure!", "好的，"), a line introducing the note ("Here is the merged note:",
# "以下是合并后的记忆：") and a markdown heading. An introduction is only taken off when it ends in
# a colon and starts with one of these words: a note that starts "The user..." stays whole.
_COURTESY = re.compile(r"^(?:sure|certainly|of course|okay|ok|absolutely|great|no problem)\b[!.,]*\s*"
                       r"|^(?:好的|当然|没问题|可以)[!！。，,]*\s*", re.IGNORECASE)
_INTRODUCTION = re.compile(
    r"^[*_]*(?:here(?:'s|’s| is| are)|below is|the (?:merged|combined|consolidated|rewritten|single)"
    r"|merged|combined|consolidated|rewritten|reflection|insight|summary|note"
    r"|以下|下面|这是|合并后|整合后|合并的|反思|总结|摘要|洞察)[^\n:：]{0,80}[:：][*_]*[ \t]*\n?\s*", re.IGNORECASE)
_HEADING = re.compile(r"^(?:#{1,6}[ \t][^\n]*|\*\*[^\n*]{1,80}\*\*[ \t]*)\n\s*")
_FENCE = re.compile(r"^```[\w-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "「": "」", "『": "』", "«": "»"}


def clean_answer(text: str) -> str:
    """A model's note without what only frames it: its `<think>` blocks, a courtesy, an
    introducing line, a heading, a code fence, bold or quotes around all of it. What the fidelity
    check weighs and what is stored is the note itself."""
    text = strip_thinking(text)
    for _ in range(4):  # "Sure! Here is the merged note:\n```\n...\n```": one frame after the other
        before = text
        text = _COURTESY.sub("", text, count=1).strip()
        text = _HEADING.sub("", text, count=1).strip()
        text = _INTRODUCTION.sub("", text, count=1).strip()
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1).strip()
        if text.startswith("**") and text.endswith("**") and len(text) > 4 and "**" not in text[2:-2]:
            text = text[2:-2].strip()  # bold around all of it
        close = _QUOTES.get(text[:1])
        # Only quotes around the whole: '"Lisbon" is where the user lives' keeps its own.
        if close and len(text) > 1 and text.endswith(close) and close not in text[1:-1]:
            text = text[1:-1].strip()
        if text == before:
            break
    return text


async def ask(llm: ChatClient, instruction: str, lines: Sequence[str], extra: str = "") -> str:
    """The model's answer, cleaned (`clean_answer`); "" when nothing but framing was in it."""
    body = (extra + "\n\n" if extra else "") + "\n".join(f"- {line}" for line in lines)
    result = await llm.chat([{"role": "system", "content": instruction}, {"role": "user", "content": body}],
                            temperature=0)
    return clean_answer(result.text)
