"""The default embedder is MiniLM + multilingual-e5-small by script; a data dir written with an
earlier default (MiniLM, then e5-small, both 384-d) stays readable: the first search of a scope
embeds its other-model rows again (in one batch, written back, 768-d), so old memories are found
by meaning, in English and Chinese."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service

SCOPE = Scope(agent_name="助手", user_id="user-老用户")
FACTS = ["I am allergic to peanuts", "我在上海的一家银行工作", "My daughter started primary school this year"]


def test_the_default_embedder_is_multilingual() -> None:
    assert ServiceSettings().long_term_embedder == "minilm+e5"


@pytest.mark.parametrize(("earlier", "model"), [("minilm", "MiniLM"), ("e5-small", "e5-small")])
async def test_memories_written_with_an_earlier_default_are_found_after_the_default_changed(
        tmp_path: Path, earlier: str, model: str) -> None:
    old = build_service(ServiceSettings(data_dir=tmp_path, long_term_embedder=earlier, long_term_scoring=False))
    async with old, AsyncLongTermClient.local(old) as ltm:
        await ltm.record(SCOPE, [Msg.create(MsgRole.USER, fact) for fact in FACTS])
        assert model in old.long_term.embedding_model  # type: ignore[union-attr]

    new = build_service(ServiceSettings(data_dir=tmp_path, long_term_scoring=False))
    async with new, AsyncLongTermClient.local(new) as ltm:
        assert {item.text for item in await ltm.list(SCOPE)} == set(FACTS)
        assert new.long_term.embedding_model.startswith("minilm+")  # type: ignore[union-attr]
        assert (await ltm.retrieve(SCOPE, Msg.create(MsgRole.USER, "在哪里上班"), limit=1)) == "我在上海的一家银行工作"
        assert (await ltm.retrieve(SCOPE, Msg.create(MsgRole.USER, "which foods must I avoid"), limit=1)) == FACTS[0]
        rows = await new.long_term.rows("default", [item.id for item in await ltm.list(SCOPE)])  # type: ignore[union-attr]
        assert {row.embedding_model for row in rows} == {new.long_term.embedding_model}  # type: ignore[union-attr]


ENGLISH = {
    "Which city did I move to?": "We moved to Denver in March, the mountains are right there",
    "What instrument am I learning?": "I have been taking cello lessons every Tuesday",
    "What do I do for work?": "I work as a pharmacist at the hospital downtown",
    "What is my dog called?": "Our beagle is called Biscuit and he loves the park",
}
CHINESE = {
    "我在学什么外语？": "我最近在学西班牙语，每周上两次课",
    "我孩子多大了？": "我女儿今年七岁，刚上二年级",
    "我喜欢喝什么茶？": "我最爱喝铁观音，每天都要泡一壶",
    "我住在哪个城市？": "我住在杭州，离西湖不远",
}


async def test_a_bilingual_scope_ranks_by_meaning_not_by_script(tmp_path: Path) -> None:
    """An English query finds its English memory above every unrelated Chinese one, and a
    Chinese query its Chinese memory above every unrelated English one (a CJK text once stored
    as e5 alone outscored the English memories an English query was about)."""
    service = build_service(ServiceSettings(data_dir=tmp_path, long_term_scoring=False))
    scope = Scope(user_id="双语用户")
    async with service, AsyncLongTermClient.local(service) as ltm:
        await ltm.record(scope, [Msg.create(MsgRole.USER, t) for t in [*ENGLISH.values(), *CHINESE.values()]])
        for query, answer in [*ENGLISH.items(), *CHINESE.items()]:
            found = await ltm.search(scope, query, top_k=8, dense_weight=1.0, beta=0.0, gamma=0.0)
            assert [item.text for item in found][0] == answer, (query, [item.text for item in found])


def test_a_query_scores_memories_of_either_script_with_one_formula() -> None:
    """English query: the mean of MiniLM's and e5's cosines, whatever the memory's script;
    Chinese query: e5's cosine (scaled) for every memory. So no script is favoured by layout."""
    from agentscope_memory.long_term.embedders import E5Small, MiniLM, load_embedder

    both, minilm, e5 = load_embedder("minilm+e5"), MiniLM(), E5Small()
    texts = ["We moved to Denver in March", "我住在杭州，离西湖不远", "I take cello lessons", "我最爱喝铁观音"]
    stored = both.embed(texts)
    for query in ["Which city do I live in?", "我住在哪里？"]:
        got = stored @ both.embed_query([query])[0]
        e5_cos = e5.embed(texts) @ e5.embed_query([query])[0]
        if query.isascii():
            want = 0.5 * (minilm.embed(texts) @ minilm.embed_query([query])[0]) + 0.5 * e5_cos
        else:
            want = 0.5**0.5 * e5_cos
        assert got == pytest.approx(want, abs=1e-5), query
