"""Texts the lifecycle writes: reflections, merged facts, compressed recall summaries.

Each comes from the configured LLM (prompts written for this project) or, offline, from a
deterministic extractive method; the caller marks which in the memory's metadata.
"""

from __future__ import annotations

import logging
import re
from typing import Sequence

from agentscope_memory.errors import DeadlineExceededError, UnavailableError
from agentscope_memory.lifecycle.keywords import keywords
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
    """The originals' sentences in order, each kept only if at least `min_share` of it is not
    said yet or it holds a detail (number, keyword) not said yet: "at 7:15" and "at 8:45" differ
    in two characters and are two facts."""
    seen: set[str] = set()
    said: set[str] = set()
    kept: list[str] = []
    size = 0
    for text in texts:
        for sentence in _sentences(text):
            # What a merge must not drop however little of the sentence is new: its keywords
            # (numbers, names, identifiers, Chinese segments).
            new_details = keywords(sentence) - said
            if not new_details and not _novel(sentence, seen, min_share):
                continue
            said |= new_details
            if new_details:  # kept without asking `_novel`, which adds what it accepts to `seen`
                seen |= _bigrams(sentence)
            if size + len(sentence) + 1 > max_chars:
                return " ".join(kept)
            kept.append(sentence)
            size += len(sentence) + 1
    return " ".join(kept)


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
    introducing line, a heading, a code fence or quotes around all of it. What the fidelity
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
