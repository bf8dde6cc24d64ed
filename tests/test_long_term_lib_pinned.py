"""Pinned long-term memories over the real HybridEngine (sqlite and PostgreSQL + pgvector), the
real MiniLM embedder and a controllable clock: forgetting never removes one, its time decay in
ranking stays 1, consolidation and reflection never retire it, its pin and unpin are in its
history, and a database written before the `pinned` column opens with its memories intact."""

from __future__ import annotations

import sqlite3
import time
import uuid

import pytest

from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.forgetting import Forgetter, ForgettingSettings, retention
from agentscope_memory.lifecycle.reflection import Reflector
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermRow

DAY = 86400.0
USER = Scope(agent_name="助手", user_id="小明")


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request) -> str:
    return request.param


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_engine(store_kind, tmp_path, request, embedder, clock):
    dsn = request.getfixturevalue("postgres_dsn") if store_kind == "postgres" else None
    made: list[HybridEngine] = []

    async def make() -> HybridEngine:
        store = open_store(store_kind, tmp_path, postgres_dsn=dsn)
        engine = HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                              settings=EngineSettings(scoring=False), in_database=store_kind == "postgres",
                              clock=clock)
        await engine.open()
        made.append(engine)
        return engine

    yield make


@pytest.fixture
async def engine(make_engine):
    made = await make_engine()
    yield made
    await made.close()
    await made._store.close()


def fact(scope: Scope, text: str, importance: float, *, at: float, pinned: bool = False) -> LongTermRow:
    return LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                       user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                       memory_type="fact", importance=importance, importance_method="user", created=at, updated=at,
                       last_accessed=at, content_hash=content_hash(text), pinned=pinned)


async def test_a_pinned_memory_survives_forgetting_that_removes_an_equal_unpinned_one(engine, clock) -> None:
    # Two memories alike in everything (importance 1.0, never recalled) but the pin: 40 days on,
    # the unpinned one has faded below the threshold and is forgotten, the pinned one stays.
    old = clock.now - 40 * DAY
    pinned, plain = await engine.insert("t", USER, [
        fact(USER, "用户对花生严重过敏。", 1.0, at=old, pinned=True),
        fact(USER, "用户对青霉素严重过敏。", 1.0, at=old),
    ])
    assert retention(plain, clock.now, ForgettingSettings()) < 0.1
    assert retention(pinned, clock.now, ForgettingSettings()) == 1.0
    forgetter = Forgetter(engine)
    dry = await forgetter.forget("t", USER, dry_run=True, threshold=1.0)
    assert [f.item.id for f in dry.forgotten] == [plain.memory_id]
    done = await forgetter.forget("t", USER)
    assert [f.item.id for f in done.forgotten] == [plain.memory_id]
    left = await engine.list("t", USER, 10)
    assert [(i.id, i.pinned) for i in left] == [(pinned.memory_id, True)]
    # Years later, through the scheduled job's path (every scope of the tenant), it is still there.
    clock.now += 3 * 365 * DAY
    await forgetter._run_job(type("J", (), {"tenant": "t", "job_id": "job-1"})())  # type: ignore[arg-type]
    assert [i.id for i in await engine.list("t", USER, 10)] == [pinned.memory_id]
    assert "FORGET" not in [h.event for h in await engine.history("t", pinned.memory_id)]


async def test_a_pinned_memory_keeps_its_score_while_an_unpinned_one_decays(engine, clock) -> None:
    pinned, plain = await engine.insert("t", USER, [
        fact(USER, "用户每天早上七点喝一杯黑咖啡。", 0.5, at=clock.now, pinned=True),
        fact(USER, "用户每天晚上十点喝一杯热牛奶。", 0.5, at=clock.now),
    ])

    async def scores() -> dict[str, tuple[float, float]]:
        # The seed formula counts decay for every candidate (the shipped one scales it by the
        # dense leg, 0 for the less similar of two).
        options = engine.rank_defaults.with_overrides(ranking="seed")
        items, _ = await engine.search_ranked("t", USER, "用户每天喝什么", options, touch=False)
        return {i.id: (i.scores.final, i.scores.decay) for i in items}

    before = await scores()
    clock.now += 30 * DAY  # a month without recall
    after = await scores()
    assert after[pinned.memory_id] == pytest.approx(before[pinned.memory_id])
    assert after[pinned.memory_id][1] == 1.0
    assert after[plain.memory_id][1] < 0.01 < before[plain.memory_id][1]
    assert after[plain.memory_id][0] < before[plain.memory_id][0]
    # Unpinned, it decays from its last access like any other memory (the update was one).
    await engine.update("t", pinned.memory_id, pinned=False)
    clock.now += 30 * DAY
    assert (await scores())[pinned.memory_id][1] < 0.01


async def test_pin_and_unpin_are_update_events_in_the_history(engine, clock) -> None:
    [item] = await engine.record("t", USER, [Msg.create(MsgRole.USER, "请永远记住：我不吃香菜。")], pinned=True)
    assert item.pinned and (await engine.get("t", item.id)).pinned
    add = (await engine.history("t", item.id))[0]
    assert (add.event, add.detail) == ("ADD", {"pinned": True})
    unpinned = await engine.update("t", item.id, pinned=False)
    assert not unpinned.pinned and not (await engine.get("t", item.id)).pinned
    repinned = await engine.update("t", item.id, pinned=True, importance=0.9)
    assert repinned.pinned and repinned.importance == pytest.approx(0.9)
    updates = [h for h in await engine.history("t", item.id) if h.event == "UPDATE"]
    assert [h.detail["pinned"] for h in updates] == [{"old": True, "new": False}, {"old": False, "new": True}]
    assert all(h.old_text == h.new_text == "请永远记住：我不吃香菜。" for h in updates)
    # A text already held is not recorded again: it keeps its own pin.
    assert await engine.record("t", USER, [Msg.create(MsgRole.USER, "请永远记住：我不吃香菜。")]) == []
    assert (await engine.get("t", item.id)).pinned


async def test_recording_a_held_text_pinned_pins_the_memory_holding_it(engine, clock) -> None:
    # "Remember this for ever" about what the scope already knows: that memory is pinned (an
    # UPDATE as an update's pin is) and reported with what the call adds; it is not stored twice.
    passport = "请永远记住：我的护照号码是E12345678。"
    [held] = await engine.record("t", USER, [Msg.create(MsgRole.USER, passport)])
    assert not held.pinned
    clock.now += 60
    items = await engine.record("t", USER, [Msg.create(MsgRole.USER, passport),
                                            Msg.create(MsgRole.USER, "我的血型是O型。")], pinned=True)
    assert [(i.text, i.pinned) for i in items] == [(passport, True), ("我的血型是O型。", True)]
    assert items[0].id == held.id
    assert (await engine.get("t", held.id)).pinned
    history = await engine.history("t", held.id)
    assert [h.event for h in history] == ["ADD", "UPDATE"]
    assert history[1].detail == {"pinned": {"old": False, "new": True}}
    assert history[1].old_text == history[1].new_text == passport
    assert len(await engine.list("t", USER, 10)) == 2
    # Pinned already: nothing changes, nothing is reported, the history stays as it is; a Record
    # that does not pin never unpins.
    assert await engine.record("t", USER, [Msg.create(MsgRole.USER, passport)], pinned=True) == []
    assert await engine.record("t", USER, [Msg.create(MsgRole.USER, passport)]) == []
    assert (await engine.get("t", held.id)).pinned
    assert len(await engine.history("t", held.id)) == 2
    # Pinned, forgetting never removes it, however long it goes unrecalled.
    clock.now += 400 * DAY
    assert (await Forgetter(engine, clock=clock).forget("t", USER)).forgotten == []
    assert {i.id for i in await engine.list("t", USER, 10)} >= {held.id}


PEANUTS = ["用户对花生过敏。", "用户有花生过敏症。", "花生会让用户过敏。", "因为过敏，用户必须避免花生。"]


async def test_consolidation_never_merges_a_pinned_fact_away(engine, clock) -> None:
    # Five paraphrases, one pinned: the other four merge, the pinned one stays as it is.
    scope = Scope("agent", "u")
    rows = await engine.insert("t", scope, [fact(scope, t, 0.8, at=clock.now) for t in PEANUTS]
                               + [fact(scope, "用户对花生过敏，这点必须记住。", 0.8, at=clock.now, pinned=True)])
    pinned = rows[-1].memory_id
    report = await Consolidator(engine, settings=ConsolidationSettings(threshold=2, similarity=0.6)
                                ).consolidate_scope("t", scope)
    assert report.merged >= 1
    assert all(pinned not in m.original_ids for m in report.merges)
    (kept,) = await engine.rows("t", [pinned])
    assert not kept.deleted and kept.pinned and kept.text == "用户对花生过敏，这点必须记住。"
    assert any(r.deleted for r in await engine.rows("t", [r.memory_id for r in rows[:-1]]))
    # Without embeddings the trim keeps pinned facts beyond the threshold.
    trim = await Consolidator(engine, settings=ConsolidationSettings(threshold=0, use_embeddings=False)
                              ).consolidate_scope("t", scope)
    assert trim.trimmed >= 1
    live = [i for i in await engine.list("t", scope, 100)]
    assert [i.id for i in live] == [pinned]


async def test_a_scope_of_many_pinned_facts_starts_no_consolidation(engine, clock) -> None:
    # 151 pinned facts are over the default threshold (150) but nothing consolidation may change;
    # the scope's 4 unpinned paraphrases would merge but are not over it. Neither the request nor
    # the scheduled trigger starts a run: no job queued, no run observed (metrics), nothing merged.
    from agentscope_memory.jobs import Job, JobRunner
    from agentscope_memory.lifecycle.consolidation import CONSOLIDATE_JOB
    from agentscope_memory.lifecycle.reflect_service import CONSOLIDATE_TENANT_JOB, queue_consolidations

    scope = Scope("助手", "钉满了")
    assert ConsolidationSettings().threshold == 150
    pinned = [fact(scope, f"请永远记住第{i}条家规：编号{i}的规矩不能改。", 0.9, at=clock.now, pinned=True)
              for i in range(151)]
    await engine.insert("t", scope, pinned + [fact(scope, t, 0.8, at=clock.now) for t in PEANUTS])
    runner = JobRunner(engine._store, clock=clock)
    consolidator = Consolidator(engine, clock=clock)
    consolidator.attach(runner)
    observed: list[tuple[str, int, float]] = []
    consolidator.observers.append(lambda *run: observed.append(run))
    report = await consolidator.consolidate_scope("t", scope)
    assert not report.ran and report.merged == report.trimmed == 0
    assert "4 unpinned facts" in report.reason and "151 pinned" in report.reason
    assert (report.facts_before, report.facts_after) == (155, 155)
    tenant_job = Job("j", "t", CONSOLIDATE_TENANT_JOB, {}, 1)
    assert await queue_consolidations(engine, runner, consolidator, tenant_job) == 0
    assert await engine._store.run("t", lambda tx: tx.job_list(None, CONSOLIDATE_JOB), write=False) == []
    assert observed == []
    assert await engine.count("t", scope) == 155
    # Unpinned facts over the threshold: the scheduler queues the scope and a run starts.
    await engine.insert("t", scope, [fact(scope, f"用户第{i}次提到的琐事：编号{i}。", 0.3, at=clock.now)
                                     for i in range(147)])
    assert await queue_consolidations(engine, runner, consolidator, tenant_job) == 1
    dry = await consolidator.consolidate_scope("t", scope, dry_run=True)
    assert dry.ran and dry.facts_before == 302


async def test_consolidation_over_unpinned_facts_is_the_same_beside_pinned_ones(engine, clock) -> None:
    # Enough unpinned facts: the merges are those of the same facts in a scope without pins, and
    # a trim keeps `threshold` unpinned facts whatever the number of pinned ones beside them.
    alone, beside = Scope("助手", "无钉"), Scope("助手", "有钉")
    extra = ["The user goes hiking every weekend.", "The user swims twice a week.", "The user's cat is called Mochi."]
    for scope in (alone, beside):
        await engine.insert("t", scope, [fact(scope, t, 0.8 - i / 100, at=clock.now)
                                         for i, t in enumerate(PEANUTS + extra)])
    pins = await engine.insert("t", beside, [fact(beside, f"请永远记住第{i}条家规。", 0.9, at=clock.now, pinned=True)
                                             for i in range(5)])

    async def merges(scope: Scope) -> list[tuple[str, list[str]]]:
        report = await Consolidator(engine, settings=ConsolidationSettings(threshold=3, similarity=0.6),
                                    clock=clock).consolidate_scope("t", scope)
        assert report.ran
        return [(m.text, sorted(r.text for r in await engine.rows("t", m.original_ids))) for m in report.merges]

    merged = await merges(alone)
    assert merged and all(set(originals) <= set(PEANUTS) for _, originals in merged)
    assert await merges(beside) == merged

    async def unpinned_left(scope: Scope) -> list[str]:
        report = await Consolidator(engine, settings=ConsolidationSettings(threshold=2, use_embeddings=False),
                                    clock=clock).consolidate_scope("t", scope)
        assert report.ran
        return sorted(i.text for i in await engine.list("t", scope, 100) if not i.pinned)

    kept = await unpinned_left(alone)
    assert len(kept) == 2
    assert await unpinned_left(beside) == kept
    assert {i.id for i in await engine.list("t", beside, 100) if i.pinned} == {r.memory_id for r in pins}


async def test_a_fact_pinned_after_the_job_read_it_is_not_retired(engine, clock) -> None:
    # The job read the facts; the user pins one before it writes: its write is refused whole.
    scope = Scope("agent", "u2")
    rows = await engine.insert("t", scope, [fact(scope, t, 0.8, at=clock.now) for t in PEANUTS])
    await engine.update("t", rows[0].memory_id, pinned=True)
    current = await engine.rows("t", [r.memory_id for r in rows])
    merged = fact(scope, "用户对花生过敏，必须避免花生。", 0.8, at=clock.now)
    assert await engine.replace("t", scope, [merged], [r.memory_id for r in rows], event="CONSOLIDATE",
                                detail={}, read_as={r.memory_id: r.content_hash for r in current}) is None
    assert all(not r.deleted for r in await engine.rows("t", [r.memory_id for r in rows]))


async def test_reflection_leaves_pinned_facts_in_recall(engine, clock) -> None:
    scope = Scope("agent", "u3")
    facts = [("用户住在上海，在阿里巴巴工作。", 0.9, False), ("用户对花生过敏。", 0.95, True),
             ("用户计划四月去京都旅行。", 0.8, False), ("用户的狗叫饼干。", 0.7, False),
             ("用户喜欢在编辑器里用深色模式。", 0.8, False), ("用户每天跑步五公里。", 0.9, False)]
    rows = await engine.insert("t", scope, [fact(scope, t, i, at=clock.now, pinned=p) for t, i, p in facts])
    pinned = rows[1].memory_id
    result = await Reflector(engine, clock=clock).reflect("t", scope)
    assert result.reflected and pinned not in result.fact_ids and len(result.fact_ids) == 5
    (kept,) = await engine.rows("t", [pinned])
    assert not kept.deleted and kept.pinned
    found, _ = await engine.search_ranked("t", scope, "花生过敏", touch=False)
    assert pinned in [i.id for i in found]


async def test_a_database_of_the_schema_before_pinning_opens_with_its_memories(make_engine, store_kind, request,
                                                                               tmp_path, clock) -> None:
    engine = await make_engine()
    (stored,) = await engine.insert("t", USER, [fact(USER, "用户的生日是三月五日。", 0.7, at=clock.now)])
    await engine.close()
    await engine._store.close()
    # The table as a release before pinning wrote it: the same columns without `pinned`.
    if store_kind == "sqlite":
        with sqlite3.connect(tmp_path / "agentscope-memory.sqlite3") as conn:
            conn.execute("ALTER TABLE ltm DROP COLUMN pinned")
            assert "pinned" not in {r[1] for r in conn.execute("PRAGMA table_info(ltm)")}
    else:
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_dsn"), autocommit=True) as conn:
            conn.execute("ALTER TABLE asm_ltm DROP COLUMN pinned")
    reopened = await make_engine()
    try:
        got = await reopened.get("t", stored.memory_id)
        assert (got.text, got.pinned, got.importance) == ("用户的生日是三月五日。", False, pytest.approx(0.7))
        assert (await reopened.update("t", stored.memory_id, pinned=True)).pinned
        assert (await reopened.get("t", stored.memory_id)).pinned
        found, _ = await reopened.search_ranked("t", USER, "生日", touch=False)
        assert [i.id for i in found] == [stored.memory_id]
    finally:
        await reopened.close()
        await reopened._store.close()
