"""TIERED LLM importance scoring under the caller's gRPC deadline: a deadline shorter than the
scoring budget ends the scoring in time, and the heuristic scores what the LLM had not."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentscope_memory.client.tiered import AsyncTieredClient
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.short_term.tiered import TieredConfig
from scripted_llm import ScriptedLLM, ScriptedReply

CONFIG = TieredConfig(score_importance=True, llm_importance=True)
# The LLM answers each importance call after 3 s: past the callers' 2 s deadline.
SLOW = ScriptedReply.json({"importance_score": 0.77, "extracted_fact": "", "domain": "general_chat"}).after(3)
TEXTS = ["请记住：我对花生过敏。", "下周二上午十点部署，由运维组负责回滚。", "I moved to Shanghai last year."]


def _msgs(texts: list[str]) -> list[Msg]:
    return [Msg.create(MsgRole.USER, t) for t in texts]


async def _assert_heuristic(tiered: AsyncTieredClient, memory_id: str) -> None:
    items = await tiered.get_items(memory_id, 1)
    expected = [HeuristicScorer().assess_now([t]).importance_score for t in TEXTS]
    assert 0.77 not in expected
    assert [i.content for i in items] == TEXTS
    assert [i.method for i in items] == ["heuristic"] * len(TEXTS)
    assert [i.importance for i in items] == pytest.approx(expected)


async def test_a_deadline_shorter_than_the_scoring_budget_gets_heuristic_scores_in_time(server_factory) -> None:  # type: ignore[no-untyped-def]
    # The server waited for the LLM up to its 10 s budget: a client with a 2 s deadline got
    # DEADLINE_EXCEEDED (and retrying would only wait again).
    with ScriptedLLM(default=SLOW) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, long_term_enabled=False)
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncTieredClient(server.address, timeout=2) as hurried:
            await tiered.create_memory("评分", CONFIG)
            started = time.monotonic()
            result = await hurried.add("评分", _msgs(TEXTS))
            assert time.monotonic() - started < 2.0
            assert result.message_count == 3
            # The LLM was asked for each item; its answers came too late and were not waited for.
            assert len(llm.chat_requests) == 3
            await _assert_heuristic(tiered, "评分")


async def test_a_short_deadline_does_not_wait_for_a_turn_behind_another_memorys_calls(server_factory) -> None:  # type: ignore[no-untyped-def]
    # Another memory's batch holds all four scoring slots with calls the LLM answers in 3 s:
    # the hurried add's calls waited for a turn past its deadline.
    with ScriptedLLM(default=SLOW) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, long_term_enabled=False)
        async with AsyncTieredClient(server.address, timeout=10) as tiered, \
                AsyncTieredClient(server.address, timeout=2) as hurried:
            for memory_id in ("大批", "评分"):
                await tiered.create_memory(memory_id, CONFIG)
            batch = asyncio.create_task(tiered.add("大批", _msgs([f"第{i}条：周{i % 7 + 1}开会。" for i in range(8)])))
            while len(llm.chat_requests) < 4:
                await asyncio.sleep(0.01)
            started = time.monotonic()
            await hurried.add("评分", _msgs(TEXTS))
            assert time.monotonic() - started < 2.0
            assert len(llm.chat_requests) == 4  # no turn came: nothing of this add was sent
            await _assert_heuristic(tiered, "评分")
            # The batch's caller had time: the LLM scored it (two rounds of 3 s).
            await batch
            assert [(i.importance, i.method) for i in await tiered.get_items("大批", 1)] == [(pytest.approx(0.77), "llm")] * 8
