"""Queries across the tiers of a TIERED memory: the reranker's four signals and their weights,
frequency counting, tier filters and bad input; plus L1 compaction's keep fraction."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.short_term.tiered.service import QueryWeights
from tiered_helpers import ITEM_TOKENS, config, msg, text

T = "tenant"


async def test_weights_decide_the_order_and_hits_count_as_frequency(tmp_path: Path) -> None:
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        await service.memories.create_memory(T, "q", "TIERED", config(promote_threshold=1.0))
        texts = ["deploy window is tuesday morning", "the deploy key rotates monthly", "lunch is at noon"]
        await service.tiered.add_items(T, "q", [Msg.create(MsgRole.USER, t) for t in texts], [0.9, 0.2, 0.5])
        by_importance = await service.tiered.query(T, "q", "deploy", weights=QueryWeights(0, 0, 1, 0))
        assert [h.text for h in by_importance] == texts[:2]  # "lunch" holds no query term
        by_recency = await service.tiered.query(T, "q", "deploy", weights=QueryWeights(0, 1, 0, 0))
        assert [h.text for h in by_recency] == [texts[1], texts[0]]
        by_relevance = await service.tiered.query(T, "q", "deploy key", weights=QueryWeights(1, 0, 0, 0))
        assert by_relevance[0].text == texts[1] and by_relevance[0].relevance == 1.0
        assert by_relevance[1].relevance == 0.5
        # Every query so far returned texts[0] three times and texts[1] three times; now frequency
        # alone ranks, and a fourth hit of texts[0] makes it lead.
        await service.tiered.query(T, "q", "tuesday")
        by_frequency = await service.tiered.query(T, "q", "deploy", weights=QueryWeights(0, 0, 0, 1))
        assert by_frequency[0].text == texts[0] and by_frequency[0].frequency > by_frequency[1].frequency
        everything = await service.tiered.query(T, "q", "")
        assert len(everything) == 3 and all(h.relevance == 0.0 for h in everything)
        assert await service.tiered.query(T, "q", "deploy", tiers=[2]) == []
        assert len(await service.tiered.query(T, "q", "", limit=2)) == 2


async def test_query_bad_input_names_the_field(tmp_path: Path) -> None:
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        await service.memories.create_memory(T, "b", "TIERED", config())
        for kwargs, field in [({"limit": -1}, "limit"), ({"limit": 1001}, "limit"), ({"tiers": [5]}, "tiers"),
                              ({"weights": QueryWeights(relevance=float("nan"))}, "weights.relevance")]:
            with pytest.raises(InvalidArgumentError) as info:
                await service.tiered.query(T, "b", "x", **kwargs)
            assert info.value.field == field


async def test_l1_compact_keep_is_the_fraction_of_the_trigger_that_stays(tmp_path: Path) -> None:
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        # Trigger 10 items (130 tokens); keep 0.2 -> at most 26 tokens: 2 items stay.
        await service.memories.create_memory(T, "k", "TIERED", config(l1_compact_trigger=10 * ITEM_TOKENS,
                                                                        l1_compact_keep=0.2))
        for i in range(10):
            await service.tiered.add_items(T, "k", [msg(i)])
        messages = await service.memories.get_messages(T, "k")
        assert [m.text_content for m in messages[1:]] == [text(8), text(9)]
