"""The pass after a TIERED add under the caller's gRPC deadline: an LLM summary the deadline
leaves no time for is written offline (`extractive-fallback`, as when the LLM fails), and a pass
held up behind another one is left to the next, so the add answers in time with its items
stored, through AddTieredItems and through a plain AddMessages alike."""

from __future__ import annotations

import asyncio
import time

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.tiered import AsyncTieredClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.short_term.tiered import MARKER_TEXT, TieredConfig
from agentscope_memory.short_term.tiered.items import TierItem
from scripted_llm import ScriptedLLM, ScriptedReply

# Each message is 4 + 20 x 1.25 = 29 estimated tokens: the third reaches the trigger (60), and
# compaction down to 30 takes the oldest two into one summary (importance 0.5: none in L2).
CONFIG = TieredConfig(l1_compact_trigger=60, score_importance=False)
TEXTS = ["第一条：周二上午十点部署新版本网关服务。", "第二条：回滚预案由运维组李雷负责执行。", "第三条：发布之后请通知产品经理韩梅梅。"]
# The LLM writes each summary in 3 s: past the hurried callers' 2 s deadline.
SLOW = ScriptedReply.text("部署定在周二上午十点，李雷负责回滚。").after(3)


def _msgs(texts: list[str]) -> list[Msg]:
    return [Msg.create(MsgRole.USER, t) for t in texts]


async def _assert_offline_summary(tiered: AsyncTieredClient, memory_id: str) -> None:
    """The first two messages left L1 into one offline summary, marked as such; the third stayed."""
    l1 = await tiered.get_items(memory_id, 1)
    assert l1[0].msg is not None and l1[0].msg.text_content.startswith(MARKER_TEXT)
    assert [i.content for i in l1[1:]] == TEXTS[2:]
    [summary] = await tiered.get_items(memory_id, 3)
    assert summary.method == "extractive-fallback"
    assert summary.text == "[offline summary] " + " | ".join(f"user: {t}" for t in TEXTS[:2])
    assert summary.origins == [1, 2]
    [compaction] = [e for _, e in await tiered.get_events(memory_id) if e.kind == "compact_l1"]
    assert compaction.item_seqs == [1, 2]
    assert compaction.detail["method"] == "extractive-fallback"
    assert compaction.detail["summary_seq"] == summary.seq


async def test_an_add_whose_pass_summarises_answers_within_a_short_deadline(server_factory) -> None:  # type: ignore[no-untyped-def]
    # The pass waited for the LLM's summary (3 s): a client with a 2 s deadline got
    # DEADLINE_EXCEEDED although its items were stored.
    with ScriptedLLM(default=SLOW) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, long_term_enabled=False)
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncTieredClient(server.address, timeout=2) as hurried:
            await tiered.create_memory("部署记录", CONFIG)
            await hurried.add("部署记录", _msgs(TEXTS[:2]))
            assert llm.chat_requests == []  # below the trigger: no pass, no summary
            started = time.monotonic()
            result = await hurried.add("部署记录", _msgs(TEXTS[2:]))
            assert time.monotonic() - started < 2.0
            assert result.message_count == 3  # L1 when the add committed, before its pass
            assert result.status.compacted and result.status.summaries == 1
            assert len(llm.chat_requests) == 1  # the LLM was asked; its answer came too late
            await _assert_offline_summary(tiered, "部署记录")

            # A caller with time for the LLM gets its summary, from the same slow LLM.
            await tiered.create_memory("从容", CONFIG)
            await tiered.add("从容", _msgs(TEXTS))
            [summary] = await tiered.get_items("从容", 3)
            assert (summary.text, summary.method) == ("部署定在周二上午十点，李雷负责回滚。", "llm")


async def test_a_plain_add_messages_on_a_tiered_memory_answers_within_a_short_deadline(server_factory) -> None:  # type: ignore[no-untyped-def]
    # MemoryService.AddMessages runs the same pass, and waited for the LLM the same way.
    with ScriptedLLM(default=SLOW) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, long_term_enabled=False)
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncMemoryClient(server.address, timeout=2) as hurried:
            await tiered.create_memory("普通接口", CONFIG)
            started = time.monotonic()
            count = await hurried.add_messages("普通接口", _msgs(TEXTS))
            assert time.monotonic() - started < 2.0
            assert count == 3
            assert len(llm.chat_requests) == 1
            await _assert_offline_summary(tiered, "普通接口")
            got = await hurried.get_messages("普通接口")
            assert [m.text_content for m in got[1:]] == TEXTS[2:]


async def test_a_short_deadline_does_not_wait_behind_another_pass_over_the_memory(server_factory) -> None:  # type: ignore[no-untyped-def]
    # A patient caller's pass holds the memory's pass lock while the LLM writes its summary (3 s):
    # the hurried add's pass waited for that lock, then for an LLM summary of its own.
    with ScriptedLLM(default=SLOW) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, long_term_enabled=False)
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncTieredClient(server.address, timeout=2) as hurried:
            await tiered.create_memory("排队", CONFIG)
            patient = asyncio.create_task(tiered.add("排队", _msgs(TEXTS)))
            while not llm.chat_requests:
                await asyncio.sleep(0.01)
            started = time.monotonic()
            late = ["第四条：周三复盘会议在三楼会议室举行。", "第五条：复盘材料由张伟在周二晚上准备好。"]
            result = await hurried.add("排队", _msgs(late))
            assert time.monotonic() - started < 2.0
            assert result.message_count == 5  # stored beside the three the patient pass is moving
            assert len(llm.chat_requests) == 1  # the hurried add's pass did not run
            await patient
            # The patient pass moved what it had read; the hurried add's messages stayed in L1.
            l1: list[TierItem] = await tiered.get_items("排队", 1)
            assert [i.content for i in l1[1:]] == TEXTS[2:] + late
            [summary] = await tiered.get_items("排队", 3)
            assert summary.method == "llm" and summary.origins == [1, 2]
            # The next pass (here CompactTiers, with time for the LLM) moves what is due now.
            events, status = await tiered.compact("排队")
            assert [e.kind for _, e in events] == ["compact_l1"]
            assert status.summaries == 2 and len(llm.chat_requests) == 2
