"""Context projection (Loom's `create_projection`): the message list for the next model call,
within a total token budget, shaped by a mode.

Sections: `plan` (the caller's plan text), `facts` (L3 summaries, L2 items and long-term
summaries ranked by semantic similarity to the instruction; lexical overlap without a
long-term engine), `shared` (messages the caller supplies, e.g. a shared memory pool's),
`summaries` (L3, newest that fit), `working` (L2 by importance, those not already among the
recent messages) and `recent` (L1's newest that fit, with the compaction marker, in order).
Each mode gives the sections shares of the budget and an order of filling; what a section
leaves unused passes to the next. The messages come out in the mode's reading order, recent
messages always last so the conversation ends where it is.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.message import Msg, MsgRole, TextBlock
from agentscope_memory.one_line import one_line
from agentscope_memory.short_term.tiered.items import MARKER, TierItem

if TYPE_CHECKING:
    from agentscope_memory.long_term.engine import LongTermItem
    from agentscope_memory.short_term.tiered.service import TieredService

STANDARD, MINIMAL, DEBUG, ANALYTICAL, CONTEXTUAL = "STANDARD", "MINIMAL", "DEBUG", "ANALYTICAL", "CONTEXTUAL"
MODES = (STANDARD, MINIMAL, DEBUG, ANALYTICAL, CONTEXTUAL)
PLAN, FACTS, SHARED, SUMMARIES, WORKING, RECENT = "plan", "facts", "shared", "summaries", "working", "recent"
MAX_BUDGET = 200_000
MAX_INSTRUCTION_CHARS = 32 * 1024
MAX_PLAN_CHARS = 64 * 1024
MAX_SHARED_MESSAGES = 1000
Cost = Callable[[list[Msg]], int]
# An instruction shorter than this (in characters) with no keyword projects MINIMAL.
SHORT_INSTRUCTION = 12

# Per mode: the share of the budget of each section, and the order sections are filled in.
SHARES: dict[str, dict[str, float]] = {
    STANDARD: {PLAN: 0.10, FACTS: 0.20, SHARED: 0.10, SUMMARIES: 0.15, WORKING: 0.15, RECENT: 0.30},
    MINIMAL: {PLAN: 0.05, FACTS: 0.05, SHARED: 0.05, SUMMARIES: 0.0, WORKING: 0.10, RECENT: 0.25},
    DEBUG: {PLAN: 0.05, FACTS: 0.05, SHARED: 0.05, SUMMARIES: 0.10, WORKING: 0.20, RECENT: 0.55},
    ANALYTICAL: {PLAN: 0.05, FACTS: 0.40, SHARED: 0.10, SUMMARIES: 0.15, WORKING: 0.20, RECENT: 0.10},
    CONTEXTUAL: {PLAN: 0.05, FACTS: 0.10, SHARED: 0.05, SUMMARIES: 0.30, WORKING: 0.15, RECENT: 0.35},
}
FILL_ORDER: dict[str, tuple[str, ...]] = {
    STANDARD: (PLAN, RECENT, FACTS, SHARED, WORKING, SUMMARIES),
    MINIMAL: (PLAN, RECENT, WORKING, SHARED, FACTS, SUMMARIES),
    DEBUG: (RECENT, WORKING, SHARED, SUMMARIES, FACTS, PLAN),
    ANALYTICAL: (FACTS, WORKING, SUMMARIES, SHARED, PLAN, RECENT),
    CONTEXTUAL: (SUMMARIES, RECENT, WORKING, SHARED, PLAN, FACTS),
}
READ_ORDER: dict[str, tuple[str, ...]] = {
    STANDARD: (PLAN, FACTS, SHARED, SUMMARIES, WORKING, RECENT),
    MINIMAL: (PLAN, FACTS, SHARED, WORKING, SUMMARIES, RECENT),
    DEBUG: (PLAN, FACTS, SHARED, SUMMARIES, WORKING, RECENT),
    ANALYTICAL: (FACTS, PLAN, SHARED, WORKING, SUMMARIES, RECENT),
    CONTEXTUAL: (SUMMARIES, WORKING, PLAN, SHARED, FACTS, RECENT),
}

# An English keyword is a whole word among Latin letters and digits only: `\b` would also take a
# Chinese character for a word character, so "帮我fix一下这个bug" held no "fix" and no "bug".
_WORD_START, _WORD_END = r"(?<![A-Za-z0-9_])", r"(?![A-Za-z0-9_])"
_KEYWORDS: list[tuple[str, re.Pattern[str]]] = [
    (DEBUG, re.compile(_WORD_START + r"(?:error|errors|bug|bugs|fix|fixes|fixing|fail|fails|failed|failing|failure|"
                       r"exception|traceback|crash|crashes|crashed|debug|debugging|broken|stack ?trace)" + _WORD_END
                       + r"|错误|修复|报错|异常|失败|调试|崩溃|故障|缺陷", re.IGNORECASE)),
    (ANALYTICAL, re.compile(_WORD_START + r"(?:analy[sz]e|analy[sz]es|analy[sz]ing|analysis|evaluate|evaluating|"
                            r"evaluation|assess|assessment|compare|comparison|investigate|examine)" + _WORD_END
                            + r"|分析|评估|比较|对比|评价|研究", re.IGNORECASE)),
    (CONTEXTUAL, re.compile(_WORD_START + r"(?:continue|continuing|context|previous|previously|earlier|resume|"
                            r"as before|pick up|where we left)" + _WORD_END + r"|继续|上下文|之前|接着|刚才|前面",
                            re.IGNORECASE)),
]


def detect_mode(instruction: str) -> str:
    """Loom's automatic mode: error/fix words -> DEBUG, analyse/evaluate -> ANALYTICAL,
    continue/context -> CONTEXTUAL (English and Chinese), very short -> MINIMAL, else STANDARD."""
    for mode, pattern in _KEYWORDS:
        if pattern.search(instruction):
            return mode
    if len(instruction.strip()) < SHORT_INSTRUCTION:
        return MINIMAL
    return STANDARD


@dataclass(frozen=True)
class ProjectionRequest:
    instruction: str = ""
    budget: int = 32_000
    # "" detects the mode from the instruction.
    mode: str = ""
    include_plan: bool = False
    plan: str = ""
    include_facts: bool = True
    # Messages the caller brings (a shared memory pool's), placed in the `shared` section.
    shared_context: Sequence[Msg] = ()

    def validate(self) -> ProjectionRequest:
        if not 1 <= self.budget <= MAX_BUDGET:
            raise InvalidArgumentError("total_budget", f"is {self.budget}; must be from 1 to {MAX_BUDGET} tokens")
        if self.mode and self.mode not in MODES:
            raise InvalidArgumentError("mode", f"is {self.mode!r}; must be one of {', '.join(MODES)} or unset")
        if len(self.instruction) > MAX_INSTRUCTION_CHARS:
            raise InvalidArgumentError("instruction", f"has {len(self.instruction)} characters; at most {MAX_INSTRUCTION_CHARS}")
        if len(self.plan) > MAX_PLAN_CHARS:
            raise InvalidArgumentError("plan", f"has {len(self.plan)} characters; at most {MAX_PLAN_CHARS}")
        if self.include_plan and not self.plan.strip():
            raise InvalidArgumentError("plan", "is required with include_plan")
        if len(self.shared_context) > MAX_SHARED_MESSAGES:
            raise InvalidArgumentError("shared_context", f"has {len(self.shared_context)} messages; at most {MAX_SHARED_MESSAGES}")
        return self


@dataclass
class Projection:
    mode: str
    detected: bool
    messages: list[Msg]
    budget: int
    tokens: int
    # Tokens each section used.
    sections: dict[str, int] = field(default_factory=dict)


def _system(title: str, lines: list[str], kind: str) -> Msg:
    return Msg(id=f"tiered-projection-{kind}", name="memory", role=MsgRole.SYSTEM,
               content=[TextBlock(title + "\n" + "\n".join(lines))], metadata={"tiered_section": kind})


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


# Facts embedded per projection at most: the rest are ranked by the lexical measure only, so a
# full L2 and L3 (hundreds of items) do not make every projection embed them all.
MAX_EMBEDDED_FACTS = 64


async def rank_by_similarity(service: TieredService, instruction: str, texts: list[str]) -> list[float]:
    """Semantic similarity of each text to the instruction (the long-term engine's embedder), or
    the share of the instruction's terms a text holds when there is no long-term engine. With
    more than `MAX_EMBEDDED_FACTS` texts, the lexically best ones are embedded and rank above
    the rest (whose score is their lexical share minus one)."""
    if not texts:
        return []
    terms = set(tokenize(instruction))
    lexical = [len(terms & set(tokenize(t))) / len(terms) if terms else 0.0 for t in texts]
    engine = service.long_term
    if engine is None or not instruction.strip():
        return lexical
    chosen = sorted(range(len(texts)), key=lambda i: -lexical[i])[:MAX_EMBEDDED_FACTS]
    # The instruction is scored as a search query against the facts as stored: a model whose
    # stored layout is made for queries (minilm+e5) compares across scripts only that way.
    query = [float(v) for v in (await engine.embed_query([instruction]))[0]]
    vectors = await engine.embed([texts[i] for i in chosen])
    scores = [score - 1.0 for score in lexical]
    for i, row in zip(chosen, vectors, strict=True):
        scores[i] = _cosine(query, [float(v) for v in row])
    return scores


async def project(service: TieredService, tenant: str, memory_id: str, request: ProjectionRequest) -> Projection:
    request.validate()
    mode = request.mode or detect_mode(request.instruction)
    config, tiers = await service.tiers(tenant, memory_id)
    counter = service.kind.counters.get(config.token_counter)

    def cost(msgs: list[Msg]) -> int:
        return counter.count(msgs)

    # Candidates per section, best first.
    facts: list[str] = []
    recalled: list[LongTermItem] = []
    if request.include_facts:
        texts = [i.content for i in tiers.l3] + [i.content for i in tiers.l2]
        if service.long_term is not None and request.instruction.strip():
            recalled, _ = await service.long_term.search_ranked(tenant, service.scope(memory_id, config),
                                                                request.instruction, touch=False)
            texts += [f.text for f in recalled]
        texts = list(dict.fromkeys(t for t in texts if t.strip()))
        scores = await rank_by_similarity(service, request.instruction, texts)
        facts = [t for _, t in sorted(zip(scores, texts, strict=True), key=lambda p: -p[0])]

    shares = SHARES[mode]
    chosen: dict[str, list[Msg]] = {}
    used: dict[str, int] = {}
    carry = 0
    spent = 0
    recent_seqs: set[int] = set()
    # Texts a section already shows: a summary or an important item is either a fact or a
    # history entry, never both, whichever section the mode fills first.
    placed: set[str] = set()
    for section in FILL_ORDER[mode]:
        allowance = min(math.floor(shares[section] * request.budget) + carry, request.budget - spent)
        msgs: list[Msg] = []
        if section == PLAN and request.include_plan:
            msgs = _fit_text("## Plan", [request.plan], allowance, cost, PLAN)[0]
        elif section == FACTS and facts:
            fresh = [f for f in facts if f not in placed]
            # One line a fact, whatever its text holds; and the facts shown are counted as
            # kept, not as lines (a fact of three lines made two unshown facts count as shown,
            # and so left out of the sections filled after this one too).
            msgs, shown = _fit_text("## Relevant facts", [f"- {one_line(f)}" for f in fresh], allowance, cost, FACTS)
            placed.update(fresh[:shown])
        elif section == SHARED:
            msgs = _fit_newest(list(request.shared_context), allowance, cost)
        elif section == SUMMARIES:
            kept = _fit_items([i for i in tiers.l3 if i.content not in placed], allowance, cost, newest_first=True)
            placed.update(i.content for i in kept)
            msgs = [i.as_message() for i in kept]
        elif section == RECENT:
            kept = _fit_items([i for i in tiers.l1 if i.kind != MARKER], allowance, cost, newest_first=True)
            marker = [i for i in tiers.l1 if i.kind == MARKER]
            if kept and marker and cost([marker[0].as_message()] + [i.as_message() for i in kept]) <= allowance:
                kept = marker[:1] + kept
            recent_seqs = {i.seq for i in kept}
            msgs = [i.as_message() for i in kept]
        elif section == WORKING:
            # Filled after RECENT in every order but ANALYTICAL's; items already recent are skipped there.
            candidates = [i for i in tiers.l2 if not (set(i.origins) & recent_seqs) and i.content not in placed]
            kept = _fit_items(candidates, allowance, cost, newest_first=False, keep_order=True)
            placed.update(i.content for i in kept)
            msgs = [i.as_message() for i in kept]
        tokens = cost(msgs) if msgs else 0
        chosen[section], used[section] = msgs, tokens
        spent += tokens
        carry = max(allowance - tokens, 0)
    if mode == ANALYTICAL and chosen.get(WORKING):
        # WORKING was filled before RECENT: drop recent messages it already holds.
        working_ids = {m.id for m in chosen[WORKING]}
        chosen[RECENT] = [m for m in chosen[RECENT] if m.id not in working_ids]
        used[RECENT] = cost(chosen[RECENT]) if chosen[RECENT] else 0
    messages = [m for section in READ_ORDER[mode] for m in chosen.get(section, [])]
    if service.long_term is not None:
        # Recalled are the long-term memories the projection shows, not those the budget left out.
        service.long_term.touch(tenant, [f.id for f in recalled if f.text in placed])
    total = cost(messages) if messages else 0
    return Projection(mode, not request.mode, messages, request.budget, total, used)


def _fit_text(title: str, lines: list[str], allowance: int, cost: Cost, kind: str) -> tuple[list[Msg], int]:
    """One system message with as many of `lines` (best first) as fit, and how many of them
    (the last perhaps cut) it holds. Lines are counted one
    by one (a line's own count bounds what it adds), then the whole message is checked, so
    many facts cost a linear number of counts."""
    kept: list[str] = []
    used = cost([_system(title, [], kind)])
    for line in lines:
        size = cost([_system("", [line], kind)])
        if used + size <= allowance:
            kept.append(line)
            used += size
        elif not kept and len(line) > 80:
            # A long first line is cut to fit rather than dropped (a plan, a long fact).
            low, high = 0, len(line)
            while low < high:
                mid = (low + high + 1) // 2
                if cost([_system(title, [line[:mid] + "…"], kind)]) <= allowance:
                    low = mid
                else:
                    high = mid - 1
            if low > 0:
                kept.append(line[:low] + "…")
            break
        else:
            break
    while kept and cost([_system(title, kept, kind)]) > allowance:
        kept.pop()
    return ([_system(title, kept, kind)] if kept else []), len(kept)


def _fit_newest(msgs: list[Msg], allowance: int, cost: Cost) -> list[Msg]:
    kept: list[Msg] = []
    total = 0
    for msg in reversed(msgs):
        size = cost([msg])
        if total + size > allowance:
            break
        kept.insert(0, msg)
        total += size
    return kept


def _fit_items(items: list[TierItem], allowance: int, cost: Cost, *, newest_first: bool, keep_order: bool = False
               ) -> list[TierItem]:
    """The items that fit: newest first (returned oldest first), or in the given order."""
    kept: list[TierItem] = []
    total = 0
    for item in (reversed(items) if newest_first else items):
        size = cost([item.as_message()])
        if total + size > allowance:
            break
        kept.append(item)
        total += size
    return kept if keep_order else sorted(kept, key=lambda i: i.seq)
