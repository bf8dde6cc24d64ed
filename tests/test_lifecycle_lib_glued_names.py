"""A Latin name written onto Chinese with no space ("和Bob开会", "跟Alice说") is a keyword of its
text: `\\b` sees no boundary between a Han character and a Latin letter, so the name was missed
(or an identifier ran on into the Chinese, "config.yaml文件"), and a merge of Chinese facts about
Bob that dropped him lost nothing the fidelity check could name."""

from __future__ import annotations

import pytest

from agentscope_memory.lifecycle.consolidation import ConsolidationSettings, Consolidator
from agentscope_memory.lifecycle.keywords import keywords
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term import Scope
from tests.scripted_llm import ScriptedLLM, ScriptedReply
from tests.test_lifecycle_lib_llm_answers import add_facts, embedder, engine  # noqa: F401 (fixtures)


@pytest.mark.parametrize(("text", "wanted", "unwanted"), [
    ("用户下周和Bob开会。", {"bob"}, set()),
    ("跟Alice说用户明天不来。", {"alice"}, set()),
    ("用户和Bob Smith在Acme公司共事。", {"bob smith", "acme"}, set()),
    ("Alice和Bob是用户的同事。", {"alice", "bob"}, {"alice和bob"}),
    ("用户用Python写脚本，模型是GPT4。", {"python", "gpt4"}, set()),
    ("配置在config.yaml文件里，键是max_retries。", {"config.yaml", "max_retries"}, {"config.yaml文件"}),
    # What was found before stays: numbers with their Chinese counters, Chinese segments.
    ("周三下午3点和Bob开会。", {"bob", "3点", "周3", "周三下午"}, {"3"}),
])
def test_a_latin_name_glued_to_chinese_is_a_keyword_of_its_own(text: str, wanted: set[str],
                                                               unwanted: set[str]) -> None:
    found = keywords(text)
    assert wanted <= found and not unwanted & found, found


async def _merge_of(engine, scope: Scope, answer: str, originals: list[str]):  # noqa: F811
    with ScriptedLLM(default=ScriptedReply.text(answer)) as llm:
        client = ChatClient(LlmConfig(llm.base_url, "m", timeout_s=5, max_retries=0))
        report = await Consolidator(engine, client, ConsolidationSettings(threshold=2, similarity=0.6)
                                    ).consolidate_scope("t", scope, dry_run=True)
        await client.close()
    return next(m for m in report.merges if set(originals) <= set(m.original_ids))


async def test_a_merge_of_chinese_facts_that_drops_the_glued_name_is_reported_losing_it(engine) -> None:  # noqa: F811
    scope = Scope("agent", "用户")
    originals = await add_facts(engine, scope, ["用户下周和Bob开会。", "用户要跟Bob开会，时间是下周。", "下周用户和Bob有个会。"])
    dropped = await _merge_of(engine, scope, "用户下周要和同事开会。", originals)
    kept = await _merge_of(engine, scope, "用户下周要和Bob开会。", originals)
    assert dropped.method == kept.method == "llm"
    # The report and the merged fact's metadata name who was lost, and the merge keeping Bob
    # retains more of what the facts said than the one without him (they scored the same).
    assert "bob" in dropped.fidelity.lost_keywords and "bob" not in kept.fidelity.lost_keywords
    assert dropped.fidelity.keyword_retention < kept.fidelity.keyword_retention
    assert dropped.fidelity.composite_score < kept.fidelity.composite_score
