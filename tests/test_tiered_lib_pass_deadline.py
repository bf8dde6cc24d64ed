"""The pass after a TIERED add stays within the caller's deadline in its last unbounded parts:
the long-term engine's first opening (the embedding model's loading, without preload), the
lookup of the long-term memories holding texts held already, and the pass's own commit. What
the deadline cuts off is done later (the opening and the commit go on in the background, the
summaries not written stay in L3 for the next pass) with nothing stored lost or half-written."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentscope_memory.long_term import hybrid
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.tiered.tokens import Counters
from agentscope_memory.store import SQLITE_FILE_NAME
from agentscope_memory.store.sql.long_term import LongTermStatements
from scripted_llm import ScriptedLLM, ScriptedReply
from tiered_helpers import ITEM_TOKENS, config, msg

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


async def test_a_pass_does_not_wait_past_its_deadline_for_the_holders_of_texts_held_already(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Twelve summaries loaded into L3 (budget: ten): the oldest are due. The oldest's text is
    # held in long-term memory already (the agent recorded it), so after writing the others the
    # pass looks up which memory holds it. With the database busy for that read (another
    # program's lock), the read waited up to SQLite's busy timeout (10 s) past the deadline.
    texts = [f"第{i:02d}份会议纪要：网关服务第{i:02d}次发布由李雷值班，韩梅梅确认上线结果。" for i in range(12)]
    each = Counters().text("estimate", texts[0])
    l3 = [{"seq": i + 1, "kind": "summary", "importance": 0.5, "created": time.time(), "text": t, "origins": []}
          for i, t in enumerate(texts)]
    busy = threading.Event()  # cleared: the lookup's database is busy
    looked_up: list[int] = []
    real = LongTermStatements.ltm_live_ids_by_hash

    def held_back(self: LongTermStatements, scope_key: str, hashes: Any) -> dict[str, str]:
        looked_up.append(1)
        if not busy.is_set():
            if threading.current_thread() is threading.main_thread():
                # On the event loop a read never waits: SQLite's answer to a held lock, which
                # sends the read to a reader thread that waits for it.
                error = sqlite3.OperationalError("database is locked")
                error.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
                raise error
            assert busy.wait(10), "the test never let the database go"
        return real(self, scope_key, hashes)

    with ScriptedLLM() as llm:
        async with build_service(_settings(tmp_path, llm)) as service:
            [recorded] = await service.long_term.record(T, Scope(agent_name="会议纪要"),
                                                        [Msg.create(MsgRole.USER, texts[0])])
            await service.memories.create_memory(T, "会议纪要", "TIERED", config(l3_budget=10 * each))
            await service.memories.load_state(T, "会议纪要", [StateEntry("tieredMemory_l3", items=l3),
                                                           StateEntry("tieredMemory_stats", value={"next_seq": 13})])
            monkeypatch.setattr(LongTermStatements, "ltm_live_ids_by_hash", held_back)
            try:
                result = await _add_in_time(service.tiered.add_items(T, "会议纪要", _msgs(["第十二条：下周一之前提交复盘报告。"]),
                                                                     time_left_s=DEADLINE_S))
                assert result.message_count == 1 and looked_up
                # What the pass wrote itself left L3, named; the held text stays for the next pass.
                [moved] = [e for _, e in await service.tiered.events(T, "会议纪要") if e.kind == "vectorize_l3"]
                n = len(moved.item_seqs)
                assert n >= 1 and moved.item_seqs == list(range(2, 2 + n))
                _, tiers = await service.tiered.tiers(T, "会议纪要")
                assert [s.text for s in tiers.l3] == texts[:1] + texts[1 + n:]
                stored = {i.text: i.id for i in await service.long_term.list(T, Scope(agent_name="会议纪要"))}
                assert stored.keys() == set(texts[:1 + n])
                assert moved.detail["long_term_ids"] == [stored[t] for t in texts[1:1 + n]]
            finally:
                busy.set()
            # The next pass moves it, named by the memory holding it; every text is stored once.
            [(_, event)] = await service.tiered.compact(T, "会议纪要")
            assert event.kind == "vectorize_l3"
            assert (event.item_seqs[0], event.detail["long_term_ids"][0]) == (1, recorded.id)
            _, tiers = await service.tiered.tiers(T, "会议纪要")
            kept = [s.text for s in tiers.l3]
            assert texts[0] not in kept and kept == texts[len(texts) - len(kept):]
            stored_texts = [i.text for i in await service.long_term.list(T, Scope(agent_name="会议纪要"))]
            assert sorted(stored_texts) == texts[:len(texts) - len(kept)]


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


async def test_a_pass_does_not_wait_past_its_deadline_for_its_commit(tmp_path: Path) -> None:
    # Another program (a backup tool, a sqlite3 shell) holds the store's write lock while the
    # pass summarises: its commit waited for the lock up to SQLite's busy timeout (10 s).
    hold = threading.Event()
    with ScriptedLLM(default=ScriptedReply.text("摘要：第一条笔记"), hold=hold) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "笔记", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS))
            await service.tiered.add_items(T, "笔记", [msg(0)])
            # m1 makes m0 leave L1: the pass asks the LLM for its summary, held by the test.
            adding = asyncio.ensure_future(service.tiered.add_items(T, "笔记", [msg(1)], time_left_s=DEADLINE_S))
            other = sqlite3.connect(tmp_path / SQLITE_FILE_NAME, isolation_level=None)
            try:
                while not llm.chat_requests:
                    await asyncio.sleep(0.01)
                other.execute("BEGIN IMMEDIATE")
                hold.set()
                result = await _add_in_time(adding)
                assert result.message_count == 2
                # Nothing of the pass is there yet, and the add's messages are.
                _, tiers = await service.tiered.tiers(T, "笔记")
                assert [i.msg.id for i in tiers.l1 if i.msg] == ["m0", "m1"] and tiers.l3 == []
                assert await service.tiered.events(T, "笔记") == []
            finally:
                hold.set()
                other.execute("ROLLBACK")
                other.close()
            # The commit went on once the lock was let go: the whole pass, once.
            for _ in range(200):
                if await service.tiered.events(T, "笔记"):
                    break
                await asyncio.sleep(0.02)
            assert [e.kind for _, e in await service.tiered.events(T, "笔记")] == ["evict_l1"]
            _, tiers = await service.tiered.tiers(T, "笔记")
            assert [(s.text, s.method, s.origins) for s in tiers.l3] == [("摘要：第一条笔记", "llm", [1])]
            assert [i.msg.id for i in tiers.l1 if i.msg and i.kind == "message"] == ["m1"]
            # Passes still take turns: the next one runs on what the commit left.
            await service.tiered.add_items(T, "笔记", [msg(2)], time_left_s=5)
            _, tiers = await service.tiered.tiers(T, "笔记")
            assert [i.msg.id for i in tiers.l1 if i.msg and i.kind == "message"] == ["m2"] and len(tiers.l3) == 2
