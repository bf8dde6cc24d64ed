"""Facts for the lifecycle tests and benchmark: clusters of near-identical facts (three wordings
of one statement each) among distinct ones, English and Chinese, written straight into a store."""

from __future__ import annotations

import time
import uuid

from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store.base import LongTermRow

SUBJECTS = ["green tea", "chess", "Lisbon", "the cello", "Rust", "dark mode", "peanuts", "sourdough", "Kyoto",
            "marathons", "origami", "beekeeping", "jazz piano", "sailing", "pottery", "astronomy", "Mandarin",
            "climbing", "film noir", "board games", "Portuguese wine", "birdwatching", "chemistry", "vinyl records"]
ZH_SUBJECTS = ["绿茶", "围棋", "上海", "古筝", "书法", "爬山", "花生", "京剧", "太极拳", "摄影", "羽毛球", "火锅"]


def wordings(i: int) -> list[str]:
    """Three wordings of fact `i` (cosine well above 0.85 between them, under it across facts)."""
    if i % 3 == 2:
        s = ZH_SUBJECTS[i % len(ZH_SUBJECTS)]
        return [f"用户非常喜欢{s}（记录{i}号）。", f"记录{i}号：用户很喜欢{s}。", f"用户喜欢{s}，见记录{i}号。"]
    s = SUBJECTS[i % len(SUBJECTS)]
    return [f"The user really loves {s} (record {i}).", f"Record {i}: the user loves {s} a lot.",
            f"The user loves {s}, see record {i}."]


def rows(scope: Scope, clusters: int) -> list[LongTermRow]:
    now = time.time()
    out = []
    for i in range(clusters):
        for j, text in enumerate(wordings(i)):
            out.append(LongTermRow(
                memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                memory_type="fact", importance=0.5 + 0.1 * j, importance_method="user", created=now + i * 3 + j,
                updated=now, last_accessed=now, content_hash=content_hash(text)))
    return out
