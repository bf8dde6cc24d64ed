"""The pass after a TIERED add stays within the caller's deadline in the long-term engine's first
opening (the embedding model's loading, without preload) and its read of the texts a scope
holds. What the deadline cuts off is done later (the opening goes on in the background, the
summaries not written stay in L3 for the next pass) with nothing stored lost or half-written."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentscope_memory.long_term import hybrid
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.store.sql.long_term import LongTermStatements
from scripted_llm import ScriptedLLM
from tiered_helpers import config

T = "tenant"
TEXTS = ["第一条：周二上午十点部署新版本网关服务。", "第二条：回滚预案由运维组李雷负责执行。", "第三条：发布之后请通知产品经理韩梅梅。"]
# As in test_tiered_grpc_vectorize_deadline: the third message makes one offline summary of
# the first two, due for long-term memory in the same pass.
CONFIG = config(l1_compact_trigger=60, l3_budget=60)
SUMMARY = "[offline summary] " + " | ".join(f"user: {t}" for t in TEXTS[:2])
# The caller's deadline; each test's old behaviour waited far past it (seconds, or for ever).
DEADLINE_S = 1.0


def _msgs(texts: list[str]) -> list[Msg]:
    return [Msg.create(MsgRole.USER, t) for t in texts]


def _settings(tmp_path: Path, llm: ScriptedLLM, **overrides: Any) -> ServiceSettings:
    values: dict[str, Any] = {"data_dir": tmp_path, "long_term_embedder": "openai",
                              "long_term_embedder_base_url": llm.base_url, "long_term_embedder_dims": llm.dims,
                              "long_term_preload": False}
    values.update(overrides)
    return ServiceSettings(**values)


async def _add_in_time(add: Any) -> Any:
    """The add's result, which must come by the caller's deadline (waited for a little longer, so
    that the old behaviour fails here instead of hanging the suite)."""
    started = time.monotonic()
    try:
        result = await asyncio.wait_for(add, 3 * DEADLINE_S)
    except TimeoutError:
        pytest.fail(f"the add did not answer within {3 * DEADLINE_S}s (its caller's deadline: {DEADLINE_S}s)")
    assert time.monotonic() - started < DEADLINE_S
    return result


async def test_a_pass_does_not_wait_past_its_deadline_for_the_embedding_model_to_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without preload the first long-term write loads the embedding model (a local model: tens
    # of seconds): the add's pass waited for it, past every short deadline.
    loading = threading.Event()
    loaded: list[int] = []
    real = hybrid.OpenAiEmbedder

    class SlowToLoad(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            assert loading.wait(10), "the test never let the model load"
            super().__init__(*args, **kwargs)
            loaded.append(1)

    monkeypatch.setattr(hybrid, "OpenAiEmbedder", SlowToLoad)
    with ScriptedLLM() as llm:
        async with build_service(_settings(tmp_path, llm)) as service:
            try:
                await service.memories.create_memory(T, "网关部署", "TIERED", CONFIG)
                await service.tiered.add_items(T, "网关部署", _msgs(TEXTS[:2]))
                result = await _add_in_time(service.tiered.add_items(T, "网关部署", _msgs(TEXTS[2:]),
                                                                     time_left_s=DEADLINE_S))
                assert result.message_count == 3
                # The summary waits in L3; nothing says it left.
                _, tiers = await service.tiered.tiers(T, "网关部署")
                assert [s.text for s in tiers.l3] == [SUMMARY]
                assert [e.kind for _, e in await service.tiered.events(T, "网关部署")] == ["compact_l1"]
            finally:
                loading.set()
            # The loading went on meanwhile: the next pass finds the model loaded (not loaded
            # again) and moves the summary, once.
            events = await service.tiered.compact(T, "网关部署")
            assert [e.kind for _, e in events] == ["vectorize_l3"]
            assert loaded == [1]
            stored = await service.long_term.list(T, Scope(agent_name="网关部署"))
            assert [i.text for i in stored] == [SUMMARY]
            assert events[0][1].detail["long_term_ids"] == [stored[0].id]
            _, tiers = await service.tiered.tiers(T, "网关部署")
            assert tiers.l3 == [] and [i.content for i in tiers.l1[1:]] == TEXTS[2:]


async def test_a_pass_does_not_wait_past_its_deadline_for_the_texts_a_scope_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before embedding, a write reads which of its texts the scope holds already: a read on a
    # reader thread, waiting up to SQLite's busy timeout (10 s) when the database is busy.
    busy = threading.Event()
    real = LongTermStatements.ltm_existing_hashes

    def held_back(self: LongTermStatements, scope_key: str, hashes: Any) -> set[str]:
        assert busy.wait(10), "the test never let the database go"
        return real(self, scope_key, hashes)

    with ScriptedLLM() as llm:
        async with build_service(_settings(tmp_path, llm, long_term_preload=True)) as service:
            await service.memories.create_memory(T, "回滚预案", "TIERED", CONFIG)
            await service.tiered.add_items(T, "回滚预案", _msgs(TEXTS[:2]))
            monkeypatch.setattr(LongTermStatements, "ltm_existing_hashes", held_back)
            try:
                result = await _add_in_time(service.tiered.add_items(T, "回滚预案", _msgs(TEXTS[2:]),
                                                                     time_left_s=DEADLINE_S))
                assert result.message_count == 3
                _, tiers = await service.tiered.tiers(T, "回滚预案")
                assert [s.text for s in tiers.l3] == [SUMMARY]
                assert [e.kind for _, e in await service.tiered.events(T, "回滚预案")] == ["compact_l1"]
                assert llm.requests == []  # nothing was embedded
            finally:
                busy.set()
            events = await service.tiered.compact(T, "回滚预案")
            assert [e.kind for _, e in events] == ["vectorize_l3"]
            assert [i.text for i in await service.long_term.list(T, Scope(agent_name="回滚预案"))] == [SUMMARY]
