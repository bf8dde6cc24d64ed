"""With an LLM configured, a round that reaches the fact threshold has its facts extracted by
mem0's own extraction prompt (mem0.configs.prompts, the installed mem0), shown the scope's
most similar existing memories, against the scripted OpenAI-compatible server; the facts land in
the server's store. Reruns do not extract twice; an unusable reply keeps the scorer's fact."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_llm import ScriptedLLM, ScriptedReply

from agentscope_memory.jobs import Job, JobRunner
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.extraction import Mem0Extractor, parse_facts
from agentscope_memory.long_term.hybrid.scoring import RoundScorer
from agentscope_memory.long_term.importance import LlmScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store import open_store

VERDICT = {"importance_score": 0.9, "extracted_fact": "The user drinks coffee", "domain": "user_preferences"}
MEM0_REPLY = {"memory": [
    {"id": "0", "text": "The user switched from tea to coffee last month", "attributed_to": "user",
     "linked_memory_ids": ["0"]},
    {"id": "1", "text": "用户每天早上喝一杯咖啡", "attributed_to": "user"},
]}


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
async def chat(llm: ScriptedLLM) -> AsyncIterator[ChatClient]:
    client = ChatClient(LlmConfig(base_url=llm.base_url, model="scripted", timeout_s=10, max_retries=0))
    yield client
    await client.close()


@pytest.fixture
async def setup(tmp_path: Path, embedder: MiniLMEmbedder, chat: ChatClient) -> AsyncIterator[Any]:
    store = open_store("sqlite", tmp_path)
    engine = HybridEngine(store, lambda: embedder, scorer=LlmScorer(chat), router=HeuristicRouter(),
                          settings=EngineSettings())
    engine.extractor = Mem0Extractor(chat)
    jobs = JobRunner(store)
    engine.attach_jobs(jobs)
    yield engine, jobs
    await engine.close()
    await store.close()


def user(text: str) -> Msg:
    return Msg.create(MsgRole.USER, text)


async def _facts(engine: HybridEngine, scope: Scope) -> list[Any]:
    return sorted((i for i in await engine.list("t", scope) if i.memory_type == "fact"), key=lambda i: i.text)


async def test_facts_come_from_mem0_shown_the_similar_memories(setup, llm: ScriptedLLM) -> None:
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT

    engine, jobs = setup
    scope = Scope(agent_name="Friday", user_id="alice")
    [tea] = await engine.record("t", scope, [user("I like green tea")])
    llm.push(ScriptedReply.json({"importance_score": 0.3, "extracted_fact": "", "domain": "user_preferences"}))
    assert await jobs.run_due() == 1
    assert llm.chat_requests and len(llm.chat_requests) == 1  # below the threshold: no extraction

    llm.push(ScriptedReply.json(VERDICT), ScriptedReply.json(MEM0_REPLY))
    recorded = await engine.record("t", scope, [user("I switched from tea to coffee last month"),
                                                Msg.create(MsgRole.ASSISTANT, "Noted, coffee it is")])
    assert await jobs.run_due() == 1
    extraction = llm.chat_requests[-1].body
    system, prompt = extraction["messages"][0]["content"], extraction["messages"][1]["content"]
    assert system == ADDITIVE_EXTRACTION_PROMPT  # mem0's own prompt, user and agent scope
    assert extraction["response_format"] == {"type": "json_object"}
    assert "I like green tea" in prompt and "user: I switched from tea to coffee last month" in prompt
    assert "assistant: Noted, coffee it is" in prompt

    facts = await _facts(engine, scope)
    assert [f.text for f in facts] == ["The user switched from tea to coffee last month", "用户每天早上喝一杯咖啡"]
    first = facts[0]
    assert first.metadata["extracted_by"] == "mem0" and first.metadata["attributed_to"] == "user"
    assert first.metadata["linked_memory_ids"] == [tea.id]  # mem0's "0" is the memory it was shown first
    assert first.importance == 0.9 and first.domain == "user_preferences"
    assert sorted(first.source["memory_ids"]) == sorted(i.id for i in recorded)

    # A rerun of the round's job (a runner died after storing) neither asks mem0 again nor duplicates.
    calls = len(llm.chat_requests)
    llm.push(ScriptedReply.json(VERDICT), ScriptedReply.json({"memory": [{"id": "0", "text": "something else"}]}))
    await RoundScorer(engine).run(Job("again", "t", "long_term.score_round", {"memory_ids": [i.id for i in recorded]}, 2))
    assert len(llm.chat_requests) == calls + 1  # the scoring call only
    assert [f.text for f in await _facts(engine, scope)] == [f.text for f in facts]


async def test_an_agent_only_scope_gets_mem0s_agent_suffix(setup, llm: ScriptedLLM) -> None:
    from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT, AGENT_CONTEXT_SUFFIX

    engine, jobs = setup
    llm.push(ScriptedReply.json(VERDICT), ScriptedReply.json({"memory": []}))
    await engine.record("t", Scope(agent_name="Friday"), [user("Always answer in French")])
    assert await jobs.run_due() == 1
    assert llm.chat_requests[-1].body["messages"][0]["content"] == ADDITIVE_EXTRACTION_PROMPT + AGENT_CONTEXT_SUFFIX
    # mem0 found nothing new: no fact, not even the scorer's.
    assert await _facts(engine, Scope(agent_name="Friday")) == []


async def test_an_unusable_mem0_reply_keeps_the_scorers_fact(setup, llm: ScriptedLLM) -> None:
    engine, jobs = setup
    scope = Scope(user_id="bob")
    llm.push(ScriptedReply.json(VERDICT), ScriptedReply.text("I think the user likes coffee."))
    await engine.record("t", scope, [user("I drink coffee now")])
    assert await jobs.run_due() == 1
    [fact] = await _facts(engine, scope)
    assert fact.text == "The user drinks coffee" and fact.metadata["extracted_by"] == "scorer"


def test_parse_facts_maps_positions_and_drops_what_is_not_a_fact() -> None:
    reply = ('```json\n{"memory": [{"id": "0", "text": " A ", "linked_memory_ids": ["1", "9", "m-x", 0]},'
             ' {"id": "1", "text": ""}, {"text": 3}, "junk", {"id": "2", "text": "B", "attributed_to": 5}]}\n```')
    facts = parse_facts(reply, ["m-a", "m-b"])
    assert facts is not None
    assert [(f.text, f.linked_memory_ids, f.attributed_to) for f in facts] == [("A", ("m-b", "m-a"), ""), ("B", (), "")]
    assert parse_facts("not json", []) is None
    assert parse_facts('{"facts": []}', []) is None
    assert parse_facts('[1, 2]', []) is None


async def test_the_service_uses_mem0_extraction_only_with_an_llm_and_the_setting(tmp_path: Path, llm: ScriptedLLM) -> None:
    from agentscope_memory.service import ServiceSettings
    from agentscope_memory.service.assembly import build_long_term

    store = open_store("sqlite", tmp_path)
    try:
        cases = [({}, False), ({"llm_base_url": llm.base_url}, True),
                 ({"llm_base_url": llm.base_url, "long_term_fact_extraction": "scorer"}, False)]
        for extra, expected in cases:
            settings = ServiceSettings(data_dir=tmp_path, long_term_embedder="minilm", **extra)
            engine = build_long_term(settings, store, JobRunner(store))
            assert (getattr(engine, "extractor", None) is not None) is expected, extra
    finally:
        await store.close()
