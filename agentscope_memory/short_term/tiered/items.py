"""What the tiers hold (`TierItem`) and what is recorded when something moves (`TierEvent`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from agentscope_memory.message import Msg, MsgRole, TextBlock, msg_from_dict, msg_to_dict, to_json_text

L1, L2, L3, L4 = 1, 2, 3, 4
TIERS = (L1, L2, L3)
MESSAGE = "message"
SUMMARY = "summary"
MARKER = "marker"
# Loom's convention: the agent sees this when its history was compacted.
MARKER_TEXT = "📦 History compacted"


@dataclass
class TierItem:
    """One item of L1-L3. `origins` are the L1 sequence numbers the item stands for: its own
    for an added message, the original's for an L2 copy, every summarised one for a summary."""

    seq: int
    tier: int
    kind: str
    importance: float
    tokens: int
    created: float
    msg: Msg | None = None
    text: str = ""
    origins: list[int] = field(default_factory=list)
    # How the importance (`caller`, `heuristic`, `default`) or the summary (`llm`,
    # `extractive-fallback`) came about.
    method: str = ""
    # Times a query returned it (the reranker's frequency signal).
    hits: int = 0
    # An L1 message whose L2 copy was summarised already: leaving L1 needs no second summary.
    covered: bool = False

    @property
    def content(self) -> str:
        return self.msg.text_content if self.msg is not None else self.text

    def body_json(self) -> str:
        body: dict[str, Any] = {"origins": self.origins, "method": self.method}
        if self.msg is not None:
            body["msg"] = msg_to_dict(self.msg)
        if self.text:
            body["text"] = self.text
        if self.covered:
            body["covered"] = True
        return to_json_text(body)

    @staticmethod
    def from_row(seq: int, tier: int, kind: str, importance: float, tokens: int, created: float, hits: int,
                 body: str) -> TierItem:
        data = json.loads(body)
        msg = msg_from_dict(data["msg"]) if "msg" in data else None
        return TierItem(seq, tier, kind, float(importance), int(tokens), float(created), msg, data.get("text", ""),
                        [int(o) for o in data.get("origins", [])], data.get("method", ""), int(hits),
                        bool(data.get("covered", False)))

    def as_message(self) -> Msg:
        """The item as a message for the model: messages as they are, summaries and the marker
        as system messages (a summary says it is one)."""
        if self.msg is not None:
            return self.msg
        text = self.text if self.kind == MARKER else f"[Session summary #{self.seq}] {self.text}"
        return Msg(id=f"tiered-{self.kind}-{self.seq}", name="memory", role=MsgRole.SYSTEM, content=[TextBlock(text)],
                   metadata={"tiered_kind": self.kind, "tiered_seq": self.seq})


@dataclass(frozen=True)
class TierEvent:
    """One move between tiers. `kind`: `promote` (L1 -> L2), `compact_l1` (L1's oldest into a
    summary, with the marker), `evict_l1` (FIFO beyond L1's budget), `summarize_l2` (L2's least
    important into a summary), `vectorize_l3` (L3's oldest into long-term memory), `evict_l3`
    (FIFO beyond L3's budget without long-term memory; `detail.texts` keeps what left), `clear`,
    `vectorize_aborted` (summaries an aborted pass wrote to long-term memory; they stay in L3 too)."""

    kind: str
    from_tier: int
    to_tier: int
    item_seqs: list[int]
    tokens: int
    time: float = field(default_factory=time.time)
    # The summary made (`summary_seq`, `method`), long-term ids, texts that left, ...
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "from_tier": self.from_tier, "to_tier": self.to_tier, "item_seqs": self.item_seqs,
                "tokens": self.tokens, "time": self.time, "detail": self.detail}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TierEvent:
        return TierEvent(str(data["kind"]), int(data["from_tier"]), int(data["to_tier"]),
                         [int(s) for s in data.get("item_seqs", [])], int(data.get("tokens", 0)),
                         float(data.get("time", 0.0)), dict(data.get("detail") or {}))
