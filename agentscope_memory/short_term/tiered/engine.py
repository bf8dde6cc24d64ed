"""Which items move between tiers, decided from a snapshot of L1-L3 (pure and deterministic;
`service.py` makes the summaries, writes long-term memory and commits the moves).

- L1 compaction: when L1 reaches `l1_compact_trigger` tokens, its oldest items leave until it
  holds at most `l1_compact_keep` of the trigger (the marker tells the agent). Without
  compaction, FIFO: the oldest leave while L1 is beyond its budget. Either way the newest
  item stays, and an item leaving L1 is summarised unless L2 still holds it or its L2 copy
  was summarised already.
- L2: at `l2_compact_at` of its budget, the least important items (oldest first among equals)
  are summarised into L3 until L2 is at `l2_compact_to`.
- L3: at `l3_vectorize_at` of its budget, its oldest `l3_vectorize_fraction` of summaries go to
  long-term memory; beyond its budget the oldest leave (to long-term memory when there is one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.short_term.tiered.items import L1, L2, MARKER, TierItem

COMPACT_L1 = "compact_l1"
EVICT_L1 = "evict_l1"
SUMMARIZE_L2 = "summarize_l2"
VECTORIZE_L3 = "vectorize_l3"
# A pass wrote L3 summaries to long-term memory, then aborted: they stay there (another writer
# of the scope may hold the same text through them) and in L3, which a later pass empties.
VECTORIZE_ABORTED = "vectorize_aborted"
EVICT_L3 = "evict_l3"


def tokens(items: list[TierItem]) -> int:
    return sum(i.tokens for i in items)


@dataclass
class Tiers:
    """L1 and L3 oldest first (L1's marker, if any, first); L2 in any order."""

    l1: list[TierItem] = field(default_factory=list)
    l2: list[TierItem] = field(default_factory=list)
    l3: list[TierItem] = field(default_factory=list)


@dataclass
class Selection:
    """Items leaving `from_tier` for a summary in L3; `summarise` are those the summary must
    cover (the rest are still held elsewhere)."""

    kind: str
    from_tier: int
    leaving: list[TierItem]
    summarise: list[TierItem]


@dataclass
class L3Moves:
    vectorize: list[TierItem]
    evict: list[TierItem]


def select_l1(tiers: Tiers, config: TieredConfig) -> Selection | None:
    items = [i for i in tiers.l1 if i.kind != MARKER]
    total = tokens(items)
    if config.l1_compact_trigger and total >= config.l1_compact_trigger:
        kind, target = COMPACT_L1, math.floor(config.l1_compact_keep * config.l1_compact_trigger)
    elif total > config.l1_budget:
        kind, target = EVICT_L1, config.l1_budget
    else:
        return None
    leaving: list[TierItem] = []
    for item in items[:-1]:
        if total <= target:
            break
        leaving.append(item)
        total -= item.tokens
    if not leaving:
        return None
    in_l2 = {o for i in tiers.l2 for o in i.origins}
    summarise = [i for i in leaving if not i.covered and i.seq not in in_l2]
    return Selection(kind, L1, leaving, summarise)


def select_l2(tiers: Tiers, config: TieredConfig) -> Selection | None:
    total = tokens(tiers.l2)
    if total < config.l2_compact_at * config.l2_budget:
        return None
    target = config.l2_compact_to * config.l2_budget
    leaving: list[TierItem] = []
    for item in sorted(tiers.l2, key=lambda i: (i.importance, i.seq)):
        if total <= target:
            break
        leaving.append(item)
        total -= item.tokens
    return Selection(SUMMARIZE_L2, L2, leaving, list(leaving))


def select_l3(l3: list[TierItem], config: TieredConfig, long_term: bool) -> L3Moves:
    """`l3` oldest first, including the summaries this pass makes."""
    total = tokens(l3)
    moves = L3Moves([], [])
    remaining = list(l3)
    if long_term and remaining and total >= config.l3_vectorize_at * config.l3_budget:
        count = max(1, math.ceil(config.l3_vectorize_fraction * len(remaining)))
        moves.vectorize, remaining = remaining[:count], remaining[count:]
        total -= tokens(moves.vectorize)
    while len(remaining) > 1 and total > config.l3_budget:
        item = remaining.pop(0)
        (moves.vectorize if long_term else moves.evict).append(item)
        total -= item.tokens
    return moves


def ordered_l2(items: list[TierItem]) -> list[TierItem]:
    """L2 as it is kept: most important first, older first among equals."""
    return sorted(items, key=lambda i: (-i.importance, i.seq))
