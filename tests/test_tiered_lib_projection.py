"""Context projection of a TIERED memory: modes, automatic detection (English and Chinese),
the total budget, plan/facts/shared sections and facts ranked by similarity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.short_term.tiered.items import MARKER_TEXT
from agentscope_memory.short_term.tiered.projection import (
    ANALYTICAL, CONTEXTUAL, DEBUG, MINIMAL, MODES, STANDARD, ProjectionRequest, detect_mode,
)
from tiered_helpers import config, msg, text

T = "tenant"


@pytest.mark.parametrize("instruction, mode", [
    ("Fix the error in the login handler please", DEBUG),
    ("The build failed with an exception, investigate", DEBUG),
    ("修复登录模块的错误", DEBUG),
    ("Analyse last week's user behaviour data", ANALYTICAL),
    ("evaluate both options and compare their costs", ANALYTICAL),
    ("分析用户行为数据并给出结论", ANALYTICAL),
    ("Continue with the previous task from yesterday", CONTEXTUAL),
    ("继续之前的任务，保持上下文", CONTEXTUAL),
    ("ok go", MINIMAL),
    ("好的", MINIMAL),
    ("Write a haiku about the autumn sea", STANDARD),
    ("请为新用户写一封欢迎邮件，介绍产品的主要功能", STANDARD),
    # English keywords in Chinese text (no spaces around them) count too, whole words only.
    ("帮我fix一下这个bug", DEBUG),
    ("这个exception怎么处理的呢", DEBUG),
    ("请analyze一下这两个方案的优劣", ANALYTICAL),
    ("按照previous的方案写一个版本", CONTEXTUAL),
    ("prefix the names with the team", STANDARD),
    ("set up the debugger for the project", STANDARD),
])
def test_mode_detection(instruction: str, mode: str) -> None:
    assert detect_mode(instruction) == mode


async def _filled(service) -> None:  # type: ignore[no-untyped-def]
    await service.memories.create_memory(T, "p", "TIERED", config(l1_compact_trigger=400, l2_budget=100))
    for i in range(30):
        await service.tiered.add_items(T, "p", [msg(i)], [0.9 if i % 4 == 0 else 0.3])


async def test_every_mode_stays_within_budget_and_ends_with_recent_messages(tmp_path: Path) -> None:
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        await _filled(service)
        sizes = {}
        for mode in MODES:
            for budget in (40, 150, 400, 32_000):
                p = await service.tiered.project(T, "p", ProjectionRequest("next step", budget, mode, True, "1. do it"))
                assert p.tokens <= budget and p.mode == mode and not p.detected
                assert p.tokens == sum(p.sections.values())
                if budget == 150:
                    sizes[mode] = p
        recent = {m: [x for x in p.messages if x.role is MsgRole.USER] for m, p in sizes.items()}
        assert recent[DEBUG][-1].text_content == text(29)
        assert sizes[DEBUG].sections["recent"] > sizes[STANDARD].sections["recent"]
        assert sizes[CONTEXTUAL].sections["recent"] > sizes[STANDARD].sections["recent"]
        assert sizes[ANALYTICAL].sections["facts"] > sizes[STANDARD].sections["facts"]
        assert sizes[MINIMAL].tokens < sizes[STANDARD].tokens
        assert sizes[ANALYTICAL].messages[0].metadata["tiered_section"] == "facts"
        assert sizes[CONTEXTUAL].messages[0].metadata.get("tiered_kind") == "summary"
        assert sizes[STANDARD].messages[0].text_content.startswith("## Plan\n1. do it")
        await service.tiered.add_items(T, "p", [msg(30), msg(31)])  # 416 tokens: L1 compacts
        full = await service.tiered.project(T, "p", ProjectionRequest("next step", 32_000, STANDARD))
        assert any(m.text_content.startswith(MARKER_TEXT) for m in full.messages)
        assert full.messages[-1].text_content == text(31)


async def test_detected_mode_shared_context_and_facts_by_similarity(tmp_path: Path) -> None:
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        await service.memories.create_memory(T, "f", "TIERED", config())
        facts = ["The database password rotates every 30 days.", "Deploys happen on Tuesday mornings.",
                 "The login service fails when the cache is cold."]
        await service.tiered.add_items(T, "f", [Msg.create(MsgRole.USER, f) for f in facts], [0.9, 0.9, 0.9])
        shared = [Msg.create(MsgRole.ASSISTANT, "pool: the release is frozen", name="pool")]
        p = await service.tiered.project(T, "f", ProjectionRequest("fix the login service error", 2000,
                                                                      shared_context=shared))
        assert p.mode == DEBUG and p.detected
        fact_msg = [m for m in p.messages if m.metadata.get("tiered_section") == "facts"][0]
        assert fact_msg.text_content.splitlines()[1] == "- " + facts[2]
        assert any(m.text_content == "pool: the release is frozen" for m in p.messages)
        without = await service.tiered.project(T, "f", ProjectionRequest("fix the login service error", 2000,
                                                                            include_facts=False))
        assert not [m for m in without.messages if m.metadata.get("tiered_section") == "facts"]


async def test_bad_projection_requests_name_the_field(tmp_path: Path) -> None:
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        await service.memories.create_memory(T, "b", "TIERED", config())
        for request, field in [(ProjectionRequest("x", 0), "total_budget"), (ProjectionRequest("x", 10, "LOUD"), "mode"),
                               (ProjectionRequest("x", 10, include_plan=True), "plan")]:
            with pytest.raises(InvalidArgumentError) as info:
                await service.tiered.project(T, "b", request)
            assert info.value.field == field


async def test_a_text_is_a_fact_or_history_never_both(tmp_path: Path) -> None:
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        await _filled(service)
        for mode in MODES:
            p = await service.tiered.project(T, "p", ProjectionRequest("next step", 32_000, mode))
            facts = [m for m in p.messages if m.metadata.get("tiered_section") == "facts"]
            lines = {line[2:] for m in facts for line in m.text_content.splitlines()[1:]}
            others = [m.text_content for m in p.messages if m.metadata.get("tiered_section") != "facts"]
            summaries = [t.split("] ", 1)[1] for t in others if t.startswith("[Session summary #")]
            assert lines, mode
            assert not lines & set(summaries), mode
            working = [m for m in p.messages if m.role is MsgRole.USER]
            # Messages (L1 or L2) may repeat an L2 fact only as the recent conversation itself.
            recent_ids = [m.id for m in working]
            assert len(recent_ids) == len(set(recent_ids)), mode


async def test_a_multi_line_fact_is_one_line_and_hides_no_other_fact(tmp_path: Path) -> None:
    # The facts section is one line a fact; a fact holding line breaks is shown as a JSON string
    # literal. Counting lines as facts made the facts after it count as shown without being
    # shown, and so left them out of the working section as well: they vanished.
    async with build_service(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as service:
        await service.memories.create_memory(T, "m", "TIERED", config())
        facts = [f"事实{i}：第一行\n第二行\nline three of fact {i}" if i % 2 else f"Fact {i}: first line\r\nsecond line"
                 for i in range(8)]
        await service.tiered.add_items(T, "m", [Msg.create(MsgRole.USER, f) for f in facts], [0.9] * len(facts))
        for budget in (200, 300, 2000):  # the first two show some facts as facts, the rest as history
            p = await service.tiered.project(T, "m", ProjectionRequest("事实 fact", budget, STANDARD))
            fact_msgs = [m for m in p.messages if m.metadata.get("tiered_section") == "facts"]
            assert len(fact_msgs) == 1, budget
            lines = fact_msgs[0].text_content.split("\n")[1:]
            assert lines and all(line.startswith('- "') for line in lines), lines
            as_facts = [json.loads(line[2:]) for line in lines if line.endswith('"')]
            assert as_facts and set(as_facts) <= set(facts)
            others = [m.text_content for m in p.messages if "tiered_section" not in m.metadata]
            assert [f for f in facts if f not in as_facts and f not in others] == [], budget
