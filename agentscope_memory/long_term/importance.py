"""How much a recorded round matters, what fact it states and in which domain.

`LlmScorer` asks the configured OpenAI-compatible LLM once per recorded round for a JSON object
`{"importance_score", "extracted_fact", "domain"}`. `HeuristicScorer` is the offline,
deterministic default (English and Chinese): cue patterns, no model. Every `Assessment` says
which one produced it (`method`), so stored metadata can mark heuristic scores as such.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentscope_memory.errors import UnavailableError
from agentscope_memory.llm import ChatClient, storable_text, strip_thinking
from agentscope_memory.long_term.domains import (
    DOMAINS,
    GENERAL_CHAT,
    UNKNOWN_DOMAIN,
    Domain,
    best_domain,
    is_small_talk,
    parse_domain,
)

__all__ = ["Assessment", "HeuristicScorer", "ImportanceScorer", "LlmScorer", "Method"]

Method = Literal["llm", "heuristic"]
MAX_FACT_CHARS = 500


@dataclass(frozen=True)
class Assessment:
    """The verdict on one recorded round. `extracted_fact` is "" when the round states nothing
    worth keeping on its own; `detail` says why a fallback was used, when one was."""

    importance_score: float
    extracted_fact: str
    domain: Domain
    method: Method
    detail: str = ""

    def metadata(self) -> dict[str, Any]:
        """The fields to store with the memory (`importance_method` marks heuristic values)."""
        return {"importance": self.importance_score, "domain": self.domain, "importance_method": self.method}


class ImportanceScorer(Protocol):
    async def assess(self, texts: Sequence[str]) -> Assessment:
        """Assess one recorded round: its message texts in order. A text may start with its
        speaker ("user: ...", "assistant: ..."); assistant lines state no user facts."""
        ...


# --- offline heuristic -------------------------------------------------------------------------

_FIRST_PERSON = re.compile(r"\b(?:i|i'm|im|i've|i'd|i'll|me|my|mine|we|our)\b|我")
_DISCLOSURE = re.compile(
    r"\b(?:like|love|hate|prefer|favou?rite|enjoy|dislike|can't stand|allergic|vegetarian|vegan|"
    r"name is|call me|live in|living in|moved|work (?:as|at|for|in)|switched|started|quit|stopped|"
    r"born|married|engaged|divorced|retired|graduated|adopted|bought|"
    r"allerg|intoleran|react badly|diagnosed|epipen|pescatarian|keto|gluten-free|dairy-free|"
    r"got back from|came back from|visited|signed up|enrolled|joined|took up|picked up|"
    r"my (?:wife|husband|partner|son|daughter|kids?|children|mom|mum|mother|dad|father|sister|brother|"
    r"parents|friend|boss|birthday|job|dog|cat|doctor|address|phone|email))"
    r"|喜欢|讨厌|爱吃|爱喝|最爱|不爱|我叫|名字|住在|搬到|搬家|在.{0,8}工作|改成|换成|开始|戒了|不再|过敏|生日|"
    r"结婚|订婚|毕业|退休|养了|买了|吃素|不能吃|起疹子|确诊|报了|参加了|回来|去了|学.{0,4}课|换.{0,2}工作|新工作|工程师|老师|医生|护士|律师|设计师|经理|我(?:老婆|老公|妻子|丈夫|儿子|女儿|孩子|妈妈|爸爸|父母|姐姐|妹妹|哥哥|弟弟|朋友|老板)"
)
_REMEMBER = re.compile(r"\b(?:remember|remind|don't forget|do not forget|note that|keep in mind)\b|记住|别忘|不要忘|记一下|记得|提醒我")
_NUMBER_OR_TIME = re.compile(r"\d|[一二三四五六七八九十]+[点月号日岁]|\b(?:today|tomorrow|yesterday|tonight)\b|今天|明天|昨天|今晚")
# A sentence without a subject that opens with what its speaker did ("Just got back from Oslo",
# "刚从冰岛回来") is the speaker's own news.
_IMPLICIT_FIRST_PERSON = re.compile(
    r"^(?:just |finally |recently |also )?(?:got|came|went|signed|started|joined|moved|finished|booked|"
    r"bought|visited|took|picked|spent|flew|quit|switched|adopted|enrolled)\b|^(?:刚|刚刚|最近|终于|已经|报了|参加了|去了|开始)"
)
# A sentence whose subject is someone outside the user's household ("My sister hates ...",
# "A coworker's son ...", "我同事...") states that person's tastes and doings, not the user's;
# their life events (a wedding, a birth, an illness) still belong to the user's life, and so
# does all that concerns a spouse, a child or a parent ("My wife is allergic to nuts").
_RELATIONS_EN = (
    r"sisters?|brothers?|siblings?|friends?|boss|colleagues?|co-?workers?|roommates?|flatmates?|neighbou?rs?|"
    r"cousins?|aunt|uncle|nephew|niece|sister-in-law|brother-in-law|in-laws|grand\w+|teacher|manager|"
    r"landlord|doctor"
)
_OTHER_SUBJECT = re.compile(
    rf"^(?:so |well |btw,? |and )?(?:my|our|a|an|one|another) (?:[\w-]+ )?(?:{_RELATIONS_EN})\b"
    r"|^(?:我|我们)?(?:的)?(?:一个|有个|有位)?(?:姐姐|妹妹|哥哥|弟弟|朋友|老板|领导|同事|室友|邻居|表弟|表妹|表哥|"
    r"表姐|堂[兄弟姐妹]|姑妈|姑姑|阿姨|叔叔|舅舅|侄子|侄女|外甥|姐夫|妹夫|嫂子|弟媳|爷爷|奶奶|外公|外婆)"
)
_SELF_SUBJECT = re.compile(r"\b(?:i|i'm|im|i've|i'd|i'll|we|we're|we've)\b")
_LIFE_EVENT = re.compile(
    r"\b(?:married|marry|wedding|engaged|pregnan|born|passed away|died|funeral|divorc|graduat|hospital|"
    r"diagnos|surgery)|结婚|婚礼|订婚|怀孕|出生|去世|离婚|毕业|住院|确诊|手术"
)
# A request for information or writing ("Give me three fun facts about ...", "给我讲三个...") asks
# for something, like a question, rather than telling something about its speaker.
_REQUEST = re.compile(
    r"^(?:please )?(?:give me|tell me|show me|write|explain|describe|list|summari[sz]e|translate|"
    r"suggest|recommend|help me)\b|^(?:请)?(?:给我|帮我|写|讲|解释|介绍|推荐|翻译)"
)
_ASSISTANT = re.compile(r"^\s*(?:assistant|助手|ai|bot)\s*[:：]", re.IGNORECASE)
_SPEAKER = re.compile(r"^\s*(?:user|assistant|system|用户|助手|ai|bot)\s*[:：]\s*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")


@dataclass(frozen=True)
class _Sentence:
    text: str
    score: float
    fact_like: bool


def _score_sentence(text: str) -> _Sentence:
    folded = text.casefold().replace("\u2019", "'")
    if is_small_talk(folded):
        return _Sentence(text, 0.05, False)
    first_person = bool(_FIRST_PERSON.search(folded) or _IMPLICIT_FIRST_PERSON.match(folded))
    disclosure = bool(_DISCLOSURE.search(folded))
    if _OTHER_SUBJECT.match(folded) and not _LIFE_EVENT.search(folded):
        # About someone else: the user counts only where they are a subject too ("..., I need a gift").
        user_too = bool(_SELF_SUBJECT.search(folded)) or folded.count("我") > 1
        first_person = disclosure = user_too
    remember = bool(_REMEMBER.search(folded))
    domain = best_domain(folded)
    score = 0.15
    score += 0.2 if first_person else 0.0
    score += 0.25 if disclosure else 0.0
    score += 0.3 if remember else 0.0
    score += 0.15 if domain is not None else 0.0
    score += 0.1 if _NUMBER_OR_TIME.search(folded) else 0.0
    # A question or a request asks for a fact rather than stating one.
    request = bool(_REQUEST.match(folded)) and not remember
    if (folded.rstrip().endswith(("?", "？", "吗", "呢")) or request) and not remember:
        score -= 0.2
    fact_like = not request and ((first_person and (disclosure or remember)) or (remember and domain is not None))
    return _Sentence(text, round(min(1.0, max(0.0, score)), 2), fact_like)


class HeuristicScorer:
    """Offline and deterministic: importance from cues (first person, a stated preference or
    life fact, an explicit "remember", a domain cue, a number or date), the domain with most
    cues (general_chat for small talk and for chatter without a cue; UNKNOWN_DOMAIN for a fact
    without one, as the router routes), and as fact the best-scoring fact-like sentence of a
    user line, verbatim."""

    async def assess(self, texts: Sequence[str]) -> Assessment:
        return self.assess_now(texts)

    def assess_now(self, texts: Sequence[str]) -> Assessment:
        """The same as `assess`, callable without an event loop."""
        best: _Sentence | None = None
        user_text: list[str] = []
        for text in texts:
            if _ASSISTANT.match(text):
                continue
            body = _SPEAKER.sub("", text, count=1)
            user_text.append(body)
            for sentence in _SENTENCE_END.split(body):
                sentence = sentence.strip()
                if not sentence:
                    continue
                scored = _score_sentence(sentence)
                if best is None or scored.score > best.score:
                    best = scored
        if best is None:
            return Assessment(0.0, "", GENERAL_CHAT, "heuristic")
        joined = "\n".join(user_text)
        # A fact that matches no cue goes where the router sends a question that matches none;
        # chatter without a cue stays general_chat (out of routed recall).
        uncued = UNKNOWN_DOMAIN if best.fact_like else GENERAL_CHAT
        domain = GENERAL_CHAT if is_small_talk(joined) else best_domain(joined) or uncued
        fact = best.text[:MAX_FACT_CHARS] if best.fact_like else ""
        return Assessment(best.score, fact, domain, "heuristic")


# --- LLM ---------------------------------------------------------------------------------------

_SYSTEM_PROMPT = (
    "You decide what a personal assistant should keep in long-term memory about its user. "
    "You get one exchange between the user and the assistant. Answer with a single JSON object "
    "and nothing else, with exactly these keys:\n"
    '  "importance_score": a number from 0 to 1. Near 0 for greetings, thanks and chit-chat; '
    "around 0.5 for passing details; 0.7 or more for lasting facts about the user (identity, "
    "preferences and their changes, health, relationships, work or study, plans with dates) and "
    "for anything the user asks to be remembered.\n"
    '  "extracted_fact": the one fact worth keeping, as a short standalone sentence in the '
    "user's language, naming the user as \"The user\" (or \"用户\" in Chinese); when a preference "
    "changed, state the new one and what it replaced. Use \"\" when nothing is worth keeping.\n"
    '  "domain": one of ' + ", ".join(DOMAINS) + "."
)


def _render_round(texts: Sequence[str]) -> str:
    return "\n".join(text if _SPEAKER.match(text) else f"user: {text}" for text in texts)


class UnusableReplyError(ValueError):
    """An LLM reply that is not the JSON asked for."""


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a reply, also when wrapped in a code fence or prose, or after a
    reasoning model's `<think>` block (whose braces would otherwise be taken for the object's)."""
    stripped = strip_thinking(text)
    if stripped.startswith("```"):
        stripped = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", stripped)
    try:
        try:
            value = json.loads(stripped)
        except ValueError:
            start, end = stripped.find("{"), stripped.rfind("}")
            if start < 0 or end <= start:
                raise ValueError("the reply holds no JSON object") from None
            value = json.loads(stripped[start : end + 1])
    except RecursionError:
        # JSON nested deeper than the decoder's recursion limit is garbage like any other: the
        # callers' fallback answers, where a RecursionError failed the recall or the job.
        raise UnusableReplyError("the reply's JSON is nested too deeply") from None
    if not isinstance(value, dict):
        raise UnusableReplyError(f"the reply is JSON {type(value).__name__}, not an object")
    return value


def parse_assessment(text: str) -> Assessment:
    """An LLM reply as an Assessment; ValueError names what is wrong with it."""
    value = parse_json_object(text)
    raw_score = value.get("importance_score")
    if isinstance(raw_score, str):
        try:
            raw_score = float(raw_score.strip())
        except ValueError:
            raise ValueError(f"importance_score is not a number: {raw_score!r}") from None
    if isinstance(raw_score, bool) or not isinstance(raw_score, (int, float)):
        raise ValueError(f"importance_score is missing or not a number: {raw_score!r}")
    try:
        # An integer of hundreds of digits does not fit a float (OverflowError, not a ValueError).
        raw_score = float(raw_score)
    except OverflowError:
        raise ValueError("importance_score is outside [0, 1]: an integer too large for a number") from None
    if math.isnan(raw_score):
        raise ValueError(f"importance_score is not a number: {raw_score!r}")
    # Some models answer on a 0-10 scale despite the prompt.
    score = raw_score / 10 if 1 < raw_score <= 10 else raw_score
    if not 0 <= score <= 1:
        raise ValueError(f"importance_score {raw_score!r} is outside [0, 1]")
    fact = value.get("extracted_fact", "")
    if fact is None:
        fact = ""
    if not isinstance(fact, str):
        raise UnusableReplyError(f"extracted_fact is not a string: {fact!r}")
    domain = parse_domain(value.get("domain"))
    if domain is None:
        raise ValueError(f"domain {value.get('domain')!r} is not one of {', '.join(DOMAINS)}")
    return Assessment(round(float(score), 3), storable_text(fact).strip()[:MAX_FACT_CHARS], domain, "llm")


class LlmScorer:
    """One JSON chat call per recorded round. A reply that is not the asked-for JSON falls back
    to `fallback` (the heuristic by default; its Assessment says method="heuristic" and why in
    `detail`), or, with `fallback=None`, raises UnavailableError naming the problem. Transport
    failures (UnavailableError, DeadlineExceededError from the client) always propagate, so a
    background job can retry them."""

    def __init__(self, llm: ChatClient, fallback: ImportanceScorer | None = None, use_fallback: bool = True) -> None:
        self._llm = llm
        self._fallback: ImportanceScorer | None = (fallback or HeuristicScorer()) if use_fallback else None

    async def assess(self, texts: Sequence[str]) -> Assessment:
        messages = [
            {"role": "system", "content": _SYSTEM_PROMPT},
            {"role": "user", "content": _render_round(texts)},
        ]
        result = await self._llm.chat(messages, temperature=0)
        try:
            return parse_assessment(result.text)
        except ValueError as exc:
            reason = f"LLM importance reply unusable ({exc}): {result.text[:200]!r}"
            if self._fallback is None:
                raise UnavailableError(reason) from None
            fallen = await self._fallback.assess(texts)
            return Assessment(fallen.importance_score, fallen.extracted_fact, fallen.domain, fallen.method, reason)
