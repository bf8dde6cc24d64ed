"""The default embedder is MiniLM + multilingual-e5-small by script; a data dir written with an
earlier default (MiniLM, then e5-small, both 384-d) stays readable: the first search of a scope
embeds its other-model rows again (in one batch, written back, 1155-d), so old memories are found
by meaning, in English and Chinese; a question finds a fact stated in the other language."""

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


def test_a_query_scores_its_own_script_as_before_and_the_other_on_a_centred_scale() -> None:
    """Same script: an English query scores English memories by the mean of MiniLM's and e5's
    cosines, a Chinese query Chinese memories by e5's (all over the stored length, sqrt 2).
    Other script: e5 with the query centred on its script's mean (renormalised) against the
    memory centred on its own, mapped by the bundled affine map."""
    import base64

    import numpy as np

    from agentscope_memory.long_term import e5_centres
    from agentscope_memory.long_term.embedders import E5Small, MiniLM, load_embedder

    both, minilm, e5 = load_embedder("minilm+e5"), MiniLM(), E5Small()
    means = {k: np.frombuffer(base64.b64decode("".join(v)), dtype="<f4").astype(np.float64)
             for k, v in e5_centres.MEANS_F32_BASE64.items()}
    texts = ["We moved to Denver in March", "我住在杭州，离西湖不远", "I take cello lessons", "我最爱喝铁观音"]
    cjk = [False, True, False, True]
    stored = both.embed(texts)
    for query, script, other in [("Which city do I live in?", "latin", "cjk"), ("我住在哪里？", "cjk", "latin")]:
        got = stored @ both.embed_query([query])[0]
        q = e5.embed_query([query])[0].astype(np.float64)
        centred = (q - means[f"query_{script}"]) / np.linalg.norm(q - means[f"query_{script}"])
        gamma, kappa = e5_centres.CROSS_SCRIPT_MAP[script]
        for i, text in enumerate(texts):
            e5_p = e5.embed([text])[0].astype(np.float64)
            if cjk[i] == (script == "cjk"):
                want = float(e5_p @ q)
                if script == "latin":
                    want = 0.5 * float(minilm.embed([text])[0] @ minilm.embed_query([query])[0]) + 0.5 * want
            else:
                want = gamma * float(centred @ (e5_p - means[f"passage_{other}"])) + kappa
            assert got[i] == pytest.approx(want / 2**0.5, abs=1e-4), (query, text)


# A bilingual user's scope: facts in both languages, with near misses in both (other people's).
MIXED_ENGLISH = {
    "我妹妹住在哪里？": "My sister lives in Vancouver now",
    "我的工作是什么？": "I work as a data engineer at a logistics company",
    "我对什么过敏？": "I'm allergic to cats, so no visits to cat cafés for me",
    "马拉松": "I ran the Berlin marathon last September",
}
MIXED_CHINESE = {
    "What do I drink every morning?": "我每天早上都要喝一杯乌龙茶",
    "What instrument am I learning?": "我最近在学弹古筝，每周上一次课",
    "Where is my hometown?": "我老家在哈尔滨，冬天特别冷",
    "What car do I drive?": "我开的是一辆白色的比亚迪",
}
MIXED_OTHERS = ["我同事的妹妹在上海当老师", "我朋友对花生过敏", "邻居在准备北京马拉松", "我表哥是一名医生",
                "My cousin drinks green tea all day", "My neighbour's son plays the violin",
                "A friend of mine grew up in Chicago", "My dad drives an old Toyota"]


async def test_a_question_finds_the_fact_stated_in_the_other_language(tmp_path: Path) -> None:
    """In a scope of mixed English and Chinese facts, a Chinese question finds the English fact
    it asks about, and an English question the Chinese one, among same-language near misses
    (e5 scores any two texts of one language higher than a question and its answer across
    languages; the default embedder scores cross-script pairs on their own centred scale)."""
    service = build_service(ServiceSettings(data_dir=tmp_path, long_term_scoring=False))
    scope = Scope(user_id="bilingual-user")
    async with service, AsyncLongTermClient.local(service) as ltm:
        texts = [*MIXED_ENGLISH.values(), *MIXED_CHINESE.values(), *MIXED_OTHERS]
        await ltm.record(scope, [Msg.create(MsgRole.USER, t) for t in texts])
        for query, answer in [*MIXED_ENGLISH.items(), *MIXED_CHINESE.items()]:
            found = [item.text for item in await ltm.search(scope, query, top_k=3)]
            assert answer in found, (query, found)


def test_stored_facts_compare_by_meaning_for_consolidation() -> None:
    # Stored vectors are laid out for queries (script flags, pad): compared with one another raw,
    # unrelated English facts came out 0.7 alike and any two Chinese ones above 0.95, so
    # consolidation (edges at 0.75) would have merged a scope's Chinese facts into one cluster.
    from agentscope_memory.lifecycle.consolidation import clusters
    from agentscope_memory.long_term.embedders import MiniLmE5, load_embedder

    both = load_embedder("minilm+e5")
    assert isinstance(both, MiniLmE5)
    texts = ["I drink green tea every morning.", "Every morning I drink a cup of green tea.",
             "My sister lives in Vancouver.", "I am allergic to peanuts.",
             "我每天早上喝绿茶。", "早上我总是喝一杯绿茶。", "我妹妹住在温哥华。", "我的妹妹搬到了温哥华。",
             "我在一家银行工作。", "周末我喜欢去爬山。", "我的生日是十月三号。"]
    comparable = both.comparable(both.embed(texts))
    similarity = comparable @ comparable.T
    assert abs(float(similarity[0, 0]) - 1.0) < 1e-5
    # English as the layout before script slots compared it (the mean of the two cosines).
    minilm, e5 = both._minilm.embed(texts[:4]), both._e5.embed(texts[:4])
    assert abs(float(similarity[0, 1]) - float(0.5 * minilm[0] @ minilm[1] + 0.5 * e5[0] @ e5[1])) < 1e-4
    # Facts in different languages are never merged into one.
    assert float(abs(similarity[:4, 4:]).max()) < 1e-6
    assert clusters(comparable, 0.75) == [[0, 1], [2], [3], [4, 5], [6, 7], [8], [9], [10]]
    raw = both.embed(texts)
    assert len(clusters(raw, 0.75)) < 5  # what consolidation would have merged without it
