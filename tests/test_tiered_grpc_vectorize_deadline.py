"""The pass after a TIERED add writes L3's summaries to long-term memory within the caller's
gRPC deadline: with a slow embedding endpoint, what it cannot write in time stays in L3, the add
answers in time with its items stored, and the next pass or CompactTiers moves the rest, each
summary into long-term memory once."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.client.tiered import AsyncTieredClient
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.tiered import TieredConfig
from agentscope_memory.short_term.tiered.service import VECTORIZE_BATCH
from agentscope_memory.short_term.tiered.tokens import Counters
from scripted_llm import ScriptedLLM

TEXTS = ["第一条：周二上午十点部署新版本网关服务。", "第二条：回滚预案由运维组李雷负责执行。", "第三条：发布之后请通知产品经理韩梅梅。"]
# The third message (29 estimated tokens each) reaches the trigger (60): the oldest two leave
# L1 in one offline summary of 60 tokens, L3's whole budget, past 90% of it: due for long-term
# memory in the same pass.
CONFIG = TieredConfig(l1_compact_trigger=60, l3_budget=60, score_importance=False)
SUMMARY = "[offline summary] " + " | ".join(f"user: {t}" for t in TEXTS[:2])
# The embedding endpoint takes 3 s for a summary: past the hurried callers' 2 s deadline.
SLOW_S_PER_TEXT = 3.0


def _msgs(texts: list[str]) -> list[Msg]:
    return [Msg.create(MsgRole.USER, t) for t in texts]


def _settings(llm: ScriptedLLM) -> dict[str, object]:
    # No LLM: summaries are offline (instant), the embedder is the only slow part.
    return {"long_term_embedder": "openai", "long_term_embedder_base_url": llm.base_url,
            "long_term_embedder_dims": llm.dims}


async def _long_term_texts(address: str, memory_id: str) -> Counter[str]:
    async with AsyncLongTermClient(address, timeout=10) as long_term:
        return Counter(i.text for i in await long_term.list(Scope(agent_name=memory_id), limit=1000))


async def _assert_deferred(tiered: AsyncTieredClient, address: str, memory_id: str) -> int:
    """The summary stayed in L3 (its long-term write came too late), nothing went to long-term
    memory and no event says it did; returns the summary's sequence number."""
    [summary] = await tiered.get_items(memory_id, 3)
    assert (summary.text, summary.origins) == (SUMMARY, [1, 2])
    assert [e.kind for _, e in await tiered.get_events(memory_id)] == ["compact_l1"]
    assert await _long_term_texts(address, memory_id) == Counter()
    assert (await tiered.status(memory_id)).l4_vectors == 0
    return summary.seq


async def _assert_moved_once(tiered: AsyncTieredClient, address: str, memory_id: str, seq: int) -> None:
    """L3 is empty, long-term memory holds the summary once and a vectorize_l3 event names it."""
    assert await tiered.get_items(memory_id, 3) == []
    async with AsyncLongTermClient(address, timeout=10) as long_term:
        [stored] = await long_term.list(Scope(agent_name=memory_id))
    assert stored.text == SUMMARY
    [moved] = [e for _, e in await tiered.get_events(memory_id) if e.kind == "vectorize_l3"]
    assert (moved.item_seqs, moved.detail["long_term_ids"]) == ([seq], [stored.id])
    assert (await tiered.status(memory_id)).l4_vectors == 1


async def test_an_add_whose_pass_writes_long_term_memory_answers_within_a_short_deadline(server_factory) -> None:  # type: ignore[no-untyped-def]
    # The pass waited for the embedding (3 s): a client with a 2 s deadline got DEADLINE_EXCEEDED
    # although its items were stored, and retried.
    with ScriptedLLM(embedding_s_per_text=SLOW_S_PER_TEXT) as llm:
        server = await server_factory(**_settings(llm))
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncTieredClient(server.address, timeout=2) as hurried:
            await tiered.create_memory("网关部署", CONFIG)
            await hurried.add("网关部署", _msgs(TEXTS[:2]))
            started = time.monotonic()
            result = await hurried.add("网关部署", _msgs(TEXTS[2:]))
            assert time.monotonic() - started < 2.0
            assert result.message_count == 3 and result.status.compacted and result.status.summaries == 1
            l1 = await tiered.get_items("网关部署", 1)
            assert [i.content for i in l1[1:]] == TEXTS[2:]
            seq = await _assert_deferred(tiered, server.address, "网关部署")

            # CompactTiers waits for the embedder as before, and moves the summary.
            events, status = await tiered.compact("网关部署")
            assert [e.kind for _, e in events] == ["vectorize_l3"] and status.summaries == 0
            await _assert_moved_once(tiered, server.address, "网关部署", seq)
            assert [i.content for i in (await tiered.get_items("网关部署", 1))[1:]] == TEXTS[2:]


async def test_the_next_add_moves_what_a_plain_add_messages_left_in_l3(server_factory) -> None:  # type: ignore[no-untyped-def]
    # MemoryService.AddMessages runs the same pass and waited for the embedder the same way.
    with ScriptedLLM(embedding_s_per_text=SLOW_S_PER_TEXT) as llm:
        server = await server_factory(**_settings(llm))
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncMemoryClient(server.address, timeout=2) as hurried, \
                AsyncMemoryClient(server.address, timeout=10) as patient:
            await tiered.create_memory("回滚预案", CONFIG)
            started = time.monotonic()
            assert await hurried.add_messages("回滚预案", _msgs(TEXTS)) == 3
            assert time.monotonic() - started < 2.0
            seq = await _assert_deferred(tiered, server.address, "回滚预案")

            # The next add (below L1's trigger) has time: its pass moves the summary.
            later = "第四条：周三复盘会议在三楼会议室举行。"
            await patient.add_messages("回滚预案", _msgs([later]))
            await _assert_moved_once(tiered, server.address, "回滚预案", seq)
            got = await patient.get_messages("回滚预案")
            assert [m.text_content for m in got[1:]] == [TEXTS[2], later]


async def test_a_pass_with_many_summaries_due_moves_what_its_deadline_allows(server_factory) -> None:  # type: ignore[no-untyped-def]
    # 50 summaries due at once (a loaded L3 far beyond its budget) took one embedding of 2.5 s:
    # the hurried caller got DEADLINE_EXCEEDED, and so would every later one: under short
    # deadlines L3 never emptied. Now a pass writes batches while its deadline allows.
    texts = [f"第{i:02d}份会议纪要：网关服务第{i:02d}次发布由李雷值班，韩梅梅确认上线结果。" for i in range(60)]
    each = Counters().text("estimate", texts[0])
    assert {Counters().text("estimate", t) for t in texts} == {each}
    # The oldest 20% (12) are due at 90% of the budget, and beyond it the oldest leave until ten
    # are left: 50 go to long-term memory.
    config = TieredConfig(l3_budget=10 * each, score_importance=False)
    l3 = [{"seq": i + 1, "kind": "summary", "importance": 0.5, "created": time.time(), "text": t, "origins": []}
          for i, t in enumerate(texts)]
    with ScriptedLLM(embedding_s_per_text=0.05) as llm:
        server = await server_factory(**_settings(llm))
        async with AsyncTieredClient(server.address, timeout=30) as tiered, \
                AsyncTieredClient(server.address, timeout=2) as hurried, \
                AsyncMemoryClient(server.address, timeout=10) as memories:
            await tiered.create_memory("会议纪要", config)
            await memories.load_state("会议纪要", [StateEntry("tieredMemory_l3", items=l3),
                                                 StateEntry("tieredMemory_stats", value={"next_seq": 61})])
            started = time.monotonic()
            result = await hurried.add("会议纪要", _msgs(["第六十条：下周一之前提交复盘报告。"]))
            assert time.monotonic() - started < 2.0
            assert result.message_count == 1
            moved = await _moved_and_kept("会议纪要", tiered, server.address, texts)
            # Whole batches of the oldest (one takes 0.8 s), not all of them.
            assert len(moved) % VECTORIZE_BATCH == 0 and VECTORIZE_BATCH <= len(moved) < 50

            # CompactTiers moves the rest of what is due; nothing is lost or stored twice.
            events, _ = await tiered.compact("会议纪要")
            assert {e.kind for _, e in events} == {"vectorize_l3"}
            assert len(await _moved_and_kept("会议纪要", tiered, server.address, texts)) == 50
            assert (await tiered.status("会议纪要")).l4_vectors == 50


async def _moved_and_kept(memory_id: str, tiered: AsyncTieredClient, address: str, texts: list[str]) -> list[int]:
    """The loaded summaries' sequence numbers vectorize_l3 events name: the oldest, each once;
    long-term memory holds each of them once and L3 the rest, in order. Returns them."""
    moved = [s for _, e in await tiered.get_events(memory_id) if e.kind == "vectorize_l3" for s in e.item_seqs]
    assert moved == list(range(1, len(moved) + 1))
    assert [i.text for i in await tiered.get_items(memory_id, 3)] == texts[len(moved):]
    assert await _long_term_texts(address, memory_id) == Counter(texts[:len(moved)])
    return moved


async def test_a_pass_does_not_wait_past_its_deadline_behind_another_writer_of_the_scope(server_factory) -> None:  # type: ignore[no-untyped-def]
    # The agent records ten notes to the same long-term scope: their embedding (3 s) holds the
    # scope's lock, and the pass's own write (0.3 s) waited behind it past the caller's deadline.
    notes = [f"第{i}条备忘：网关服务的值班表第{i}周由李雷负责。" for i in range(10)]
    with ScriptedLLM(embedding_s_per_text=0.3) as llm:
        server = await server_factory(**_settings(llm))
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncTieredClient(server.address, timeout=2) as hurried, \
                AsyncLongTermClient(server.address, timeout=10) as long_term:
            await tiered.create_memory("值班", CONFIG)
            await hurried.add("值班", _msgs(TEXTS[:2]))
            recording = asyncio.create_task(long_term.record(Scope(agent_name="值班"), _msgs(notes)))
            while not any(r.path.endswith("/embeddings") for r in llm.requests):
                await asyncio.sleep(0.01)
            started = time.monotonic()
            result = await hurried.add("值班", _msgs(TEXTS[2:]))
            assert time.monotonic() - started < 2.0
            assert result.message_count == 3 and result.status.summaries == 1
            assert not recording.done()  # the pass gave up on the lock, not waited for it
            [summary] = await tiered.get_items("值班", 3)
            assert summary.text == SUMMARY
            assert [e.kind for _, e in await tiered.get_events("值班")] == ["compact_l1"]
            assert len(await recording) == 10

            events, _ = await tiered.compact("值班")
            assert [(e.kind, e.item_seqs) for _, e in events] == [("vectorize_l3", [summary.seq])]
            assert await tiered.get_items("值班", 3) == []
            assert await _long_term_texts(server.address, "值班") == Counter([*notes, SUMMARY])
