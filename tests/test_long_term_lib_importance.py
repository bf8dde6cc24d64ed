"""Importance scoring and query routing: the offline heuristics (English and Chinese) and the
LLM versions against the scripted OpenAI-compatible server, including bad replies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from scripted_llm import ScriptedLLM, ScriptedReply

from agentscope_memory.errors import UnavailableError
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term.domains import DOMAINS
from agentscope_memory.long_term.importance import (
    Assessment,
    HeuristicScorer,
    LlmScorer,
    parse_assessment,
)
from agentscope_memory.long_term.router import HeuristicRouter, LlmRouter

THRESHOLD = 0.7  # the engine's default for storing a fact


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
async def client(llm: ScriptedLLM) -> AsyncIterator[ChatClient]:
    chat = ChatClient(LlmConfig(base_url=llm.base_url, model="scripted", timeout_s=5, max_retries=0))
    yield chat
    await chat.close()


def test_domains_are_exactly_the_six() -> None:
    assert set(DOMAINS) == {
        "general_chat", "user_preferences", "professional_and_academic", "lifestyle_and_interests",
        "social_and_relationships", "tasks_and_schedules",
    }


# --- heuristic scorer --------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("texts", "domain"),
    [
        (["user: I'm allergic to peanuts, please remember that."], "user_preferences"),
        (["user: I switched from tea to coffee last month."], "user_preferences"),
        (["user: My sister Anna is getting married in May."], "social_and_relationships"),
        (["user: I started a new job as a data engineer at a bank."], "professional_and_academic"),
        (["user: Remind me: dentist appointment next Tuesday at 3pm."], "tasks_and_schedules"),
        (["user: 我对花生过敏，请记住。"], "user_preferences"),
        (["user: 我最近从喝茶改成了喝咖啡。"], "user_preferences"),
        (["user: 我姐姐下个月结婚，我是伴娘。"], "social_and_relationships"),
        (["user: 我在一家银行做数据工程师，刚换的工作。"], "professional_and_academic"),
    ],
)
async def test_heuristic_keeps_personal_facts(texts: list[str], domain: str) -> None:
    verdict = await HeuristicScorer().assess([*texts, "assistant: Got it, I will keep that in mind."])
    assert verdict.method == "heuristic"
    assert verdict.importance_score >= THRESHOLD, verdict
    assert verdict.domain == domain
    assert verdict.extracted_fact and verdict.extracted_fact in texts[0]


@pytest.mark.parametrize(
    ("implicit", "explicit"),
    [
        ("Just got back from Lisbon, what a trip.", "I just got back from Lisbon, what a trip."),
        ("Signed up for a pottery class on Mondays.", "I signed up for a pottery class on Mondays."),
        ("刚从成都回来，火锅太好吃了。", "我刚从成都回来，火锅太好吃了。"),
        ("报了个周一的陶艺课。", "我报了个周一的陶艺课。"),
    ],
)
def test_heuristic_reads_a_sentence_without_subject_as_the_speakers_news(implicit: str, explicit: str) -> None:
    scorer = HeuristicScorer()
    dropped, stated = scorer.assess_now([f"user: {implicit}"]), scorer.assess_now([f"user: {explicit}"])
    assert dropped.importance_score == stated.importance_score >= THRESHOLD
    assert dropped.domain == stated.domain and dropped.extracted_fact == implicit


@pytest.mark.parametrize(
    "text",
    ["I'm lactose intolerant, so no milk in my coffee please.", "I react badly to penicillin.",
     "Since March I have gone pescatarian.", "我对海鲜过敏，吃了会起疹子。", "我最近开始吃素了。"],
)
def test_heuristic_keeps_health_and_diet(text: str) -> None:
    verdict = HeuristicScorer().assess_now([f"user: {text}"])
    assert verdict.importance_score >= THRESHOLD and verdict.extracted_fact == text


@pytest.mark.parametrize(
    ("theirs", "mine"),
    [
        ("My sister hates mac and cheese.", "I hate mac and cheese."),
        ("A coworker's son just started a coding course.", "I just started a coding course."),
        ("My neighbour bought an electric car last month.", "I bought an electric car last month."),
        ("我同事特别喜欢爬山。", "我特别喜欢爬山。"),
        ("我一个朋友刚搬到了成都。", "我刚搬到了成都。"),
    ],
)
def test_heuristic_scores_someone_elses_tastes_below_the_users_own(theirs: str, mine: str) -> None:
    scorer = HeuristicScorer()
    other, own = scorer.assess_now([f"user: {theirs}"]), scorer.assess_now([f"user: {mine}"])
    assert other.importance_score < 0.5 <= own.importance_score, (other, own)
    assert other.extracted_fact == "" and own.extracted_fact == mine


@pytest.mark.parametrize(
    "text",
    ["My brother is getting married in June.", "My friend's wedding is on May 3, I need a gift.",
     "我姐姐下个月结婚。", "我爸爸下周要做手术。",
     "My wife's birthday is on June 3.", "My daughter is allergic to peanuts.", "我老婆对花生过敏。"],
)
def test_heuristic_keeps_life_events_and_the_users_household(text: str) -> None:
    assert HeuristicScorer().assess_now([f"user: {text}"]).importance_score >= THRESHOLD


@pytest.mark.parametrize(
    "text",
    ["Give me three fun facts about octopuses.", "Tell me how volcanoes form.", "Write a short poem about my cat.",
     "给我讲讲量子计算的历史。", "帮我写一首关于我家猫的小诗。", "解释一下为什么天空是蓝色的。"],
)
def test_heuristic_scores_a_request_like_a_question(text: str) -> None:
    """A request asks for something; it says little about the user and states no fact."""
    verdict = HeuristicScorer().assess_now([f"user: {text}"])
    assert verdict.importance_score < 0.6 and verdict.extracted_fact == ""


@pytest.mark.parametrize(
    "texts",
    [
        ["user: hi there!", "assistant: Hello! How can I help?"],
        ["user: thanks a lot", "assistant: You're welcome."],
        ["user: 你好呀", "assistant: 你好！有什么可以帮你？"],
        ["user: 谢谢", "assistant: 不客气。"],
        ["user: What is the capital of France?", "assistant: Paris."],
    ],
)
async def test_heuristic_drops_small_talk(texts: list[str]) -> None:
    verdict = await HeuristicScorer().assess(texts)
    assert verdict.importance_score < THRESHOLD, verdict
    assert verdict.extracted_fact == ""


async def test_heuristic_small_talk_is_general_chat_and_is_deterministic() -> None:
    scorer = HeuristicScorer()
    first = await scorer.assess(["user: 哈哈 好的", "assistant: 😊"])
    assert first.domain == "general_chat"
    assert first == await scorer.assess(["user: 哈哈 好的", "assistant: 😊"])
    assert (await scorer.assess([])).importance_score == 0.0


async def test_heuristic_ignores_what_the_assistant_says_about_itself() -> None:
    verdict = await HeuristicScorer().assess(["user: ok", "assistant: I love helping, my favourite task is this."])
    assert verdict.extracted_fact == ""
    assert verdict.importance_score < THRESHOLD


async def test_heuristic_metadata_marks_the_method() -> None:
    verdict = await HeuristicScorer().assess(["I love hiking in the Alps."])
    assert verdict.metadata()["importance_method"] == "heuristic"


# --- LLM scorer --------------------------------------------------------------------------------

async def test_llm_scorer_one_json_call_per_round(llm: ScriptedLLM, client: ChatClient) -> None:
    llm.push(ScriptedReply.json({"importance_score": 0.9, "extracted_fact": "用户从喝茶改成了喝咖啡。",
                                 "domain": "user_preferences"}))
    verdict = await LlmScorer(client).assess(["user: 我现在不喝茶了，改喝咖啡", "assistant: 好的，记下了"])
    assert verdict == Assessment(0.9, "用户从喝茶改成了喝咖啡。", "user_preferences", "llm")
    assert len(llm.chat_requests) == 1
    sent = llm.chat_requests[0].body["messages"]
    assert "我现在不喝茶了" in sent[-1]["content"] and "assistant: 好的" in sent[-1]["content"]
    assert all(d in sent[0]["content"] for d in DOMAINS)


@pytest.mark.parametrize(
    ("reply", "score", "domain"),
    [
        ('```json\n{"importance_score": 0.8, "extracted_fact": "x", "domain": "tasks_and_schedules"}\n```', 0.8,
         "tasks_and_schedules"),
        ('Sure! {"importance_score": "0.75", "extracted_fact": "x", "domain": "User Preferences"}', 0.75,
         "user_preferences"),
        ('{"importance_score": 8, "extracted_fact": "x", "domain": "lifestyle_and_interests"}', 0.8,
         "lifestyle_and_interests"),
    ],
)
def test_llm_reply_parsing_tolerates_common_deviations(reply: str, score: float, domain: str) -> None:
    verdict = parse_assessment(reply)
    assert (verdict.importance_score, verdict.domain, verdict.method) == (score, domain, "llm")


@pytest.mark.parametrize(
    "reply",
    [
        "I think this is important.",
        '{"importance_score": "high", "extracted_fact": "x", "domain": "general_chat"}',
        '{"importance_score": 0.5, "extracted_fact": "x", "domain": "hobbies"}',
        '{"importance_score": 42, "extracted_fact": "x", "domain": "general_chat"}',
        '[0.5, "x", "general_chat"]',
        '{"importance_score": 0.5, "extracted_fact": ["x"], "domain": "general_chat"}',
    ],
)
async def test_llm_bad_reply_falls_back_to_the_heuristic_marked_as_such(
    llm: ScriptedLLM, client: ChatClient, reply: str
) -> None:
    llm.push(ScriptedReply.text(reply))
    texts = ["user: I'm allergic to peanuts, please remember that."]
    verdict = await LlmScorer(client).assess(texts)
    assert verdict.method == "heuristic"
    assert verdict.detail.startswith("LLM importance reply unusable")
    assert verdict.importance_score == (await HeuristicScorer().assess(texts)).importance_score


async def test_llm_bad_reply_without_fallback_is_a_clear_error(llm: ScriptedLLM, client: ChatClient) -> None:
    llm.push(ScriptedReply.text('{"importance_score": 0.5, "domain": "nonsense"}'))
    with pytest.raises(UnavailableError, match="domain 'nonsense' is not one of"):
        await LlmScorer(client, use_fallback=False).assess(["user: hello"])


async def test_llm_transport_failure_propagates_for_the_job_to_retry(llm: ScriptedLLM, client: ChatClient) -> None:
    llm.push(ScriptedReply.error(503))
    with pytest.raises(UnavailableError, match="HTTP 503"):
        await LlmScorer(client).assess(["user: I love tea"])


# --- routers -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("query", "domain"),
    [
        ("hi!", "general_chat"),
        ("Thank you so much", "general_chat"),
        ("你好", "general_chat"),
        ("谢谢啦", "general_chat"),
        ("", "general_chat"),
        ("What drink do I like in the morning?", "user_preferences"),
        ("我喜欢喝什么？", "user_preferences"),
        ("When is my dentist appointment?", "tasks_and_schedules"),
        ("我明天几点开会？", "tasks_and_schedules"),
        ("Where does my sister live?", "social_and_relationships"),
        ("我妈妈叫什么名字？", "social_and_relationships"),
        ("What is my job title at the company?", "professional_and_academic"),
        ("我在哪个大学读的硕士？", "professional_and_academic"),
        ("Which sport did I take up this year?", "lifestyle_and_interests"),
        ("我最近在学什么乐器？钢琴吗", "lifestyle_and_interests"),
        ("Where did we go?", "user_preferences"),  # a question, no cue: recall is not skipped
    ],
)
async def test_heuristic_router(query: str, domain: str) -> None:
    assert await HeuristicRouter().route(query) == domain


async def test_llm_router_uses_the_reply_and_falls_back_on_nonsense(llm: ScriptedLLM, client: ChatClient) -> None:
    llm.push(ScriptedReply.json({"domain": "social_and_relationships"}), ScriptedReply.text("tasks_and_schedules"),
             ScriptedReply.text("no idea"))
    router = LlmRouter(client)
    assert await router.route("我和老王是怎么认识的？") == "social_and_relationships"
    assert await router.route("anything") == "tasks_and_schedules"
    assert await router.route("我喜欢喝什么？") == "user_preferences"  # heuristic fallback
    assert len(llm.chat_requests) == 3
    assert await router.route("   ") == "general_chat"  # no call for an empty query
    assert len(llm.chat_requests) == 3


async def test_llm_router_without_fallback_raises(llm: ScriptedLLM, client: ChatClient) -> None:
    llm.push(ScriptedReply.text('{"domain": 3}'))
    with pytest.raises(UnavailableError, match="routing reply unusable"):
        await LlmRouter(client, use_fallback=False).route("what do I like?")
