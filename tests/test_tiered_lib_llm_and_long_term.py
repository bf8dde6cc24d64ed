"""TIERED memory summaries by the (scripted) LLM with the offline fallback, L3 -> L4 into the
long-term engine (embeddings from the scripted OpenAI-compatible server), restart and state."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.short_term.tiered.summaries import PROMPT
from scripted_llm import ScriptedLLM, ScriptedReply
from tiered_helpers import ITEM_TOKENS, config, msg, offline_summary_tokens, text

T = "tenant"


async def test_llm_writes_summaries_and_a_failure_falls_back_marked(tmp_path: Path) -> None:
    with ScriptedLLM(default=ScriptedReply.text("LLM SUMMARY")) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "l", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS))
            await service.tiered.add_items(T, "l", [msg(0)])
            await service.tiered.add_items(T, "l", [msg(1)])
            _, tiers = await service.tiered.tiers(T, "l")
            assert [(s.text, s.method) for s in tiers.l3] == [("LLM SUMMARY", "llm")]
            request = llm.chat_requests[-1].body["messages"]
            assert request[0] == {"role": "system", "content": PROMPT} and text(0) in request[1]["content"]
            llm.push(ScriptedReply.error(500))
            await service.tiered.add_items(T, "l", [msg(2)])
            _, tiers = await service.tiered.tiers(T, "l")
            assert [(s.text, s.method) for s in tiers.l3][1] == ("[offline summary] user: " + text(1), "extractive-fallback")


async def test_l3_at_90_percent_sends_its_oldest_20_percent_to_long_term_memory(tmp_path: Path) -> None:
    summary = offline_summary_tokens()
    with ScriptedLLM() as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_embedder="openai", long_term_embedder_base_url=llm.base_url,
                                   long_term_embedder_dims=llm.dims, long_term_preload=False)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "v", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS,
                                                                            l3_budget=10 * summary))
            for i in range(9):  # 8 summaries: 80% of L3
                await service.tiered.add_items(T, "v", [msg(i)])
            _, tiers = await service.tiered.tiers(T, "v")
            assert len(tiers.l3) == 8
            await service.tiered.add_items(T, "v", [msg(9)])  # the 9th summary: 90%
            _, tiers = await service.tiered.tiers(T, "v")
            assert [s.text for s in tiers.l3] == ["[offline summary] user: " + text(i) for i in range(2, 9)]
            event = [e for _, e in await service.tiered.events(T, "v") if e.kind == "vectorize_l3"][0]
            assert len(event.detail["long_term_ids"]) == 2 and event.to_tier == 4
            from agentscope_memory.long_term.engine import Scope

            stored = await service.long_term.list(T, Scope(agent_name="v"))
            assert sorted(i.text for i in stored) == ["[offline summary] user: " + text(i) for i in range(2)]
            assert {i.memory_type for i in stored} == {"summary"}
            status = await service.tiered.status(T, "v")
            assert status.l4_vectors == 2 and status.tiers[3].items == 2
            hits = await service.tiered.query(T, "v", "note 0001", tiers=[4])
            assert hits and hits[0].tier == 4 and text(1) in hits[0].text


async def test_restart_and_state_round_trip_keep_every_tier(tmp_path: Path) -> None:
    settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False)
    async with build_service(settings) as service:
        await service.memories.create_memory(T, "r", "TIERED", config(l1_compact_trigger=40, l2_budget=60))
        for i in range(12):
            await service.tiered.add_items(T, "r", [msg(i)], [0.9 if i % 3 == 0 else 0.4])
        before = await service.tiered.tiers(T, "r")
        status = await service.tiered.status(T, "r")
        events = await service.tiered.events(T, "r")
    async with build_service(settings) as service:
        assert await service.tiered.tiers(T, "r") == before
        assert await service.tiered.status(T, "r") == status
        assert await service.tiered.events(T, "r") == events
        record, entries = await service.memories.save_state(T, "r")
        assert [e.key for e in entries] == ["tieredMemory_l1", "tieredMemory_l2", "tieredMemory_l3",
                                            "tieredMemory_events", "tieredMemory_stats"]
        await service.memories.create_memory(T, "copy", "TIERED", record.config_json)
        await service.memories.load_state(T, "copy", entries)
        copy_config, copy_tiers = await service.tiered.tiers(T, "copy")
        assert copy_tiers == before[1] and copy_config == before[0]
        copy_status = await service.tiered.status(T, "copy")
        assert copy_status.tiers == status.tiers and copy_status.compaction_ratio == status.compaction_ratio
        assert [e for _, e in await service.tiered.events(T, "copy")] == [e for _, e in events]
        # The copy keeps working: new items get new sequence numbers.
        await service.tiered.add_items(T, "copy", [msg(99)])
        _, tiers = await service.tiered.tiers(T, "copy")
        assert tiers.l1[-1].content == text(99) and tiers.l1[-1].seq > max(i.seq for i in before[1].l1)


async def test_adds_while_a_summary_is_being_written_are_kept(tmp_path: Path) -> None:
    import asyncio
    import threading

    hold = threading.Event()
    with ScriptedLLM(default=ScriptedReply.text("HELD SUMMARY"), hold=hold) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "c", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS))
            await service.tiered.add_items(T, "c", [msg(0)])
            first = asyncio.create_task(service.tiered.add_items(T, "c", [msg(1)]))  # evicts m0: the LLM is held
            while not llm.requests:
                await asyncio.sleep(0.01)
            others = [asyncio.create_task(service.tiered.add_items(T, "c", [msg(i)])) for i in range(2, 6)]
            while len((await service.tiered.tiers(T, "c"))[1].l1) < 6:
                await asyncio.sleep(0.01)
            hold.set()
            await asyncio.gather(first, *others)
            await service.tiered.compact(T, "c")
            _, tiers = await service.tiered.tiers(T, "c")
            assert [i.msg.id for i in tiers.l1 if i.msg] == ["m5"]
            summarised = {o for s in tiers.l3 for o in s.origins}
            assert {s.text for s in tiers.l3} == {"HELD SUMMARY"}
            assert sorted(summarised) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("replace_by", ["load_state", "delete_and_create"])
async def test_a_pass_over_items_replaced_meanwhile_under_the_same_numbers_moves_nothing(tmp_path: Path,
                                                                                         replace_by: str) -> None:
    # A loaded state numbers its items itself, and a memory made anew numbers from 1 again: the
    # pass that was summarising the old message 1 deleted the new message 1 (unsummarised) and
    # put the old one's summary in its place.
    import asyncio
    import threading

    hold = threading.Event()
    with ScriptedLLM(default=ScriptedReply.text("SUMMARY OF THE OLD MESSAGE"), hold=hold) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            cfg = config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS)
            new = Msg.create(MsgRole.USER, "the new message", id="new")
            await service.memories.create_memory(T, "source", "TIERED", cfg)
            await service.memories.add_messages(T, "source", [new])
            _, state = await service.memories.save_state(T, "source")
            await service.memories.create_memory(T, "c", "TIERED", cfg)
            await service.tiered.add_items(T, "c", [msg(0)])
            evicting = asyncio.create_task(service.tiered.add_items(T, "c", [msg(1)]))  # evicts m0 (seq 1)
            while not llm.chat_requests:
                await asyncio.sleep(0.01)
            adding = None
            if replace_by == "load_state":
                await service.memories.load_state(T, "c", state)
            else:
                await service.memories.delete_memory(T, "c")
                await service.memories.create_memory(T, "c", "TIERED", cfg)
                # Committed at once; its own pass waits for the held one.
                adding = asyncio.create_task(service.memories.add_messages(T, "c", [new]))
                while not (await service.tiered.tiers(T, "c"))[1].l1:
                    await asyncio.sleep(0.01)
            hold.set()
            await evicting
            if adding is not None:
                await adding
            _, tiers = await service.tiered.tiers(T, "c")
            assert [(i.seq, i.msg.id if i.msg else "") for i in tiers.l1] == [(1, "new")]
            assert tiers.l3 == [] and await service.tiered.events(T, "c") == []


async def test_custom_thresholds_scope_and_vectorize_off(tmp_path: Path) -> None:
    summary = offline_summary_tokens()
    with ScriptedLLM() as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_embedder="openai", long_term_embedder_base_url=llm.base_url,
                                   long_term_embedder_dims=llm.dims, long_term_preload=False)
        async with build_service(settings) as service:
            from agentscope_memory.long_term.engine import Scope

            # L2 at 50% of 100 tokens (4 items = 52) drops to 25% (one item stays).
            await service.memories.create_memory(T, "w", "TIERED", config(l1_compact_trigger=0, l2_budget=100,
                                                                            l2_compact_at=0.5, l2_compact_to=0.25))
            for i in range(4):
                await service.tiered.add_items(T, "w", [msg(i)], [0.7 + i / 100])
            _, tiers = await service.tiered.tiers(T, "w")
            assert [i.content for i in tiers.l2] == [text(3)]
            # L3 at 50% of 4 summaries' tokens sends half of them (the oldest) to the configured scope.
            await service.memories.create_memory(T, "v", "TIERED", config(
                l1_compact_trigger=0, l1_budget=ITEM_TOKENS, l3_budget=4 * summary, l3_vectorize_at=0.5,
                l3_vectorize_fraction=0.5, l4_budget=1234, agent_name="助手", user_id="u-1", run_name="r"))
            for i in range(3):
                await service.tiered.add_items(T, "v", [msg(i)])
            _, tiers = await service.tiered.tiers(T, "v")
            assert [s.text for s in tiers.l3] == ["[offline summary] user: " + text(1)]
            stored = await service.long_term.list(T, Scope("助手", "u-1", "r"))
            assert [i.text for i in stored] == ["[offline summary] user: " + text(0)]
            assert not await service.long_term.list(T, Scope(agent_name="v"))
            status = await service.tiered.status(T, "v")
            assert status.tiers[3].budget == 1234 and status.l4_vectors == 1
            # vectorize off: nothing reaches long-term memory; beyond L3's budget summaries leave.
            await service.memories.create_memory(T, "off", "TIERED", config(
                l1_compact_trigger=0, l1_budget=ITEM_TOKENS, l3_budget=2 * summary, vectorize=False))
            for i in range(4):
                await service.tiered.add_items(T, "off", [msg(i)])
            _, tiers = await service.tiered.tiers(T, "off")
            assert [s.text for s in tiers.l3] == ["[offline summary] user: " + text(i) for i in (1, 2)]
            assert not await service.long_term.list(T, Scope(agent_name="off"))
            assert (await service.tiered.status(T, "off")).evicted_summaries == 1


async def test_a_failing_long_term_memory_does_not_fail_the_add(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here once closed
    summary = offline_summary_tokens()
    settings = ServiceSettings(data_dir=tmp_path, long_term_embedder="openai",
                               long_term_embedder_base_url=f"http://127.0.0.1:{port}/v1", long_term_embedder_dims=64,
                               long_term_preload=False)
    async with build_service(settings) as service:
        await service.memories.create_memory(T, "x", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS,
                                                                        l3_budget=2 * summary))
        for i in range(3):
            await service.tiered.add_items(T, "x", [msg(i)])
        status = await service.tiered.status(T, "x")
        # L1's evictions still happened; L3's summaries wait for long-term memory.
        assert status.tiers[0].items == 1 and status.summaries == 2 and status.l4_vectors == 0
        _, tiers = await service.tiered.tiers(T, "x")
        # The pass could not write L4, so it changed nothing: every message is still held.
        held = [i.content for i in tiers.l1] + [s.text for s in tiers.l3]
        assert all(any(text(i) in h for h in held) for i in range(3))


async def test_projection_ranks_facts_with_the_long_term_embedder(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from agentscope_memory.message import Msg, MsgRole
    from agentscope_memory.short_term.tiered import projection
    from agentscope_memory.short_term.tiered.projection import ProjectionRequest

    facts = ["Deploys happen on tuesday mornings.", "The database password rotates every month.",
             "Lunch is served at noon."]
    with ScriptedLLM() as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_embedder="openai", long_term_embedder_base_url=llm.base_url,
                                   long_term_embedder_dims=llm.dims, long_term_preload=False)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "p", "TIERED", config())
            await service.tiered.add_items(T, "p", [Msg.create(MsgRole.USER, f) for f in facts], [0.9, 0.9, 0.9])
            request = ProjectionRequest("when does the database password rotate", 2000, "ANALYTICAL")
            first = await service.tiered.project(T, "p", request)
            lines = first.messages[0].text_content.splitlines()
            assert lines[0] == "## Relevant facts" and lines[1] == "- " + facts[1]
            # The instruction is embedded as a query, the facts as stored texts.
            query, embedded = [r.body["input"] for r in llm.requests if r.path.endswith("/embeddings")][-2:]
            assert query == [request.instruction] and len(embedded) == 3
            # With room to embed one fact, the lexically best is embedded and leads.
            monkeypatch.setattr(projection, "MAX_EMBEDDED_FACTS", 1)
            second = await service.tiered.project(T, "p", request)
            assert second.messages[0].text_content.splitlines()[1] == "- " + facts[1]
            query, embedded = [r.body["input"] for r in llm.requests if r.path.endswith("/embeddings")][-2:]
            assert query == [request.instruction] and embedded == [facts[1]]


async def test_projection_finds_a_fact_in_the_other_language_with_the_default_embedder(tmp_path: Path) -> None:
    from agentscope_memory.message import Msg, MsgRole
    from agentscope_memory.short_term.tiered.projection import ProjectionRequest

    # The instruction is embedded as a query: scored as a stored text against stored texts, a
    # Chinese instruction found only Chinese facts.
    facts = ["Deploys happen on tuesday mornings.", "The database password rotates every month.", "午饭在中午十二点供应。"]
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_preload=False)) as service:
        await service.memories.create_memory(T, "p", "TIERED", config())
        await service.tiered.add_items(T, "p", [Msg.create(MsgRole.USER, f) for f in facts], [0.9, 0.9, 0.9])
        projected = await service.tiered.project(T, "p", ProjectionRequest("数据库密码多久更换一次？", 2000, "ANALYTICAL"))
        lines = projected.messages[0].text_content.splitlines()
        assert lines[0] == "## Relevant facts" and lines[1] == "- " + facts[1]


async def test_llm_importance_scores_with_the_llm_and_falls_back(tmp_path: Path) -> None:
    from agentscope_memory.message import Msg, MsgRole

    reply = ScriptedReply.json({"importance_score": 0.9, "extracted_fact": "", "domain": "general_chat"})
    with ScriptedLLM(default=ScriptedReply.text("S")) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "on", "TIERED", config(score_importance=True, llm_importance=True))
            await service.memories.create_memory(T, "off", "TIERED", config(score_importance=True))
            llm.push(reply)
            first = Msg.create(MsgRole.USER, "the weather is fine")
            await service.tiered.add_items(T, "on", [first], request_id="r1")
            llm.push(ScriptedReply.error(500))
            await service.tiered.add_items(T, "on", [Msg.create(MsgRole.USER, "the weather is fine again")])
            _, tiers = await service.tiered.tiers(T, "on")
            assert [(i.importance, i.method) for i in tiers.l1] == [(0.9, "llm"), (tiers.l1[1].importance, "heuristic")]
            assert [i.method for i in tiers.l2] == ["llm"]
            # A retry is recognised although the LLM would now score differently.
            llm.push(ScriptedReply.json({"importance_score": 0.1, "extracted_fact": "", "domain": "general_chat"}))
            assert (await service.tiered.add_items(T, "on", [first], request_id="r1")).replayed
            calls = len(llm.chat_requests)
            await service.tiered.add_items(T, "off", [Msg.create(MsgRole.USER, "the weather is fine")])
            _, tiers = await service.tiered.tiers(T, "off")
            assert tiers.l1[0].method == "heuristic" and len(llm.chat_requests) == calls


async def test_projection_and_query_touch_only_the_long_term_memories_they_show(tmp_path: Path) -> None:
    # Recall keeps a memory from decaying and being forgotten: a memory the budget or the limit
    # left out was not recalled, so its last access and access count stay as they were.
    from agentscope_memory.long_term.engine import Scope
    from agentscope_memory.message import Msg, MsgRole
    from agentscope_memory.short_term.tiered.projection import ProjectionRequest

    facts = ["数据库密码每个月更换一次。", "The database password rotates every month.",
             "数据库备份每天凌晨两点运行。", "The database backup runs at 2 a.m. every day.",
             "数据库在周日维护。", "The database is maintained on Sundays."]
    settings = ServiceSettings(data_dir=tmp_path, long_term_preload=False)
    async with build_service(settings) as service:
        await service.memories.create_memory(T, "p", "TIERED", config())
        stored = await service.long_term.record(T, Scope(agent_name="p"), [Msg.create(MsgRole.USER, f) for f in facts])
        assert len(stored) == len(facts)
        projected = await service.tiered.project(T, "p", ProjectionRequest("数据库密码多久更换一次？", 100, "ANALYTICAL"))
        shown = [line[2:] for m in projected.messages if m.metadata.get("tiered_section") == "facts"
                 for line in m.text_content.splitlines()[1:]]
        assert 1 <= len(shown) < len(facts)
        hits = await service.tiered.query(T, "p", "database backup", tiers=[4], limit=1)
        assert len(hits) == 1 and hits[0].tier == 4
    # Reopened: the touches, made in the background, have all landed.
    async with build_service(settings) as service:
        recalled = set(shown) | {hits[0].text}
        for before in stored:
            after = await service.long_term.get(T, before.id)
            if before.text in recalled:
                assert after.access_count == 1 and after.last_accessed_at > before.last_accessed_at, before.text
            else:
                assert (after.access_count, after.last_accessed_at) == (0, before.last_accessed_at), before.text


async def test_llm_importance_keeps_at_most_four_calls_in_flight(tmp_path: Path) -> None:
    # A batch of 20 unscored items fired 20 requests at the LLM at once (500 for 500 items).
    import asyncio
    import threading

    from agentscope_memory.short_term.tiered.service import LLM_SCORING_CONCURRENCY

    hold = threading.Event()
    reply = ScriptedReply.json({"importance_score": 0.9, "extracted_fact": "", "domain": "general_chat"})
    with ScriptedLLM(default=reply, hold=hold) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "批量", "TIERED", config(score_importance=True, llm_importance=True))
            batch = [Msg.create(MsgRole.USER, f"第{i}条：部署窗口改到周{i % 7 + 1}上午。") for i in range(20)]
            adding = asyncio.create_task(service.tiered.add_items(T, "批量", batch))
            while len(llm.chat_requests) < LLM_SCORING_CONCURRENCY:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.5)  # time for any further request to arrive while these are held
            assert LLM_SCORING_CONCURRENCY == 4 and len(llm.chat_requests) == 4
            hold.set()
            await adding
            assert len(llm.chat_requests) == 20
            _, tiers = await service.tiered.tiers(T, "批量")
            assert [(i.importance, i.method) for i in tiers.l1] == [(0.9, "llm")] * 20


async def test_llm_importance_stops_calling_a_failing_llm_for_the_rest_of_the_batch(tmp_path: Path) -> None:
    # Each item waited for its own failed call: with the LLM down, a batch of 500 took 500 timeouts.
    with ScriptedLLM(default=ScriptedReply.error(503)) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "坏", "TIERED", config(score_importance=True, llm_importance=True))
            batch = [Msg.create(MsgRole.USER, f"记住第{i}件事：密码每月更换。") for i in range(40)]
            await service.tiered.add_items(T, "坏", batch)
            assert 1 <= len(llm.chat_requests) <= 4
            _, tiers = await service.tiered.tiers(T, "坏")
            assert len(tiers.l1) == 40 and {i.method for i in tiers.l1} == {"heuristic"}


async def test_an_aborted_pass_records_the_long_term_memories_it_wrote(tmp_path: Path) -> None:
    # The pass wrote L3's oldest summary to long-term memory, then found the tiers changed and
    # aborted: the summary stayed in long-term memory with no event naming it.
    import asyncio
    import threading

    from agentscope_memory.long_term.engine import Scope

    hold = threading.Event()
    hold.set()
    with ScriptedLLM(hold=hold) as llm:
        llm.push(*(ScriptedReply.text(f"summary {n}") for n in (1, 2, 3, 4)))
        settings = ServiceSettings(data_dir=tmp_path, long_term_embedder="openai", long_term_embedder_base_url=llm.base_url,
                                   long_term_embedder_dims=llm.dims, long_term_preload=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            # Summaries of 7 tokens: the third reaches 90% of 20 and sends the oldest to long-term memory.
            await service.memories.create_memory(T, "中止", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS,
                                                                             l3_budget=20))
            for i in range(3):
                await service.tiered.add_items(T, "中止", [msg(i)])
            assert [s.text for s in (await service.tiered.tiers(T, "中止"))[1].l3] == ["summary 1", "summary 2"]
            hold.clear()
            adding = asyncio.create_task(service.tiered.add_items(T, "中止", [msg(3)]))  # summarises m2: held
            while len(llm.chat_requests) < 3:
                await asyncio.sleep(0.01)
            await service.memories.delete_message(T, "中止", 0)  # m2, the message the pass is moving
            hold.set()
            await adding  # the add stands; its pass aborted
            _, tiers = await service.tiered.tiers(T, "中止")
            assert [s.text for s in tiers.l3] == ["summary 1", "summary 2"]
            [stored] = await service.long_term.list(T, Scope(agent_name="中止"))
            assert stored.text == "summary 1"
            events = [e for _, e in await service.tiered.events(T, "中止")]
            assert [(e.kind, e.item_seqs, e.detail["long_term_ids"]) for e in events if "long_term_ids" in e.detail] == [
                ("vectorize_aborted", [tiers.l3[0].seq], [stored.id])]
            assert (await service.tiered.status(T, "中止")).l4_vectors == 0
            # The next pass moves the summary; long-term memory holds it once.
            await service.tiered.add_items(T, "中止", [msg(4)])
            _, tiers = await service.tiered.tiers(T, "中止")
            assert "summary 1" not in [s.text for s in tiers.l3]
            assert [i.text for i in await service.long_term.list(T, Scope(agent_name="中止"))].count("summary 1") == 1
            assert [e.kind for _, e in await service.tiered.events(T, "中止")][-1] == "vectorize_l3"


async def test_a_small_add_is_not_queued_behind_another_memorys_large_batch(tmp_path: Path) -> None:
    # Every call of a batch of 60 waited in the service's queue at once: another tenant's
    # one-message add, arriving just after, waited for all 60 (about 15 LLM latencies).
    import asyncio
    import time

    reply = ScriptedReply.json({"importance_score": 0.9, "extracted_fact": "", "domain": "general_chat"}).after(0.3)
    with ScriptedLLM(default=reply) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            for tenant in ("租户甲", "租户乙"):
                await service.memories.create_memory(tenant, "记忆", "TIERED",
                                                     config(score_importance=True, llm_importance=True))
            batch = [Msg.create(MsgRole.USER, f"第{i}条：部署窗口改到周{i % 7 + 1}上午。") for i in range(60)]
            large = asyncio.create_task(service.tiered.add_items("租户甲", "记忆", batch))
            while not llm.chat_requests:
                await asyncio.sleep(0.01)
            started = time.monotonic()
            await service.tiered.add_items("租户乙", "记忆", [Msg.create(MsgRole.USER, "我对花生过敏。")])
            waited = time.monotonic() - started
            assert not large.done()
            # Its own call, behind at most one round of the large batch's (0.3 s each, 4 at a time).
            assert waited < 2.0, waited
            _, tiers = await service.tiered.tiers("租户乙", "记忆")
            assert [(i.importance, i.method) for i in tiers.l1] == [(0.9, "llm")]
            await large
            _, tiers = await service.tiered.tiers("租户甲", "记忆")
            assert [(i.importance, i.method) for i in tiers.l1] == [(0.9, "llm")] * 60


async def test_llm_importance_stops_at_its_time_budget_and_the_heuristic_scores_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Four calls at a time, a batch of 1000 with a one-second LLM took 250 s: past every caller's
    # deadline, so the add never landed. Here: 40 items, 0.3 s a call, a budget of 1 s.
    import time

    from agentscope_memory.short_term.tiered import service as tiered_service

    monkeypatch.setattr(tiered_service, "LLM_SCORING_BUDGET_S", 1.0, raising=False)
    reply = ScriptedReply.json({"importance_score": 0.9, "extracted_fact": "", "domain": "general_chat"}).after(0.3)
    with ScriptedLLM(default=reply) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "慢", "TIERED", config(score_importance=True, llm_importance=True))
            batch = [Msg.create(MsgRole.USER, f"记住第{i}件事：周{i % 7 + 1}开会。") for i in range(40)]
            started = time.monotonic()
            await service.tiered.add_items(T, "慢", batch)
            assert time.monotonic() - started < 2.5
            _, tiers = await service.tiered.tiers(T, "慢")
            methods = [i.method for i in tiers.l1]
            assert len(methods) == 40 and 4 <= methods.count("llm") < 40
            assert set(methods) == {"llm", "heuristic"}
            # What was scored by the LLM kept its score; no call was sent once the budget was spent.
            assert all(i.importance == 0.9 for i in tiers.l1 if i.method == "llm")
            assert len(llm.chat_requests) <= methods.count("llm") + 4


async def test_a_pass_cancelled_after_writing_long_term_memory_names_it_when_it_runs_again(tmp_path: Path) -> None:
    # The pass runs in the add's call: a caller's deadline cancelled it between writing L3's
    # oldest summary to long-term memory and committing. The next pass found the text held
    # already and its vectorize_l3 event named no long-term id: the memory was named nowhere.
    import asyncio

    from agentscope_memory.long_term.engine import Scope

    with ScriptedLLM() as llm:
        llm.push(*(ScriptedReply.text(f"summary {n}") for n in (1, 2, 3, 4, 5)))
        settings = ServiceSettings(data_dir=tmp_path, long_term_embedder="openai", long_term_embedder_base_url=llm.base_url,
                                   long_term_embedder_dims=llm.dims, long_term_preload=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "取消", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS,
                                                                             l3_budget=20))
            for i in range(3):
                await service.tiered.add_items(T, "取消", [msg(i)])
            store = service.tiered.store
            run = store.run

            async def cancelled_at_commit(tenant, work, *args, **kwargs):  # type: ignore[no-untyped-def]
                if getattr(work, "__name__", "") == "commit":
                    raise asyncio.CancelledError()
                return await run(tenant, work, *args, **kwargs)

            store.run = cancelled_at_commit  # type: ignore[method-assign]
            with pytest.raises(asyncio.CancelledError):
                await service.tiered.add_items(T, "取消", [msg(3)])  # sends summary 1 to L4
            store.run = run  # type: ignore[method-assign]
            [stored] = await service.long_term.list(T, Scope(agent_name="取消"))
            assert stored.text == "summary 1"
            assert "summary 1" in [s.text for s in (await service.tiered.tiers(T, "取消"))[1].l3]
            await service.tiered.add_items(T, "取消", [msg(4)])
            _, tiers = await service.tiered.tiers(T, "取消")
            assert "summary 1" not in [s.text for s in tiers.l3]
            moved = [e for _, e in await service.tiered.events(T, "取消") if e.kind == "vectorize_l3"]
            assert [e.detail["long_term_ids"] for e in moved] == [[stored.id]]
            assert [i.text for i in await service.long_term.list(T, Scope(agent_name="取消"))].count("summary 1") == 1


async def test_a_caller_with_less_time_than_the_margin_gets_heuristic_scores_without_asking_the_llm(
        tmp_path: Path) -> None:
    # Whatever the LLM answered would come after the caller stopped waiting: it is not asked.
    from agentscope_memory.long_term.importance import HeuristicScorer
    from agentscope_memory.short_term.tiered.service import DEADLINE_MARGIN_S

    reply = ScriptedReply.json({"importance_score": 0.77, "extracted_fact": "", "domain": "general_chat"})
    with ScriptedLLM(default=reply) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "急", "TIERED", config(score_importance=True, llm_importance=True))
            texts = ["请记住：我对花生过敏。", "I moved to Shanghai last year."]
            await service.tiered.add_items(T, "急", [Msg.create(MsgRole.USER, t) for t in texts],
                                           time_left_s=DEADLINE_MARGIN_S / 2)
            assert llm.chat_requests == []
            _, tiers = await service.tiered.tiers(T, "急")
            assert [(i.importance, i.method) for i in tiers.l1] == [
                (HeuristicScorer().assess_now([t]).importance_score, "heuristic") for t in texts]
            # With time enough, the LLM scores.
            await service.tiered.add_items(T, "急", [Msg.create(MsgRole.USER, "下周二部署。")], time_left_s=5.0)
            _, tiers = await service.tiered.tiers(T, "急")
            assert (tiers.l1[-1].importance, tiers.l1[-1].method) == (0.77, "llm")


async def test_a_caller_with_less_time_than_the_margin_gets_an_offline_summary_without_asking_the_llm(
        tmp_path: Path) -> None:
    # The pass's summary, like LLM importance, ends the margin before the caller's deadline:
    # the LLM is not asked, the summary is the one an LLM failure leaves, marked as such.
    from agentscope_memory.short_term.tiered.service import DEADLINE_MARGIN_S

    with ScriptedLLM(default=ScriptedReply.text("LLM SUMMARY")) as llm:
        settings = ServiceSettings(data_dir=tmp_path, long_term_enabled=False, llm_base_url=llm.base_url,
                                   llm_max_retries=0)
        async with build_service(settings) as service:
            await service.memories.create_memory(T, "急", "TIERED", config(l1_compact_trigger=0, l1_budget=ITEM_TOKENS))
            await service.tiered.add_items(T, "急", [msg(0)])
            await service.tiered.add_items(T, "急", [msg(1)], time_left_s=DEADLINE_MARGIN_S / 2)  # evicts m0
            assert llm.chat_requests == []
            _, tiers = await service.tiered.tiers(T, "急")
            assert [(s.text, s.method, s.origins) for s in tiers.l3] == [
                ("[offline summary] user: " + text(0), "extractive-fallback", [1])]
            # With time enough, the LLM summarises.
            await service.tiered.add_items(T, "急", [msg(2)], time_left_s=5.0)
            _, tiers = await service.tiered.tiers(T, "急")
            assert [(s.text, s.method) for s in tiers.l3][1:] == [("LLM SUMMARY", "llm")]
            assert len(llm.chat_requests) == 1
