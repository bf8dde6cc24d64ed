"""Reflection, consolidation with its fidelity check, keywords and compressed recall over the
real HybridEngine (sqlite and PostgreSQL + pgvector), the real MiniLM embedder, the scripted
OpenAI-compatible LLM and a controllable clock; English and Chinese facts."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.jobs import JobRunner
from agentscope_memory.lifecycle.compressed import CompressedSearch
from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator, clusters
from agentscope_memory.lifecycle.fidelity import check
from agentscope_memory.lifecycle.keywords import keywords
from agentscope_memory.lifecycle.reflection import ReflectionSettings, Reflector
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermRow
from tests.scripted_llm import ScriptedLLM, ScriptedReply

EN_FACTS = [("The user lives in Lisbon and works at Acme Corp.", 0.9),
            ("The user is allergic to peanuts.", 0.95),
            ("The user plans a trip to Kyoto in April.", 0.8),
            ("The user's dog is called Biscuit.", 0.7),
            ("The user prefers dark mode in every editor.", 0.8)]
ZH_FACTS = [("用户住在上海，在阿里巴巴工作。", 0.9), ("用户对花生过敏。", 0.95), ("用户计划四月去京都旅行。", 0.8),
            ("用户的狗叫饼干。", 0.7), ("用户喜欢在编辑器里用深色模式。", 0.8)]


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
async def engine(store_kind, tmp_path, request, embedder):
    dsn = request.getfixturevalue("postgres_dsn") if store_kind == "postgres" else None
    store = open_store(store_kind, tmp_path, postgres_dsn=dsn)
    engine = HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                          settings=EngineSettings(scoring=False), in_database=store_kind == "postgres")
    await engine.open()
    yield engine
    await engine.close()
    await store.close()


def fact_row(scope: Scope, text: str, importance: float, when: float | None = None) -> LongTermRow:
    now = when or time.time()
    return LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                       user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                       memory_type="fact", importance=importance, importance_method="user", created=now, updated=now,
                       last_accessed=now, content_hash=content_hash(text))


async def add_facts(engine: HybridEngine, tenant: str, scope: Scope, facts: list[tuple[str, float]]) -> list[str]:
    rows = await engine.insert(tenant, scope, [fact_row(scope, t, i) for t, i in facts])
    return [r.memory_id for r in rows]


@pytest.mark.parametrize("facts", [EN_FACTS, ZH_FACTS], ids=["en", "zh"])
async def test_reflection_summarises_facts_and_takes_them_out_of_recall(engine, facts) -> None:
    scope = Scope("agent", "用户-1")
    ids = await add_facts(engine, "t", scope, facts)
    reflector = Reflector(engine)
    result = await reflector.reflect("t", scope)
    assert result.reflected and sorted(result.fact_ids) == sorted(ids)
    reflection = result.reflection
    assert reflection is not None and reflection.memory_type == "reflection" and reflection.importance == 0.9
    assert reflection.metadata["summary_method"] == "extractive" and reflection.metadata["offline"] is True
    assert sorted(reflection.source["memory_ids"]) == sorted(ids)
    # The facts are out of recall, the reflection is in it; the facts stay stored and linked.
    found, _ = await engine.search_ranked("t", scope, facts[1][0])
    assert [i.id for i in found] == [reflection.id]
    stored = {r.memory_id: r for r in await engine.rows("t", ids)}
    assert all(r.deleted and r.metadata["retired_into"] == [reflection.id] for r in stored.values())
    entries = await engine._store.run("t", lambda tx: tx.ltm_history(ids[0]), write=False)
    assert entries[-1].event == "REFLECT" and entries[-1].detail["into"] == [reflection.id]
    assert entries[-1].old_text == facts[0][0]


async def test_reflection_waits_for_threshold_count_and_cooldown(engine) -> None:
    scope = Scope("agent", "u")
    clock = Clock()
    reflector = Reflector(engine, clock=clock)
    await add_facts(engine, "t", scope, [("The user likes green tea.", 0.9)])
    assert (await reflector.reflect("t", scope, importance_threshold=0.1)).reason == "too few facts"
    await add_facts(engine, "t", scope, [("The user owns a bicycle.", 0.9)])
    assert (await reflector.reflect("t", scope)).reason == "importance below threshold"
    assert (await reflector.reflect("t", scope, importance_threshold=1.5)).reflected
    await add_facts(engine, "t", scope, [("The user speaks Portuguese.", 0.9), ("The user runs on Sundays.", 0.9)])
    clock.now += 1800
    assert (await reflector.reflect("t", scope, importance_threshold=1.0)).reason == "cooldown"
    assert (await reflector.reflect("t", scope, importance_threshold=1.0, cooldown_s=0)).reflected
    clock.now += 3600
    assert (await reflector.reflect("t", scope, importance_threshold=0.0)).reason == "too few facts"


async def test_reflection_runs_as_a_background_job_after_facts_are_written(engine) -> None:
    jobs = JobRunner(engine._store)
    reflector = Reflector(engine, settings=ReflectionSettings(importance_threshold=1.5))
    engine._jobs = jobs  # the engine queues fact checks through the runner (attach_jobs also registers scoring)
    reflector.attach(jobs)
    scope = Scope("agent", "u")
    await add_facts(engine, "t", scope, EN_FACTS[:2])
    assert await jobs.run_due() == 1
    reflections = await engine._store.run("t", lambda tx: tx.ltm_typed_rows(scope_key(scope), "reflection", 10), write=False)
    assert len(reflections) == 1
    # Another tenant's scope of the same name is untouched.
    other = await engine._store.run("t2", lambda tx: tx.ltm_typed_rows(scope_key(scope), "reflection", 10), write=False)
    assert other == []


async def test_reflection_with_the_scripted_llm(engine) -> None:
    scope = Scope("agent", "u")
    await add_facts(engine, "t", scope, EN_FACTS)
    faithful = ("The user, based in Lisbon at Acme Corp, is health-aware (peanut allergy), plans Kyoto in April, "
                "has a dog called Biscuit and likes dark mode.")
    with ScriptedLLM(default=ScriptedReply.text(faithful)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        result = await Reflector(engine, client).reflect("t", scope)
        await client.close()
        assert "Lisbon" in llm.requests[0].body["messages"][1]["content"]
    assert result.reflection is not None and result.reflection.text == faithful
    assert result.reflection.metadata["summary_method"] == "llm" and result.reflection.metadata["offline"] is False
    assert result.reflection.metadata["fidelity_passed"] is True


async def test_an_llm_reflection_losing_the_facts_keywords_falls_back_to_the_offline_one(engine) -> None:
    # Five facts, and an answer keeping one of their names: the other four would leave recall unsaid.
    scope = Scope("agent", "u")
    ids = await add_facts(engine, "t", scope, EN_FACTS)
    with ScriptedLLM(default=ScriptedReply.text("The user, based in Lisbon, is organised and health-aware.")) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        result = await Reflector(engine, client).reflect("t", scope)
        await client.close()
    assert result.reflection is not None and result.method == "extractive"
    assert sorted(result.fact_ids) == sorted(ids) and all(t in result.reflection.text for t, _ in EN_FACTS)


def test_bad_reflection_settings_name_the_field() -> None:
    with pytest.raises(InvalidArgumentError, match="min_facts"):
        ReflectionSettings(min_facts=0).validate()
    with pytest.raises(InvalidArgumentError, match="cooldown_seconds"):
        ReflectionSettings(cooldown_s=-1).validate()
    with pytest.raises(InvalidArgumentError, match="similarity"):
        ConsolidationSettings(similarity=2).validate()


def test_keywords_follow_the_issue() -> None:
    found = keywords("The user met Alice Smith in New York to fix config_loader and agentscope.memory.v1, "
                     "MAX_RETRIES stays 3.")
    assert {"alice smith", "new york", "config_loader", "agentscope.memory.v1", "max_retries"} <= found
    assert "the" not in found and "max" not in found
    assert {"上海", "阿里巴巴工作"} <= keywords("用户住在上海，在阿里巴巴工作。")


def test_fidelity_composite_and_lost_keywords() -> None:
    import numpy as np

    vectors = np.array([[1.0, 0.0], [0.8, 0.6]], dtype=np.float32)
    good = check("Alice lives in Paris", np.array([1.0, 0.0]), ["Alice lives in Paris", "Alice likes Paris"], vectors)
    assert good.passed and good.keyword_retention == 1.0
    assert good.composite_score == pytest.approx(0.6 * 0.9 + 0.4)
    bad = check("someone lives somewhere", np.array([0.0, 1.0]), ["Alice lives in Paris", "Bob likes Rome"], vectors)
    assert not bad.passed and bad.lost_keywords == ["alice", "bob", "paris", "rome"]


def test_a_merge_that_drops_a_number_fails_however_alike() -> None:
    import numpy as np

    originals = ["The door code is 4711.", "The code of the door is 4711, since May 2023."]
    vectors = np.array([[1.0, 0.0], [0.99, 0.14]], dtype=np.float32)
    kept = check("The door code is 4711 (since May 2023).", np.array([1.0, 0.0]), originals, vectors)
    assert kept.passed and kept.lost_keywords == []
    # Alike enough that the composite passes on similarity alone; the code is gone.
    dropped = check("The user has a door code since May 2023.", np.array([1.0, 0.0]), originals, vectors)
    assert dropped.composite_score > 0.5 and not dropped.passed and dropped.lost_keywords == ["4711"]
    # A number is kept only whole: 4711 is not in 47112 nor 2023年 (with its counter) in 2023-05.
    near = check("门禁密码是47112，从2023-05起。", np.array([1.0, 0.0]), ["门禁密码是4711。", "从2023年起。"], vectors)
    assert not near.passed and {"4711", "2023年"} <= set(near.lost_keywords)


def test_union_find_clusters_are_connected_components() -> None:
    import numpy as np

    v = np.array([[1, 0, 0], [0.9, 0.1, 0], [0.8, 0.3, 0], [0, 1, 0], [0, 0, 1], [0, 0.1, 1]], dtype=np.float32)
    assert clusters(v, 0.95) == [[0, 1, 2], [3], [4, 5]]


PARAPHRASES = {
    "en": ["The user is allergic to peanuts.", "The user has a peanut allergy.",
           "Peanuts give the user an allergic reaction.", "The user must avoid peanuts because of an allergy."],
    "zh": ["用户对花生过敏。", "用户有花生过敏症。", "花生会让用户过敏。", "因为过敏，用户必须避免花生。"],
}


def filler(i: int) -> str:
    topics = ["astronomy", "gardening", "chess openings", "sourdough", "jazz piano", "marathon training",
              "tax forms", "origami", "beekeeping", "sailing knots", "film noir", "pottery glazes"]
    return f"Note {i}: the user asked about {topics[i % len(topics)]} on day {i}."


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_consolidation_merges_a_cluster_and_keeps_the_rest(engine, lang) -> None:
    scope = Scope("agent", "u", "run")
    originals = await add_facts(engine, "t", scope, [(t, 0.8) for t in PARAPHRASES[lang]])
    await add_facts(engine, "t", scope, [(filler(i), 0.5) for i in range(8)])
    consolidator = Consolidator(engine, settings=ConsolidationSettings(threshold=10, similarity=0.75))
    dry = await consolidator.consolidate_scope("t", scope, dry_run=True)
    assert dry.dry_run and dry.merged >= 1 and dry.facts_after == dry.facts_before == 12
    assert all(not r.deleted for r in await engine.rows("t", originals))
    report = await consolidator.consolidate_scope("t", scope)
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.applied and merge.fidelity.passed
    assert report.facts_after == 12 - report.originals_retired + report.merged
    merged = (await engine.rows("t", [merge.memory_id]))[0]
    for key in ("fidelity_embedding_similarity", "fidelity_keyword_retention", "fidelity_composite_score",
                "fidelity_passed", "fidelity_lost_keywords"):
        assert key in merged.metadata
    assert merged.metadata["merge_method"] == "extractive" and sorted(merged.source["memory_ids"]) == sorted(merge.original_ids)
    assert all(r.deleted for r in await engine.rows("t", originals))
    entries = await engine._store.run("t", lambda tx: tx.ltm_history(originals[0]), write=False)
    assert entries[-1].event == "CONSOLIDATE" and entries[-1].detail["into"] == [merge.memory_id]
    # A rerun finds nothing more to merge in that cluster.
    again = await consolidator.consolidate_scope("t", scope, threshold=0)
    assert all(not set(originals) & set(m.original_ids) for m in again.merges)


async def test_failing_fidelity_keeps_the_originals(engine) -> None:
    scope = Scope("agent", "u")
    originals = await add_facts(engine, "t", scope, [(t, 0.8) for t in PARAPHRASES["en"]])
    with ScriptedLLM(default=ScriptedReply.text("Something about food.")) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, ConsolidationSettings(threshold=2, fidelity_threshold=0.9)
                                    ).consolidate_scope("t", scope)
        await client.close()
    assert report.failed_fidelity == 1 and report.merged == 0
    assert not report.merges[0].fidelity.passed and report.merges[0].method == "llm"
    assert all(not r.deleted for r in await engine.rows("t", originals))


DOOR_CODE = {
    "en": ["The door code of the user's flat is 4711.", "The user's flat has the door code 4711.",
           "To open the user's flat, the door code is 4711.", "The user's flat door opens with code 4711."],
    "zh": ["用户公寓的门禁密码是4711。", "用户的公寓门禁密码为4711。", "打开用户公寓的门，密码是4711。", "用户公寓门的密码：4711。"],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_llm_merge_that_loses_a_number_keeps_the_originals(engine, lang) -> None:
    scope = Scope("agent", "u")
    originals = await add_facts(engine, "t", scope, [(t, 0.8) for t in DOOR_CODE[lang]])
    vague = {"en": "The user's flat has a door code.", "zh": "用户的公寓有门禁密码。"}[lang]
    faithful = {"en": "The user's flat door code is 4711.", "zh": "用户公寓的门禁密码是4711。"}[lang]
    settings = ConsolidationSettings(threshold=2, similarity=0.6)
    with ScriptedLLM(default=ScriptedReply.text(vague)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, settings).consolidate_scope("t", scope)
        await client.close()
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.method == "llm" and not merge.fidelity.passed and "4711" in merge.fidelity.lost_keywords
    assert not merge.applied and all(not r.deleted for r in await engine.rows("t", originals))
    with ScriptedLLM(default=ScriptedReply.text(faithful)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, settings).consolidate_scope("t", scope)
        await client.close()
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.applied and merge.fidelity.passed
    assert (await engine.rows("t", [merge.memory_id]))[0].text == faithful


async def test_consolidation_below_threshold_does_nothing_and_no_embeddings_trims(engine) -> None:
    scope = Scope("agent", "u")
    ids = await add_facts(engine, "t", scope, [(filler(i), 0.1 * (i % 10)) for i in range(6)])
    report = await Consolidator(engine).consolidate_scope("t", scope)
    assert not report.ran and report.facts_after == 6
    trim = await Consolidator(engine, settings=ConsolidationSettings(threshold=4, use_embeddings=False)
                              ).consolidate_scope("t", scope)
    assert trim.trimmed == 2 and trim.facts_after == 4
    kept = sorted(r.importance for r in await engine.rows("t", ids) if not r.deleted)
    assert kept == pytest.approx([0.2, 0.3, 0.4, 0.5])


async def test_compressed_recall_summarises_more_than_n_results(engine) -> None:
    scope = Scope("agent", "u")
    await add_facts(engine, "t", scope, [(t, 0.8) for t, _ in EN_FACTS] + [(t, 0.8) for t, _ in ZH_FACTS])
    search = CompressedSearch(engine)
    items, _, summary = await search.search("t", scope, "what do I know about the user", min_results=3, max_chars=120)
    assert len(items) > 3 and summary is not None and summary.method == "extractive"
    assert 0 < len(summary.summary) <= 120
    _, _, none = await search.search("t", scope, "peanuts", min_results=100)
    assert none is None
    with pytest.raises(InvalidArgumentError, match="compress_max_chars"):
        await search.search("t", scope, "x", max_chars=-1)


async def test_compressed_recall_with_the_scripted_llm(engine) -> None:
    scope = Scope("agent", "u")
    await add_facts(engine, "t", scope, [(t, 0.8) for t, _ in EN_FACTS])
    with ScriptedLLM(default=ScriptedReply.text("Lives in Lisbon; peanut allergy. " * 40)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        _, _, summary = await CompressedSearch(engine, client).search("t", scope, "the user", min_results=1, max_chars=50)
        await client.close()
    assert summary is not None and summary.method == "llm" and len(summary.summary) == 50


def test_a_chain_larger_than_the_maximum_is_split_at_a_higher_similarity() -> None:
    import numpy as np

    # 0-1-2 are near-identical, 3-4 too, and 2~3 are linked only at 0.8: one component at 0.75.
    angles = [0.0, 0.01, 0.02, 0.02 + np.arccos(0.8), 0.03 + np.arccos(0.8)]
    v = np.array([[np.cos(a), np.sin(a)] for a in angles], dtype=np.float32)
    assert clusters(v, 0.75) == [[0, 1, 2, 3, 4]]
    assert clusters(v, 0.75, max_size=3) == [[0, 1, 2], [3, 4]]


def _alike(count: int, cosine: float, dims: int) -> np.ndarray:
    # Unit vectors sharing one direction, pairwise `cosine` alike: one fact said `count` ways.
    v = np.zeros((count, dims), dtype=np.float32)
    v[:, 0] = np.sqrt(cosine)
    v[np.arange(count), np.arange(1, count + 1)] = np.sqrt(1 - cosine)
    return v


def test_more_alike_facts_than_a_merge_takes_are_cut_into_runs_not_left_alone() -> None:
    import numpy as np

    # 60 facts about equally alike (0.9): no higher similarity splits them into mergeable
    # parts; they used to fall apart into 60 single facts at 0.95 and never merge.
    v = _alike(60, 0.9, 64)
    assert clusters(v, 0.75, max_size=50, min_size=3) == [list(range(30)), list(range(30, 60))]
    assert clusters(v, 0.75, max_size=20, min_size=3) == [list(range(k, k + 20)) for k in (0, 20, 40)]
    # Beside them, a chain whose neighbours are alike but whose ends are not is not cut into
    # runs: its parts are what its links make of it.
    # Each link is a window of 6 directions sliding by one: neighbours 5/6 alike, two apart 4/6.
    chain = np.zeros((60, 66), dtype=np.float32)
    for k in range(60):
        chain[k, k:k + 6] = 1 / np.sqrt(6)
    both = np.zeros((120, 130), dtype=np.float32)
    both[:60, :64], both[60:, 64:] = v, chain
    assert clusters(chain, 0.75) == [list(range(60))]
    groups = clusters(both, 0.75, max_size=50, min_size=3)
    assert groups == [list(range(30)), list(range(30, 60))] + [[k] for k in range(60, 120)]


@pytest.mark.parametrize("store_kind", ["sqlite"])
async def test_a_fact_said_sixty_ways_is_consolidated(engine) -> None:
    scope = Scope("agent", "u")
    # An agent that notes the same preference every session: with MiniLM these fall apart into
    # 60 single facts at any similarity that splits them.
    before = ["", "Note: ", "FYI ", "Reminder: ", "Remember: ", "Again, ", "As said, ", "Noted: ", "Fact: ", "Info: "]
    after = [".", "!", " again.", " (noted).", " as before.", " still."]
    texts = [f"{b}{'t' if b else 'T'}he user prefers dark mode{a}" for b in before for a in after]
    await add_facts(engine, "t", scope, [(t, 0.5) for t in texts])
    report = await Consolidator(engine, settings=ConsolidationSettings(threshold=10, similarity=0.75)
                                ).consolidate_scope("t", scope)
    assert (report.merged, report.originals_retired, report.facts_after) == (2, 60, 2)


async def test_consolidation_with_the_default_embedder_merges_paraphrases_not_a_language(tmp_path) -> None:
    # minilm+e5 stores vectors laid out for queries; compared raw, any two Chinese facts were
    # above 0.95 alike and every Chinese fact of a scope fell into one cluster.
    from agentscope_memory.long_term.embedders import load_embedder

    default = load_embedder("minilm+e5")
    store = open_store("sqlite", tmp_path)
    engine = HybridEngine(store, lambda: default, scorer=HeuristicScorer(), router=HeuristicRouter(),
                          settings=EngineSettings(scoring=False))
    await engine.open()
    try:
        scope = Scope("agent", "u", "run")
        originals = await add_facts(engine, "t", scope, [(t, 0.8) for t in PARAPHRASES["zh"]])
        others = ["用户周末喜欢去爬山。", "用户的生日是十月三号。", "用户在上海的一家银行工作。", "用户养了一只叫豆豆的猫。",
                  "用户的妹妹住在温哥华。", "用户每天早上喝绿茶。", "用户正在学习弹钢琴。", "用户明年打算去日本旅行。"]
        kept = await add_facts(engine, "t", scope, [(t, 0.5) for t in others])
        report = await Consolidator(engine, settings=ConsolidationSettings(threshold=10, similarity=0.75)
                                    ).consolidate_scope("t", scope)
        assert report.merged == 1 and sorted(report.merges[0].original_ids) == sorted(originals)
        assert all(not r.deleted for r in await engine.rows("t", kept))
    finally:
        await engine.close()
        await store.close()


async def test_replace_refuses_when_a_retired_fact_changed_since_it_was_read(engine) -> None:
    # What the lifecycle jobs rely on in both stores: their new memory says the texts they read.
    scope = Scope("agent", "u")
    ids = await add_facts(engine, "t", scope, EN_FACTS[:2])
    read = {r.memory_id: r.content_hash for r in await engine.rows("t", ids)}
    await engine.update("t", ids[0], "The user lives in Porto now.")
    new = fact_row(scope, "The user lives in Lisbon and is allergic to peanuts.", 0.9)
    assert await engine.replace("t", scope, [new], ids, event="REFLECT", detail={}, read_as=read) is None
    assert all(not r.deleted for r in await engine.rows("t", ids)) and not await engine.rows("t", [new.memory_id])
    read[ids[0]] = content_hash("The user lives in Porto now.")
    assert await engine.replace("t", scope, [new], ids, event="REFLECT", detail={}, read_as=read) is not None
    assert all(r.deleted for r in await engine.rows("t", ids))


def test_the_offline_reflection_counts_a_fact_as_said_only_word_for_word() -> None:
    from agentscope_memory.lifecycle.reflection import extractive_reflection

    scope = Scope("agent", "u")
    rows = [fact_row(scope, text, importance) for text, importance in
            [("The meeting is in Room 123.", 0.9), ("Room 12", 0.8), ("the  meeting is in room 123", 0.7),
             ("用户喜欢绿茶和咖啡。", 0.6), ("用户喜欢绿茶", 0.5), ("x" * 100, 0.4)]]
    text, covered = extractive_reflection(rows, 80)
    assert text == "The meeting is in Room 123. Room 12; 用户喜欢绿茶和咖啡。 用户喜欢绿茶"
    # The repetition leaves with them; what does not fit stays for the next reflection.
    assert [r.text for r in covered] == [r.text for r in rows[:5]]


async def test_clustering_a_large_scope_leaves_the_event_loop_free(engine) -> None:
    # The clustering (a pure-Python union over every similar pair, quadratic for a scope of
    # near-identical facts) ran on the server's event loop: no RPC was answered and no job
    # lease renewed until it ended.
    import asyncio

    import numpy as np

    scope = Scope("agent", "u")
    rng = np.random.default_rng(7)
    base = rng.normal(size=384)
    rows = []
    for i in range(1500):
        row = fact_row(scope, f"The build log line {i} repeats the same warning.", 0.5)
        row.embedding = (base + 0.05 * rng.normal(size=base.shape)).astype(np.float32).tobytes()
        row.embedding_model = engine.embedding_model
        rows.append(row)

    def write(tx) -> None:
        tx.ltm_register_scope(scope_key(scope), scope.agent_name, scope.user_id, scope.run_name, time.time())
        tx.ltm_insert(rows)

    await engine._store.run("t", write)
    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = loop.time()
            gaps.append(now - last)
            last = now

    beating = asyncio.create_task(heartbeat())
    started = asyncio.get_running_loop().time()
    report = await Consolidator(engine).consolidate_scope("t", scope, dry_run=True, threshold=0)
    took = asyncio.get_running_loop().time() - started
    done.set()
    await beating
    assert report.ran and report.facts_before == 1500
    # Relative, not absolute: the longest stall is a small part of the run.
    assert max(gaps) < 0.5 * took, (max(gaps), took)


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_llm_merge_that_invents_a_number_keeps_the_originals(engine, lang) -> None:
    # The originals say the code, never when it changed: a merge that dates the change states a
    # "fact" nobody told the assistant, and would replace the true ones in recall.
    scope = Scope("agent", "u")
    originals = await add_facts(engine, "t", scope, [(t, 0.8) for t in DOOR_CODE[lang]])
    invented = {"en": "The user's flat door code is 4711, changed on 2026-03-05.",
                "zh": "用户公寓的门禁密码是4711，三月五日改过。"}[lang]
    with ScriptedLLM(default=ScriptedReply.text(invented)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, ConsolidationSettings(threshold=2, similarity=0.6)
                                    ).consolidate_scope("t", scope)
        await client.close()
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.method == "llm" and merge.fidelity.composite_score >= 0.5 and "4711" not in merge.fidelity.lost_keywords
    assert not merge.fidelity.passed and not merge.applied and report.failed_fidelity >= 1
    assert merge.fidelity.invented_numbers == {"en": ["2026-03-05"], "zh": ["3月", "5日"]}[lang]
    assert all(not r.deleted for r in await engine.rows("t", originals))
