"""HybridEngine over a real store (sqlite, and PostgreSQL + pgvector), the real MiniLM embedder,
the offline heuristic scorer and router."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentscope_memory.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError, ResourceExhaustedError
from agentscope_memory.jobs import JobRunner
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine, RankOptions
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermFilter

DATA = json.loads((Path(__file__).parent / "data" / "retrieval_set.json").read_text())
RECALL_FLOOR = 0.85


def user(text: str) -> Msg:
    return Msg.create(MsgRole.USER, text)


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _engine(store: Any, embedder: MiniLMEmbedder, kind: str, clock: Any = time.time, **settings: Any) -> HybridEngine:
    return HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                        settings=EngineSettings(**settings), in_database=kind == "postgres", clock=clock)


@pytest.fixture(params=["sqlite", "postgres"])
def store_kind(request) -> str:
    return request.param


@pytest.fixture
async def make_store(store_kind, tmp_path, request):
    stores = []
    dsn = request.getfixturevalue("postgres_dsn") if store_kind == "postgres" else None

    def make() -> Any:
        store = open_store(store_kind, tmp_path, postgres_dsn=dsn)
        stores.append(store)
        return store

    yield make
    for store in stores:
        await store.close()


@pytest.fixture
async def engine(make_store, embedder, store_kind):
    engine = _engine(make_store(), embedder, store_kind, scoring=False)
    await engine.open()
    yield engine
    await engine.close()


async def test_labelled_retrieval_set_recall_at_5(engine) -> None:
    for u, facts in DATA["facts"].items():
        await engine.record("t", Scope(user_id=u), [user(text) for text in facts.values()])
    text_to_id = {text: fid for facts in DATA["facts"].values() for fid, text in facts.items()}
    hits = 0
    for q in DATA["queries"]:
        found = [text_to_id[i.text] for i in await engine.search("t", Scope(user_id=q["user"]), q["query"], limit=5)]
        assert all(fid[0] == q["user"][0] for fid in found), (q, found)
        hits += set(q["expect"]) <= set(found)
    assert hits / len(DATA["queries"]) >= RECALL_FLOOR


async def test_record_keeps_each_text_once_and_retrieve_joins_like_java(engine) -> None:
    scope = Scope(agent_name="Assistant", user_id="u1")
    first = await engine.record("t", scope, [user("I like tea"), Msg.create(MsgRole.ASSISTANT, "好的，记住了")])
    assert [i.text for i in first] == ["I like tea", "好的，记住了"]
    # AgentScope records the whole conversation each turn: only the new message is stored.
    again = await engine.record("t", scope, [user("I like tea"), Msg.create(MsgRole.ASSISTANT, "好的，记住了"), user("I live in Oslo")])
    assert [i.text for i in again] == ["I live in Oslo"]
    assert len(await engine.list("t", scope)) == 3
    text, items = await engine.retrieve("t", scope, user("which city do I live in"), limit=1)
    assert text == "I live in Oslo" and items[0].scores is not None
    text, items = await engine.retrieve("t", scope, user("我喜欢什么"), limit=5)
    assert text.split("\n")[0] == "好的，记住了" or "好的，记住了" in text.split("\n")
    assert await engine.retrieve("t", scope, None) == ("", [])


async def test_whitespace_only_messages_are_not_recorded(engine) -> None:
    # A blank text is no text (update refuses it too): stored, it came back as a blank line of
    # every retrieve.
    scope = Scope(user_id="u-blank")
    items = await engine.record("t", scope, [user("   \n\t "), user("\u3000"), user("I like tea")])
    assert [i.text for i in items] == ["I like tea"]
    assert [i.text for i in await engine.list("t", scope)] == ["I like tea"]
    assert await engine.record("t", scope, [user(" ")]) == []
    text, _ = await engine.retrieve("t", scope, user("tea"))
    assert text == "I like tea"


async def test_what_static_control_recalled_is_not_recorded_again(engine) -> None:
    # AgentScope's static control adds what it recalled to the conversation and records the
    # whole conversation after the reply: stored verbatim, every recall became a new memory
    # wrapping the last ones, and came back in the next recall.
    scope = Scope(user_id="u-recall")
    java = ("Below is content retrieved from the long-term memory associated with the current user, Please extract"
            " useful information from it in the context of the current conversation.\n<long_term_memory>\n我喜欢喝茶"
            "\n</long_term_memory>")
    python = "<long_term_memory>The content below are retrieved from long-term memory, which maybe useful:\n我喜欢喝茶</long_term_memory>"
    items = await engine.record("t", scope, [user("我喜欢喝茶"), user(java), user(python), user("明天去杭州")])
    assert [i.text for i in items] == ["我喜欢喝茶", "明天去杭州"]
    assert sorted(i.text for i in await engine.list("t", scope)) == sorted(["我喜欢喝茶", "明天去杭州"])


async def test_a_message_that_only_mentions_the_recall_tag_is_recorded(engine) -> None:
    # Any text holding "<long_term_memory>" was skipped: a developer's question about the tag,
    # or a note quoting it, was silently never remembered.
    scope = Scope(user_id="u-mentions")
    question = "为什么 AgentScope 的回复里会出现 <long_term_memory> 标签？我想关掉它。"
    note = "I parse the <long_term_memory>...</long_term_memory> block out of the prompt before logging it."
    items = await engine.record("t", scope, [user(question), user(note)])
    assert [i.text for i in items] == [question, note]


async def test_a_conversation_joined_into_one_text_is_recorded_without_its_recall(engine) -> None:
    # Python's Mem0LongTermMemory records the conversation as one text, the recall message
    # included: that text was skipped whole (the user's new facts lost with it), or stored with
    # the recall nested in it.
    scope = Scope(user_id="u-joined")
    recall = "<long_term_memory>The content below are retrieved from long-term memory, which maybe useful:\n我喜欢喝茶</long_term_memory>"
    java = ("Below is content retrieved from the long-term memory associated with the current user, Please extract"
            " useful information from it in the context of the current conversation.\n<long_term_memory>\n我喜欢喝茶"
            "\n</long_term_memory>")
    joined = f"我下周搬到成都\n{recall}\n好的，记住了：您下周搬到成都"
    items = await engine.record("t", scope, [Msg.create(MsgRole.ASSISTANT, joined), user(f"{java}\n明天降温")])
    assert [i.text for i in items] == ["我下周搬到成都\n好的，记住了：您下周搬到成都", "明天降温"]
    # A recall of what a store of an earlier release kept nested is removed whole.
    nested = ("<long_term_memory>The content below are retrieved from long-term memory, which maybe useful:\n"
              f"{recall}\n我住在杭州</long_term_memory>")
    items = await engine.record("t", scope, [user(nested), user(f"上周的事\n{nested}\n我换了新工作")])
    assert [i.text for i in items] == ["上周的事\n我换了新工作"]


async def test_scores_carry_every_component_and_rankings_differ(engine) -> None:
    scope = Scope(user_id="u")
    await engine.record("t", scope, [user("My sister Anna lives in Berlin"), user("I play chess on Sundays"),
                                     user("Zebrafish regenerate their fins")])
    items, domain = await engine.search_ranked("t", scope, "where does Anna live")
    assert domain == "" and items[0].text == "My sister Anna lives in Berlin"
    o = engine.rank_defaults
    for item in items:
        s = item.scores
        assert 0 <= s.semantic <= 1 and 0 <= s.dense <= 1 and 0 <= s.lexical <= 1 and 0 < s.decay <= 1
        boosts = o.beta * s.decay + o.gamma * s.importance + o.delta * s.frequency
        assert s.final == pytest.approx(o.alpha * s.semantic + s.dense**2 * boosts)
        assert s.semantic == pytest.approx(o.dense_weight * s.dense + (1 - o.dense_weight) * s.lexical)
    lexical, _ = await engine.search_ranked("t", scope, "zebrafish", o.with_overrides(ranking="lexical"))
    assert [i.text for i in lexical] == ["Zebrafish regenerate their fins"]
    dense, _ = await engine.search_ranked("t", scope, "board games on weekends", o.with_overrides(ranking="dense"))
    assert dense[0].text == "I play chess on Sundays" and len(dense) == 3
    rrf, _ = await engine.search_ranked("t", scope, "Anna Berlin", o.with_overrides(ranking="rrf"))
    assert rrf[0].text == "My sister Anna lives in Berlin"
    top1, _ = await engine.search_ranked("t", scope, "Anna", o.with_overrides(top_k=1))
    assert len(top1) == 1


async def test_a_message_is_found_lexically_through_the_two_messages_before_it(engine) -> None:
    scope = Scope(user_id="ctx")
    await engine.record("t", scope, [user("Let us talk about my grandmother Xiomara"),
                                     Msg.create(MsgRole.ASSISTANT, "Of course"), user("She turned ninety last week"),
                                     user("unrelated one"), user("unrelated two"), user("Tell me a joke")])
    items, _ = await engine.search_ranked("t", scope, "Xiomara", engine.rank_defaults.with_overrides(ranking="lexical"))
    found = [i.text for i in items]
    assert set(found) == {"Let us talk about my grandmother Xiomara", "Of course", "She turned ninety last week"}


async def test_filters_by_type_domain_time_and_metadata(make_store, embedder, store_kind) -> None:
    clock = Clock()
    engine = _engine(make_store(), embedder, store_kind, clock=clock, scoring=False)
    scope = Scope(user_id="f")
    [old] = await engine.record("t", scope, [user("I drink green tea every morning")], {"topic": "drinks", "n": 1})
    clock.now += 60
    [new] = await engine.record("t", scope, [user("I switched from tea to coffee")], {"topic": "drinks", "n": 2})
    o = engine.rank_defaults
    by_meta, _ = await engine.search_ranked("t", scope, "tea", o.with_overrides(where=LongTermFilter(metadata={"n": 2})))
    assert [i.text for i in by_meta] == ["I switched from tea to coffee"]
    both, _ = await engine.search_ranked("t", scope, "tea", o.with_overrides(where=LongTermFilter(metadata={"topic": "drinks"})))
    assert len(both) == 2
    before, _ = await engine.search_ranked("t", scope, "tea", o.with_overrides(where=LongTermFilter(created_before=clock.now - 30)))
    assert [i.id for i in before] == [old.id]
    after, _ = await engine.search_ranked("t", scope, "tea", o.with_overrides(where=LongTermFilter(created_after=clock.now - 30)))
    assert [i.id for i in after] == [new.id]
    facts, _ = await engine.search_ranked("t", scope, "tea", o.with_overrides(where=LongTermFilter(memory_types=("fact",))))
    assert facts == []
    none, _ = await engine.search_ranked("t", scope, "tea", o.with_overrides(where=LongTermFilter(domains=("tasks_and_schedules",))))
    assert none == []
    await engine.close()


async def test_routing_skips_small_talk(engine) -> None:
    scope = Scope(user_id="r")
    await engine.record("t", scope, [user("I am allergic to peanuts")])
    for small_talk in ("thanks!", "你好呀"):
        items, domain = await engine.search_ranked("t", scope, small_talk, route=True)
        assert (items, domain) == ([], "general_chat")
    # Routing is off by default for the AgentScope-parity calls.
    assert (await engine.retrieve("t", scope, user("thanks!")))[0] == "I am allergic to peanuts"
    # A routed query still finds memories not assessed yet (no domain).
    items, domain = await engine.search_ranked("t", scope, "what food am I allergic to", route=True)
    assert domain != "general_chat" and [i.text for i in items] == ["I am allergic to peanuts"]


async def test_recall_touches_what_it_returns(engine) -> None:
    scope = Scope(user_id="touch")
    [item] = await engine.record("t", scope, [user("My passport number ends in 42")])
    assert item.access_count == 0
    await engine.search("t", scope, "passport")
    await engine.close()  # waits for the background touch
    got = await engine.get("t", item.id)
    assert got.access_count == 1 and got.last_accessed_at >= item.last_accessed_at


async def test_decay_and_importance_order_equal_matches(make_store, embedder, store_kind) -> None:
    clock = Clock()
    engine = _engine(make_store(), embedder, store_kind, clock=clock, scoring=False)
    scope = Scope(user_id="d")
    # An unrelated memory sets the low end of the dense normalisation.
    await engine.record("t", scope, [user("I enjoy swimming in the lake")])
    [stale] = await engine.record("t", scope, [user("The wifi password is kiwi")])
    clock.now += 24 * 3600 * 30
    [fresh] = await engine.record("t", scope, [user("The wifi password is mango")])
    items, _ = await engine.search_ranked("t", scope, "wifi password", engine.rank_defaults.with_overrides(top_k=2))
    assert [i.id for i in items] == [fresh.id, stale.id]
    assert items[1].scores.decay == pytest.approx(0.99 ** (24 * 30), rel=1e-3)
    await engine.update("t", stale.id, importance=1.0)
    await engine.update("t", fresh.id, importance=0.0)
    items, _ = await engine.search_ranked("t", scope, "wifi password", engine.rank_defaults.with_overrides(top_k=2))
    assert [i.id for i in items] == [stale.id, fresh.id]
    await engine.close()


async def test_update_and_history(engine) -> None:
    scope = Scope(agent_name="A", user_id="u")
    [item, other] = await engine.record("t", scope, [user("I like tea"), user("I like jazz")], {"k": 1})
    updated = await engine.update("t", item.id, text="I like green tea", metadata={"k": 2, "z": "新"}, importance=0.8)
    assert (updated.text, updated.metadata, updated.importance, updated.importance_method) == (
        "I like green tea", {"k": 2, "z": "新"}, 0.8, "user")
    assert (await engine.search("t", scope, "green tea", limit=1))[0].id == item.id
    history = await engine.history("t", item.id)
    assert [(h.event, h.old_text, h.new_text) for h in history] == [
        ("ADD", None, "I like tea"), ("UPDATE", "I like tea", "I like green tea")]
    assert history[1].detail["importance"]["new"] == 0.8
    with pytest.raises(AlreadyExistsError):
        await engine.update("t", item.id, text="I like jazz")
    assert (await engine.get("t", item.id)).text == "I like green tea"
    await engine.delete("t", other.id)
    assert [h.event for h in await engine.history("t", item.id)] == ["ADD", "UPDATE"]
    # The deleted text may be recorded again.
    assert [i.text for i in await engine.record("t", scope, [user("I like jazz")])] == ["I like jazz"]


async def test_history_is_read_a_page_at_a_time_from_the_store(engine) -> None:
    from agentscope_memory.convert.to_proto import long_term_history_to_proto
    from agentscope_memory.mem0_api.facade import Mem0Api
    from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES

    scope = Scope(user_id="u-history")
    [item] = await engine.record("t", scope, [user("第 0 版")])
    for i in range(1, 8):
        await engine.update("t", item.id, text=f"第 {i} 版")
    page = await engine.history_page("t", item.id, 3)
    assert [e.new_text for e in page.entries] == ["第 0 版", "第 1 版", "第 2 版"]
    assert page.cursors == [1, 2, 3] and page.more
    page = await engine.history_page("t", item.id, 3, 3)
    assert [e.new_text for e in page.entries] == ["第 3 版", "第 4 版", "第 5 版"] and page.more
    page = await engine.history_page("t", item.id, 3, 5)
    assert [e.new_text for e in page.entries] == ["第 5 版", "第 6 版", "第 7 版"] and not page.more
    assert (await engine.history_page("t", item.id, 3, 8)).entries == []
    assert [e.new_text for e in await engine.history("t", item.id)] == [f"第 {i} 版" for i in range(8)]
    for tenant, memory_id in (("t", "missing"), ("other-tenant", item.id)):
        with pytest.raises(NotFoundError):
            await engine.history_page(tenant, memory_id, 3)

    # Large entries: the read stops soon after the byte budget, not at the page size.
    [big] = await engine.record("t", scope, [user("big metadata")])
    for i in range(40):
        await engine.update("t", big.id, metadata={"blob": f"{i:02d}" + "m" * 60_000})
    page = await engine.history_page("t", big.id, 1000, 0, 500_000)
    assert 4 <= len(page.entries) <= 16 and page.more
    assert len(await engine.history("t", big.id)) == 41
    # mem0's REST history follows the pages (texts only), and is bounded by its byte budget.
    assert len(await Mem0Api(engine).history("t", big.id)) == 41
    assert len(await Mem0Api(engine, max_answer_bytes=1).history("t", big.id)) == 1

    # The largest entry (an UPDATE of the longest text, in 4-byte characters, and of the
    # largest metadata) is far below a page's byte budget: one entry always travels.
    [huge] = await engine.record("t", scope, [user("𝄞" * 65_536)], {"blob": "a" * 65_000})
    await engine.update("t", huge.id, text="𝄢" * 65_536, metadata={"blob": "b" * 65_000})
    entry = (await engine.history("t", huge.id))[-1]
    size = long_term_history_to_proto(entry).ByteSize()
    assert entry.event == "UPDATE" and 640_000 < size < 700 * 1024 < DEFAULT_PAGE_BYTES


async def test_update_holds_records_rules_under_its_own_field_names(engine) -> None:
    scope = Scope(user_id="u-upd")
    # 30,000 CJK characters (90 KB of UTF-8): Record takes them, so an edit of them is taken too.
    [item] = await engine.record("t", scope, [user("我" * 30_000)])
    edited = await engine.update("t", item.id, text="我" * 29_999 + "你")
    assert edited.text.endswith("你")
    with pytest.raises(InvalidArgumentError) as err:
        await engine.update("t", item.id, text="a\x00b")
    assert err.value.field == "text"
    # Merges cannot grow the metadata past Record's 64 KiB: one memory must fit any response.
    await engine.update("t", item.id, metadata={"a": "x" * 40_000})
    with pytest.raises(ResourceExhaustedError) as err:
        await engine.update("t", item.id, metadata={"b": "y" * 40_000})
    assert err.value.field == "metadata_json"
    with pytest.raises(InvalidArgumentError) as err:
        await engine.update("t", item.id, metadata={"k": "\x00"})
    assert err.value.field == "metadata_json"
    got = await engine.get("t", item.id)
    assert set(got.metadata) == {"a"} and got.text == edited.text
    assert [h.event for h in await engine.history("t", item.id)] == ["ADD", "UPDATE", "UPDATE"]


async def test_bad_input(engine) -> None:
    scope = Scope(user_id="u")
    [item] = await engine.record("t", scope, [user("x")])
    cases = [
        (lambda: engine.record("t", Scope(), [user("x")]), InvalidArgumentError, "scope"),
        (lambda: engine.record("t", scope, [user("x")], {"asm_tenant": "evil"}), InvalidArgumentError, "metadata_json"),
        (lambda: engine.update("t", item.id), InvalidArgumentError, "text"),
        (lambda: engine.update("t", item.id, text="  "), InvalidArgumentError, "text"),
        (lambda: engine.update("t", item.id, importance=1.5), InvalidArgumentError, "importance"),
        (lambda: engine.update("t", item.id, importance=float("nan")), InvalidArgumentError, "importance"),
        (lambda: engine.update("t", "", text="y"), InvalidArgumentError, "id"),
        (lambda: engine.search_ranked("t", scope, "x" * 70_000), ResourceExhaustedError, "query"),
    ]
    for field_name, value in [("alpha", -0.1), ("beta", 2.0), ("gamma", float("inf")), ("delta", 1.1),
                              ("dense_weight", -1.0), ("decay_rate", 0.0), ("top_k", 0), ("top_k_semantic", 1001),
                              ("ranking", "best")]:
        cases.append((lambda f=field_name, v=value: engine.search_ranked("t", scope, "x", RankOptions(**{f: v})),
                      InvalidArgumentError, field_name))
    cases.append((lambda: engine.search_ranked("t", scope, "x", RankOptions(where=LongTermFilter(memory_types=("note",)))),
                  InvalidArgumentError, "memory_types"))
    cases.append((lambda: engine.search_ranked("t", scope, "x", RankOptions(where=LongTermFilter(domains=("weather",)))),
                  InvalidArgumentError, "domains"))
    cases.append((lambda: engine.search_ranked("t", scope, "x", RankOptions(where=LongTermFilter(created_after=5, created_before=1))),
                  InvalidArgumentError, "created_before"))
    for call, error, field_name in cases:
        with pytest.raises(error) as err:
            await call()
        assert err.value.field == field_name if hasattr(err.value, "field") else field_name in str(err.value)
    # Nothing changed.
    assert [(i.text, i.importance) for i in await engine.list("t", scope)] == [("x", 0.5)]
    assert [h.event for h in await engine.history("t", item.id)] == ["ADD"]


async def test_scopes_and_tenants_are_isolated_in_every_call(engine) -> None:
    await engine.record("t1", Scope(agent_name="A", user_id="u1"), [user("u1 likes jazz")])
    await engine.record("t1", Scope(agent_name="A", user_id="u2"), [user("u2 likes jazz too")])
    await engine.record("t1", Scope(agent_name="B", user_id="u1"), [user("agent B heard u1 likes jazz")])
    [other] = await engine.record("t2", Scope(agent_name="A", user_id="u1"), [user("other tenant: jazz")])
    items, _ = await engine.search_ranked("t1", Scope(agent_name="A", user_id="u1"), "jazz")
    assert [i.text for i in items] == ["u1 likes jazz"]
    items, _ = await engine.search_ranked("t1", Scope(user_id="u1"), "jazz")
    assert {i.text for i in items} == {"u1 likes jazz", "agent B heard u1 likes jazz"}
    for call in (lambda: engine.get("t1", other.id), lambda: engine.update("t1", other.id, text="hijack"),
                 lambda: engine.history("t1", other.id), lambda: engine.delete("t1", other.id)):
        with pytest.raises(NotFoundError):
            await call()
    assert (await engine.get("t2", other.id)).text == "other tenant: jazz"
    assert await engine.delete_scope("t1", Scope(user_id="u1")) == 2
    assert [i.text for i in await engine.list("t1", Scope(agent_name="A"))] == ["u2 likes jazz too"]
    assert len(await engine.list("t2", Scope(user_id="u1"))) == 1


async def test_readers_during_writers_lose_and_duplicate_nothing(engine) -> None:
    scope = Scope(user_id="busy")
    conversation = [user(f"fact number {i}: I own {i} plants") for i in range(30)]

    async def writer(k: int) -> None:
        # Every writer records a growing prefix of the same conversation, as AgentScope does.
        for end in [*range(k, 31, 6), 30]:
            await engine.record("t", scope, conversation[:end])

    async def reader() -> int:
        seen = 0
        for _ in range(10):
            seen = max(seen, len(await engine.search("t", scope, "how many plants", limit=50)))
            await asyncio.sleep(0)
        return seen

    results = await asyncio.gather(*[writer(k) for k in range(1, 5)], *[reader() for _ in range(3)])
    assert all(isinstance(r, (int, type(None))) for r in results)
    texts = [i.text for i in await engine.list("t", scope, limit=1000)]
    assert sorted(texts) == sorted(m.text_content for m in conversation)


async def test_a_new_engine_sees_stored_memories(make_store, embedder, store_kind) -> None:
    store = make_store()
    first = _engine(store, embedder, store_kind, scoring=False)
    await first.record("t", Scope(user_id="u"), [user("I play the oboe")])
    await first.close()
    second = _engine(store, embedder, store_kind, scoring=False)
    text, _ = await second.retrieve("t", Scope(user_id="u"), user("which instrument"))
    assert text == "I play the oboe"


async def test_round_scoring_runs_as_a_job_and_stores_facts_once(make_store, embedder, store_kind) -> None:
    store = make_store()
    engine = _engine(store, embedder, store_kind)
    jobs = JobRunner(store)
    engine.attach_jobs(jobs)
    scope = Scope(user_id="s")
    recorded = await engine.record("t", scope, [user("Please remember that my daughter's birthday is on May 3rd"),
                                                 Msg.create(MsgRole.ASSISTANT, "I will remember that")])
    assert all(i.importance_method == "default" for i in recorded)
    assert await jobs.run_due() == 1
    rows = await engine.list("t", scope)
    assert all(r.importance_method == "heuristic" and r.domain for r in rows)
    facts = [r for r in rows if r.memory_type == "fact"]
    messages = [r for r in rows if r.memory_type == "message"]
    assert len(messages) == 2
    # The round's importance is the user's: the assistant's acknowledgement does not inherit it.
    said = {m.text: m for m in messages}
    assert said["Please remember that my daughter's birthday is on May 3rd"].importance > 0.5
    assert said["I will remember that"].importance == 0.0
    assert said["I will remember that"].domain == said["Please remember that my daughter's birthday is on May 3rd"].domain
    if facts:
        assert said["Please remember that my daughter's birthday is on May 3rd"].importance >= engine.settings.fact_threshold
        assert sorted(facts[0].source["memory_ids"]) == sorted(i.id for i in recorded)
    # Running the round's job again (a runner died after finishing it) changes nothing.
    from agentscope_memory.jobs import Job
    from agentscope_memory.long_term.hybrid.scoring import RoundScorer

    await RoundScorer(engine).run(Job("again", "t", "long_term.score_round", {"memory_ids": [i.id for i in recorded]}, 2))
    assert len(await engine.list("t", scope)) == len(rows)
    await engine.close()


async def test_a_scoring_job_run_again_after_storing_its_fact_stores_no_second_wording(make_store, embedder,
                                                                                         store_kind) -> None:
    """A runner that dies after storing a round's fact, before the job is marked done, leaves the
    job to run again. A model asked again words the fact differently, so its hash did not catch
    the repetition and the scope held the fact twice."""
    from agentscope_memory.jobs import Job
    from agentscope_memory.long_term.hybrid.scoring import RoundScorer
    from agentscope_memory.long_term.importance import Assessment

    class Rewording:
        """A model that never answers twice alike (the only double: it stands for the LLM)."""

        def __init__(self) -> None:
            self.calls = 0

        async def assess(self, texts):  # type: ignore[no-untyped-def]
            self.calls += 1
            return Assessment(0.9, f"用户的女儿生日是五月三日（第{self.calls}种说法）", "personal", "llm")

    store = make_store()
    scorer = Rewording()
    engine = HybridEngine(store, lambda: embedder, scorer=scorer, router=HeuristicRouter(),
                          settings=EngineSettings(scoring=False), in_database=store_kind == "postgres")
    await engine.open()
    scope = Scope(user_id="重跑")
    recorded = await engine.record("t", scope, [user("请记住，我女儿的生日是五月三日")])
    round_job = {"memory_ids": [i.id for i in recorded]}
    await RoundScorer(engine).run(Job("job-1", "t", "long_term.score_round", round_job, 1))
    await RoundScorer(engine).run(Job("job-1", "t", "long_term.score_round", round_job, 2))
    facts = [r.text for r in await engine.list("t", scope) if r.memory_type == "fact"]
    assert facts == ["用户的女儿生日是五月三日（第1种说法）"] and scorer.calls == 1
    # Another round's job is a job of its own.
    await RoundScorer(engine).run(Job("job-2", "t", "long_term.score_round", round_job, 1))
    assert len([r for r in await engine.list("t", scope) if r.memory_type == "fact"]) == 2
    await engine.close()


async def test_a_rounds_importance_goes_to_its_user_messages(make_store, embedder, store_kind) -> None:
    from agentscope_memory.long_term.hybrid.scoring import round_importances

    engine = _engine(make_store(), embedder, store_kind, scoring=False)
    said = await engine.record("t", Scope(user_id="s"), [user("I moved to Oslo"), Msg.create(MsgRole.ASSISTANT, "Noted")])
    alone = await engine.record("t", Scope(user_id="s"), [Msg.create(MsgRole.ASSISTANT, "Your dentist is on 3 May")])
    mixed = await engine.rows("t", [i.id for i in said])
    assert round_importances(mixed, 0.8) == {said[0].id: 0.8, said[1].id: 0.0}
    # A round with no user message (an assistant's note recorded alone) keeps its score.
    assert round_importances(await engine.rows("t", [alone[0].id]), 0.8) == {alone[0].id: 0.8}
    await engine.close()


async def test_two_replicas_on_one_postgres_see_each_other_and_never_duplicate(postgres_dsn, embedder) -> None:
    stores = [open_store("postgres", Path("."), postgres_dsn=postgres_dsn) for _ in range(2)]
    a, b = (_engine(store, embedder, "postgres", scoring=False) for store in stores)
    try:
        scope = Scope(agent_name="Assistant", user_id="shared")
        [item] = await a.record("t", scope, [user("Replica A heard: the meeting moved to Friday")])
        # Seen by the other replica at once, by search, get and list.
        assert (await b.retrieve("t", scope, user("when is the meeting"), limit=1))[0] == item.text
        assert (await b.get("t", item.id)).text == item.text
        await b.update("t", item.id, importance=0.9)
        assert (await a.get("t", item.id)).importance == 0.9
        # Both replicas record the same growing conversation at once: each text is stored once.
        conversation = [user(f"第{i}条消息: message {i}") for i in range(20)]

        async def replay(engine: HybridEngine) -> None:
            for end in range(1, 21, 3):
                await engine.record("t", scope, conversation[:end])
            await engine.record("t", scope, conversation)

        await asyncio.gather(replay(a), replay(b), replay(a), replay(b))
        texts = [i.text for i in await b.list("t", scope, limit=1000)]
        assert sorted(texts) == sorted([item.text] + [m.text_content for m in conversation])
    finally:
        for engine in (a, b):
            await engine.close()
        for store in stores:
            await store.close()


def test_a_long_text_is_cut_into_parts_at_its_best_boundaries() -> None:
    from agentscope_memory.long_term.hybrid.records import parts

    # A paragraph break in a part's last eighth wins over the sentence ends after it.
    text = "a" * 90 + "\n\n" + "b. " * 10 + "c" * 50
    assert parts(text, 100) == ["a" * 90, "b. " * 10 + "c" * 50]
    # No boundary at all: cut at the limit, nothing lost.
    assert parts("x" * 250, 100) == ["x" * 100, "x" * 100, "x" * 50]
    # Chinese sentence ends count where they stand.
    chinese = "我们明天开会。" * 30
    cut = parts(chinese, 100)
    assert "".join(cut) == chinese and all(len(p) <= 100 and p.endswith("。") for p in cut)
    # Short texts are one part; whitespace alone is none.
    assert parts("短", 100) == ["短"] and parts("   ", 2) == []
