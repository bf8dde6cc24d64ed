"""Numbers in Chinese numerals (下午三点, 五月三日, 星期三, 一百五十元) are numbers to the fidelity
check that guards reflections and merges, as digits are: a model's reflection that drops the
time or the day is refused (the offline one, which says them, stands), and one that writes them
in digits keeps them. Before, only digits counted: "用户每周三和张经理开会，生日在五月。" passed
for "每周三下午三点开会" and "生日是五月三日", and the facts, the only place the time and the day
were, left recall."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentscope_memory.client.lifecycle_reflect import AsyncReflectionClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.lifecycle.keywords import numbers
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from scripted_llm import ScriptedLLM, ScriptedReply

FACTS = ["用户每周三下午三点和张经理开会。", "用户的生日是五月三日。"]


@pytest.mark.parametrize(("text", "expected"), [
    ("用户每周三下午三点和张经理开会。", {"周3", "3点"}),
    ("星期三下午3点", {"周3", "3点"}),
    ("生日是五月三日，二〇二六年", {"5月", "3日", "2026年"}),
    ("2026年5月3号", {"2026年", "5月", "3日"}),
    ("房租一百五十元，住第十二层，有两个孩子", {"150元", "第12层", "2个"}),
    ("三万五千人", {"35000人"}),
    # Words, not numbers: no counter, or an article before one.
    ("我们一起去，十分重要，千万别忘，有一个朋友", set()),
    ("door code 4711 at 7:15 in 2023", {"4711", "7:15", "2023"}),
])
def test_numbers_in_chinese_numerals_are_numbers_with_what_they_count(text: str, expected: set[str]) -> None:
    assert numbers(text) == expected


async def _facts(memories: AsyncLongTermClient, scope: Scope, count: int) -> None:
    deadline = time.monotonic() + 60
    while len([i for i in await memories.list(scope) if i.memory_type == "fact"]) < count:
        assert time.monotonic() < deadline, "the facts were not extracted"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(("answer", "method"), [
    ("用户每周三和张经理开会，生日在五月。", "extractive"),  # the time and the day are gone
    ("用户每周三下午3点与张经理开会，生日是5月3日。", "llm"),  # the same numbers, in digits
], ids=["drops-numbers", "digits"])
async def test_a_reflection_must_keep_numbers_written_in_chinese(server_factory, answer: str, method: str) -> None:
    with ScriptedLLM() as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False,
                                      long_term_fact_extraction="scorer")
        scope = Scope("助手", "张三")
        async with AsyncLongTermClient(server.address, timeout=60) as memories, \
                AsyncReflectionClient(server.address, timeout=60) as lifecycle:
            for fact in FACTS:
                llm.push(ScriptedReply.json({"importance_score": 0.9, "extracted_fact": fact, "domain": "user_preferences"}))
                await memories.record(scope, [Msg.create(MsgRole.USER, f"请记住：{fact}谢谢！")])
            await _facts(memories, scope, len(FACTS))

            llm.push(ScriptedReply.text(answer))
            result = await lifecycle.trigger_reflection(scope, importance_threshold=1.0)
            assert result.reflection is not None and result.method == method
            text = result.reflection.text
            assert text == (answer if method == "llm" else " ".join(FACTS))
            found = await memories.search(scope, "我每周几点和张经理开会？", memory_types=["reflection"])
            assert [i.id for i in found] == [result.reflection.id]
            assert ("下午三点" in found[0].text or "下午3点" in found[0].text) and ("五月三日" in text or "5月3日" in text)


DOOR_CODE = ["用户公寓的门禁密码是4711。", "用户的公寓门禁密码为4711。", "打开用户公寓的门，密码是4711。"]


async def test_a_merge_that_makes_up_a_date_is_refused_and_recall_keeps_the_facts(server_factory) -> None:
    with ScriptedLLM() as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0, lifecycle_reflection_enabled=False,
                                      long_term_fact_extraction="scorer")
        scope = Scope("助手", "李四")
        async with AsyncLongTermClient(server.address, timeout=60) as memories, \
                AsyncReflectionClient(server.address, timeout=60) as lifecycle:
            for fact in DOOR_CODE:
                llm.push(ScriptedReply.json({"importance_score": 0.9, "extracted_fact": fact, "domain": "user_preferences"}))
                await memories.record(scope, [Msg.create(MsgRole.USER, f"请记住：{fact}谢谢！")])
            await _facts(memories, scope, len(DOOR_CODE))

            # The code is kept; the day it "changed" is nowhere in the facts.
            llm.push(ScriptedReply.text("用户公寓的门禁密码是4711，三月五日改过。"))
            report = await lifecycle.consolidate(scope, threshold=2, similarity=0.6)
            [merge] = report.merges
            assert merge.method == "llm" and merge.fidelity.composite_score >= 0.5 and not merge.fidelity.passed
            assert merge.fidelity.invented_numbers == ["3月", "5日"] and not merge.applied
            assert report.merged == 0 and report.failed_fidelity == 1
            found = await memories.search(scope, "门禁密码是多少？", memory_types=["fact"])
            assert sorted(i.text for i in found) == sorted(DOOR_CODE)
