"""What the lifecycle stores of an LLM's merge or reflection is the note itself: a preamble
("Here is the merged note:", "以下是合并后的记忆："), a heading, a code fence, quotes and a
reasoning model's <think> block were stored word for word. The long-term LLM scorer, router and
mem0 extraction read their JSON after a <think> block too: one holding braces broke it."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest

from agentscope_memory.errors import UnavailableError
from agentscope_memory.lifecycle.compressed import CompressedSearch
from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.reflection import Reflector
from agentscope_memory.lifecycle.summaries import clean_answer
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.extraction import parse_facts
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.importance import HeuristicScorer, parse_assessment
from agentscope_memory.long_term.router import HeuristicRouter, LlmRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermRow
from tests.scripted_llm import ScriptedLLM, ScriptedReply

DOOR_CODE = {
    "en": ["The door code of the user's flat is 4711.", "The user's flat has the door code 4711.",
           "To open the user's flat, the door code is 4711.", "The user's flat door opens with code 4711."],
    "zh": ["用户公寓的门禁密码是4711。", "用户的公寓门禁密码为4711。", "打开用户公寓的门，密码是4711。", "用户公寓门的密码：4711。"],
}
NOTE = {"en": "The user's flat door code is 4711.", "zh": "用户公寓的门禁密码是4711。"}
# A reasoning model's thought holds braces and a number the originals never state.
THOUGHT = "<think>The notes repeat {code: 4711}; step 2 is to drop the repetition.</think>\n"
FRAMED = {
    "en": [f"Here is the merged note: {NOTE['en']}",
           f"Sure! Here's the merged note:\n\n{NOTE['en']}",
           f"## Merged note\n{NOTE['en']}",
           f'{THOUGHT}"{NOTE["en"]}"',
           f"Sure! Here is the merged note:\n```text\n{NOTE['en']}\n```",
           f"**Merged note:** {NOTE['en']}"],
    "zh": [f"以下是合并后的记忆：{NOTE['zh']}",
           f"好的，以下是合并后的记忆：\n{NOTE['zh']}",
           f"### 合并后的记忆\n{NOTE['zh']}",
           f"{THOUGHT}“{NOTE['zh']}”",
           f"```\n{NOTE['zh']}\n```",
           f"「{NOTE['zh']}」"],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_clean_answer_takes_off_what_frames_the_note(lang: str) -> None:
    for framed in FRAMED[lang]:
        assert clean_answer(framed) == NOTE[lang], framed


@pytest.mark.parametrize("text", [
    "The user lives in Lisbon.", "用户住在上海，在阿里巴巴工作。", "The user's note: call Bob at 3 pm.",
    '"Lisbon" is where the user lives, says "Bob".', "用户说：“明天下午三点开会”。",
])
def test_clean_answer_leaves_a_plain_note_whole(text: str) -> None:
    assert clean_answer(text) == text


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
async def engine(tmp_path, embedder) -> AsyncIterator[HybridEngine]:
    store = open_store("sqlite", tmp_path)
    engine = HybridEngine(store, lambda: embedder, scorer=HeuristicScorer(), router=HeuristicRouter(),
                          settings=EngineSettings(scoring=False))
    await engine.open()
    yield engine
    await engine.close()
    await store.close()


async def add_facts(engine: HybridEngine, scope: Scope, texts: list[str]) -> list[str]:
    now = time.time()
    rows = [LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                        user_id=scope.user_id, run_name=scope.run_name, text=t, lex_terms=" ".join(tokenize(t)),
                        memory_type="fact", importance=0.8, importance_method="user", created=now, updated=now,
                        last_accessed=now, content_hash=content_hash(t)) for t in texts]
    return [r.memory_id for r in await engine.insert("t", scope, rows)]


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_llm_merge_is_stored_without_its_preamble_and_thinking(engine, lang) -> None:
    scope = Scope("agent", "用户")
    originals = await add_facts(engine, scope, DOOR_CODE[lang])
    # The thought first: its "2" was a number none of the originals holds, so the merge failed.
    framed = THOUGHT + FRAMED[lang][1]
    with ScriptedLLM(default=ScriptedReply.text(framed)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, ConsolidationSettings(threshold=2, similarity=0.6)
                                    ).consolidate_scope("t", scope)
        await client.close()
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.method == "llm" and merge.fidelity.passed and merge.applied
    assert merge.text == NOTE[lang]
    assert (await engine.rows("t", [merge.memory_id]))[0].text == NOTE[lang]


async def test_an_llm_answer_of_nothing_but_framing_merges_offline(engine) -> None:
    scope = Scope("agent", "u")
    originals = await add_facts(engine, scope, DOOR_CODE["zh"])
    with ScriptedLLM(default=ScriptedReply.text("<think>{好的}</think>好的！以下是合并后的记忆：")) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, ConsolidationSettings(threshold=2, similarity=0.6)
                                    ).consolidate_scope("t", scope)
        await client.close()
    merge = next(m for m in report.merges if set(originals) <= set(m.original_ids))
    assert merge.method == "extractive" and "4711" in merge.text and "以下" not in merge.text


REFLECTION_FACTS = {
    "en": ["The user lives in Lisbon and works at Acme Corp.", "The user is allergic to peanuts.",
           "The user plans a trip to Kyoto in April."],
    "zh": ["用户住在上海，在阿里巴巴工作。", "用户对花生过敏。", "用户计划四月去京都旅行。"],
}
REFLECTION = {
    "en": "The user, based in Lisbon at Acme Corp, is allergic to peanuts and plans a trip to Kyoto in April.",
    "zh": "用户住在上海，在阿里巴巴工作，对花生过敏，计划四月去京都旅行。",
}
REFLECTION_FRAMED = {
    "en": "<think>Three facts: {home, work, trip}.</think>Certainly! Here is the insight:\n\n" + REFLECTION["en"],
    "zh": "<think>三条事实：{住处, 工作, 旅行}。</think>好的，以下是反思：\n" + REFLECTION["zh"],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_llm_reflection_is_stored_without_its_preamble_and_thinking(engine, lang) -> None:
    scope = Scope("agent", "u")
    await add_facts(engine, scope, REFLECTION_FACTS[lang])
    with ScriptedLLM(default=ScriptedReply.text(REFLECTION_FRAMED[lang])) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        result = await Reflector(engine, client).reflect("t", scope, min_facts=3, importance_threshold=1.0)
        await client.close()
    assert result.reflection is not None and result.method == "llm"
    assert result.reflection.text == REFLECTION[lang]


async def test_a_compressed_recall_is_given_without_its_preamble_and_thinking(engine) -> None:
    scope = Scope("agent", "u")
    await add_facts(engine, scope, REFLECTION_FACTS["zh"])
    answer = "<think>问题是住处 {上海}。</think>\n好的！以下是摘要：\n\n**用户住在上海，对花生过敏。**"
    with ScriptedLLM(default=ScriptedReply.text(answer)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        _, _, summary = await CompressedSearch(engine, client).search("t", scope, "用户住在哪里", min_results=1)
        await client.close()
    assert summary is not None and summary.method == "llm" and summary.summary == "用户住在上海，对花生过敏。"


def test_the_scorers_json_is_read_after_a_think_block_holding_braces() -> None:
    reply = ('<think>The user states a plan {a trip}; maybe {"importance_score": 0.1}? No.</think>\n'
             '{"importance_score": 0.8, "extracted_fact": "用户四月去京都", "domain": "tasks_and_schedules"}')
    verdict = parse_assessment(reply)
    assert (verdict.importance_score, verdict.extracted_fact, verdict.domain) == (0.8, "用户四月去京都", "tasks_and_schedules")


def test_mem0_extraction_is_read_after_a_think_block_holding_braces() -> None:
    reply = '<think>Existing: {"id": "0"}. New: the trip.</think>\n{"memory": [{"id": "0", "text": "用户四月去京都"}]}'
    facts = parse_facts(reply, [])
    assert facts is not None and [f.text for f in facts] == ["用户四月去京都"]


async def test_the_llm_router_reads_its_domain_after_a_think_block_holding_braces() -> None:
    reply = '<think>Options: {general_chat, user_preferences}.</think>\n{"domain": "social_and_relationships"}'
    with ScriptedLLM(default=ScriptedReply.text(reply)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        try:
            assert await LlmRouter(client, use_fallback=False).route("我和老王是怎么认识的？") == "social_and_relationships"
        except UnavailableError as exc:  # the old reading: the braces of the thought broke the JSON
            pytest.fail(str(exc))
        finally:
            await client.close()
