"""TIERED memory (Loom L1-L4) in the library: every threshold, deterministically (offline
summaries, the 4-characters-per-token estimate, fixed-size messages of 13 tokens)."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path

import pytest

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.short_term.tiered.items import L1, L2, L3, MARKER, MARKER_TEXT, SUMMARY
from tiered_helpers import ITEM_TOKENS, config, covered_origins, msg, offline_summary_tokens, text

T = "tenant"


def _service(tmp_path: Path, **settings):  # type: ignore[no-untyped-def]
    return build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False, **settings))


async def _add(service, memory_id: str, count: int, start: int = 0, importance: float | None = None) -> None:  # type: ignore[no-untyped-def]
    for i in range(start, start + count):
        await service.tiered.add_items(T, memory_id, [msg(i)], [importance])


async def test_promotion_is_strictly_above_the_threshold_and_importance_defaults(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        await service.memories.create_memory(T, "m", "TIERED", config())
        await service.tiered.add_items(T, "m", [msg(1), msg(2), msg(3)], [0.61, 0.6, None])
        _, tiers = await service.tiered.tiers(T, "m")
        assert [i.msg.id for i in tiers.l1 if i.msg] == ["m1", "m2", "m3"]
        assert [(i.msg.id, i.importance, i.origins) for i in tiers.l2 if i.msg] == [("m1", 0.61, [tiers.l1[0].seq])]
        assert [i.method for i in tiers.l1] == ["caller", "caller", "default"]
        assert tiers.l1[2].importance == 0.5
        events = await service.tiered.events(T, "m")
        assert [(e.kind, e.from_tier, e.to_tier, e.item_seqs) for _, e in events] == [("promote", 1, 2, [tiers.l1[0].seq])]
        # A custom threshold and default importance.
        await service.memories.create_memory(T, "low", "TIERED", config(promote_threshold=0.2, default_importance=0.3))
        await service.tiered.add_items(T, "low", [msg(4)])
        _, tiers = await service.tiered.tiers(T, "low")
        assert [i.importance for i in tiers.l2] == [0.3]


async def test_scored_importance_uses_the_long_term_heuristic(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        await service.memories.create_memory(T, "s", "TIERED", config(score_importance=True))
        from agentscope_memory.message import Msg, MsgRole

        await service.tiered.add_items(T, "s", [Msg.create(MsgRole.USER, "Remember that my daughter is allergic to peanuts."),
                                               Msg.create(MsgRole.USER, "ok")])
        _, tiers = await service.tiered.tiers(T, "s")
        assert [i.method for i in tiers.l1] == ["heuristic", "heuristic"]
        assert tiers.l1[0].importance > 0.6 and tiers.l1[1].importance < 0.6
        assert [i.msg.text_content for i in tiers.l2 if i.msg][0].startswith("Remember")


async def test_l1_fifo_beyond_its_budget_leaves_a_summary(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        # 3 items = 39 tokens fit a 50-token L1; the 4th makes 52.
        await service.memories.create_memory(T, "f", "TIERED", config(l1_compact_trigger=0, l1_budget=50))
        await _add(service, "f", 3)
        _, tiers = await service.tiered.tiers(T, "f")
        assert len(tiers.l1) == 3 and not tiers.l3
        await _add(service, "f", 1, start=3)
        _, tiers = await service.tiered.tiers(T, "f")
        assert [i.content for i in tiers.l1] == [text(1), text(2), text(3)]
        assert len(tiers.l3) == 1 and tiers.l3[0].text == "[offline summary] user: " + text(0)
        assert tiers.l3[0].method == "extractive-fallback"
        events = [e for _, e in await service.tiered.events(T, "f")]
        assert [(e.kind, e.tokens, e.detail["summary_seq"]) for e in events] == [("evict_l1", ITEM_TOKENS, tiers.l3[0].seq)]
        # No marker: FIFO is not compaction.
        assert all(i.kind != MARKER for i in tiers.l1)


async def test_l1_compaction_at_the_trigger_keeps_the_newest_and_marks(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        # Trigger 65 tokens = 5 items; keep 0.5 -> at most 32 tokens (2 items) stay.
        await service.memories.create_memory(T, "c", "TIERED", config(l1_compact_trigger=65, l1_compact_keep=0.5))
        await _add(service, "c", 4)
        assert (await service.tiered.status(T, "c")).compactions == 0
        await _add(service, "c", 1, start=4)
        messages = await service.memories.get_messages(T, "c")
        assert messages[0].text_content.startswith(MARKER_TEXT)
        assert [m.text_content for m in messages[1:]] == [text(3), text(4)]
        _, tiers = await service.tiered.tiers(T, "c")
        assert covered_origins(tiers.l3) == {i for i in range(1, 4)}  # seqs 1-3: the first three messages
        status = await service.tiered.status(T, "c")
        assert status.compacted and status.compactions == 1 and status.summaries == 1
        # A second compaction replaces the marker rather than adding one.
        await _add(service, "c", 3, start=5)
        messages = await service.memories.get_messages(T, "c")
        assert sum(m.text_content.startswith(MARKER_TEXT) for m in messages) == 1
        assert messages[0].text_content.startswith(MARKER_TEXT)
        assert (await service.memories.get_memory(T, "c")).message_count == len(messages)


async def test_l2_summarised_at_85_percent_down_to_80_least_important_first(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        # L2 budget 100: 6 items = 78 (< 85); the 7th makes 91 >= 85 and one leaves (78 <= 80).
        await service.memories.create_memory(T, "w", "TIERED", config(l1_compact_trigger=0, l2_budget=100))
        importances = [0.9, 0.7, 0.95, 0.65, 0.8, 0.85, 0.99]
        for i, imp in enumerate(importances[:6]):
            await service.tiered.add_items(T, "w", [msg(i)], [imp])
        _, tiers = await service.tiered.tiers(T, "w")
        assert len(tiers.l2) == 6 and not tiers.l3
        assert [i.importance for i in tiers.l2] == sorted(importances[:6], reverse=True)  # kept by importance
        await service.tiered.add_items(T, "w", [msg(6)], [importances[6]])
        _, tiers = await service.tiered.tiers(T, "w")
        assert sorted(i.importance for i in tiers.l2) == sorted(importances[:3] + importances[4:])
        assert len(tiers.l3) == 1 and text(3) in tiers.l3[0].text
        # The L1 original of the summarised item is marked covered (no second summary later).
        l1_of_3 = [i for i in tiers.l1 if i.msg and i.msg.id == "m3"][0]
        assert l1_of_3.covered and l1_of_3.seq in tiers.l3[0].origins
        kinds = [e.kind for _, e in await service.tiered.events(T, "w")]
        assert kinds.count("summarize_l2") == 1 and kinds.count("promote") == 7


async def test_l1_eviction_of_items_held_in_l2_or_covered_makes_no_new_summary(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        await service.memories.create_memory(T, "h", "TIERED", config(l1_compact_trigger=0, l1_budget=26))
        await service.tiered.add_items(T, "h", [msg(0)], [0.9])  # promoted: still in L2 when it leaves L1
        await _add(service, "h", 2, start=1)
        _, tiers = await service.tiered.tiers(T, "h")
        assert [i.content for i in tiers.l1] == [text(1), text(2)]
        assert not tiers.l3 and [i.content for i in tiers.l2] == [text(0)]
        event = [e for _, e in await service.tiered.events(T, "h") if e.kind == "evict_l1"][0]
        assert event.detail["held_elsewhere"] == event.item_seqs and "summary_seq" not in event.detail


async def test_l3_fifo_of_summaries_without_long_term_memory(tmp_path: Path) -> None:
    summary = offline_summary_tokens()
    async with _service(tmp_path) as service:
        # Every add evicts one message into one summary; L3 holds 5 summaries.
        await service.memories.create_memory(T, "s", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS,
                                                                        l3_budget=5 * summary))
        await _add(service, "s", 6)
        _, tiers = await service.tiered.tiers(T, "s")
        assert [s.text for s in tiers.l3] == ["[offline summary] user: " + text(i) for i in range(5)]
        await _add(service, "s", 1, start=6)
        _, tiers = await service.tiered.tiers(T, "s")
        assert [s.text for s in tiers.l3] == ["[offline summary] user: " + text(i) for i in range(1, 6)]
        evicted = [e for _, e in await service.tiered.events(T, "s") if e.kind == "evict_l3"]
        assert len(evicted) == 1 and evicted[0].detail["texts"] == ["[offline summary] user: " + text(0)]
        assert (await service.tiered.status(T, "s")).evicted_summaries == 1


async def test_concurrent_adds_during_a_pass_lose_nothing(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        await service.memories.create_memory(T, "k", "TIERED", config(l1_compact_trigger=0, l1_budget=3 * ITEM_TOKENS,
                                                                        l2_budget=60))
        await asyncio.gather(*(service.tiered.add_items(T, "k", [msg(i)], [0.9 if i % 2 else 0.3])
                               for i in range(40)))
        await service.tiered.compact(T, "k")
        _, tiers = await service.tiered.tiers(T, "k")
        assert sum(i.tokens for i in tiers.l1) <= 3 * ITEM_TOKENS and sum(i.tokens for i in tiers.l2) < 0.85 * 60
        held = [i.content for i in tiers.l1 + tiers.l2] + [s.text for s in tiers.l3]
        # Every message is still somewhere: in full in L1/L2, or in a summary (the offline one
        # quotes each message's first sentence).
        for i in range(40):
            assert any(text(i) in h for h in held), i


async def test_bad_configuration_names_the_field(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        for bad, field in [({"l1_budget": 0}, "tiered_config.l1_budget"),
                           ({"l2_compact_at": 0.8, "l2_compact_to": 0.85}, "tiered_config.l2_compact_to"),
                           ({"token_counter": "words"}, "tiered_config.token_counter"),
                           ({"promote_threshold": 1.5}, "tiered_config.promote_threshold"),
                           ({"nope": 1}, "tiered_config.nope")]:
            with pytest.raises(InvalidArgumentError) as info:
                await service.memories.create_memory(T, "bad", "TIERED", config(**bad))
            assert info.value.field == field
        await service.memories.create_memory(T, "ok", "TIERED", "{}")
        with pytest.raises(InvalidArgumentError, match="importances"):
            await service.tiered.add_items(T, "ok", [msg(1)], [1.5])


async def test_cl100k_counter_counts_real_tokens(tmp_path: Path) -> None:
    async with _service(tmp_path) as service:
        await service.memories.create_memory(T, "cl", "TIERED", config(token_counter="cl100k"))
        await service.memories.create_memory(T, "es", "TIERED", config())
        for m in ("cl", "es"):
            await service.tiered.add_items(T, m, [msg(1)])
        cl, es = (await service.tiered.status(T, "cl")), (await service.tiered.status(T, "es"))
        assert es.tiers[0].tokens == ITEM_TOKENS
        assert cl.tiers[0].tokens != ITEM_TOKENS and cl.tiers[0].tokens > 0


def test_offline_summary_size_is_what_the_tests_assume() -> None:
    assert offline_summary_tokens() == 4 + math.ceil(len("[offline summary] user: " + text(0)) / 4)
    assert L1 == 1 and L2 == 2 and L3 == 3 and SUMMARY == "summary"


@pytest.mark.parametrize("store", ["sqlite", "memory", "postgres"])
async def test_every_store_keeps_the_tiers(tmp_path: Path, store: str, request: pytest.FixtureRequest) -> None:
    extra = {"postgres_dsn": request.getfixturevalue("postgres_dsn")} if store == "postgres" else {}
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False, store=store, **extra)) as service:
        await service.memories.create_memory(T, "层", "TIERED", config(l1_compact_trigger=65, l2_budget=100))
        await service.tiered.add_items(T, "层", [msg(0)], [0.9])
        await _add(service, "层", 7, start=1)
        _, tiers = await service.tiered.tiers(T, "层")
        assert tiers.l1[0].kind == MARKER and [i.content for i in tiers.l1[1:]] == [text(6), text(7)]
        assert [i.content for i in tiers.l2] == [text(0)]
        held = [i.content for i in tiers.l1 + tiers.l2] + [s.text for s in tiers.l3]
        assert all(any(text(i) in h for h in held) for i in range(8))
        status = await service.tiered.status(T, "层")
        assert status.compactions == 2 and status.summaries == 2
        await service.memories.delete_memory(T, "层")
        await service.memories.create_memory(T, "层", "TIERED", config())
        assert (await service.tiered.status(T, "层")).tiers[0].items == 0
        assert await service.tiered.events(T, "层") == []


async def test_an_offline_summary_of_a_large_batch_keeps_something_of_every_item(tmp_path: Path) -> None:
    # 400 messages in one call: compaction summarises most of L1 at once. Each summarised
    # message's first sentence must be in the summary, at least its start (the summary was cut
    # at 2,000 characters, after about 44 of 247 messages: the rest left L1 with nothing kept).
    async with _service(tmp_path) as service:
        await service.memories.create_memory(T, "大批", "TIERED", config(l1_compact_trigger=200, l1_budget=100_000))
        batch = [Msg.create(MsgRole.USER, f"第{i}条：部署窗口改到{i}号。其余说明略。", id=f"m{i}") for i in range(400)]
        await service.tiered.add_items(T, "大批", batch, [None] * len(batch))
        _, tiers = await service.tiered.tiers(T, "大批")
        summaries = [s for s in tiers.l3 if s.kind == SUMMARY]
        covered = covered_origins(summaries)
        assert len(covered) >= 100
        assert not covered & {o for i in tiers.l1 if i.kind != MARKER for o in i.origins}, "summarised, still in L1"
        joined = " ".join(s.text for s in summaries)
        numbers = sorted(int(m) for m in re.findall(r"第(\d+)条", joined))
        assert len(numbers) == len(covered) and numbers == list(range(len(covered)))
