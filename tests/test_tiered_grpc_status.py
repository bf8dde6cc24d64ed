"""The status view of a TIERED memory: the RPC's numbers, the Prometheus gauges and the CLI box
(`agentscope-memory status MEMORY_ID`)."""

from __future__ import annotations

import json

import httpx
import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.scopes import AsyncScopeClient
from agentscope_memory.client.tiered import AsyncTieredClient, TieredClient
from agentscope_memory.short_term.tiered import TieredConfig
from agentscope_memory.short_term.tiered.service import TierStatus, TierUsage
from agentscope_memory.short_term.tiered.visual import WIDTH, columns, render_status
from agentscope_memory_server.cli import main
from tiered_helpers import ITEM_TOKENS, msg

CONFIG = TieredConfig(l1_compact_trigger=65, l2_budget=100, score_importance=False)


async def test_status_numbers_and_gauges(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = await server_factory(metrics_port=0, long_term_enabled=False)
    async with AsyncTieredClient(server.address) as tiered:
        await tiered.create_memory("g", CONFIG)
        await tiered.add("g", [msg(0)], importances=[0.9])
        for i in range(1, 5):
            await tiered.add("g", [msg(i)])
        status = await tiered.status("g")
        assert [(u.tier, u.items, u.budget) for u in status.tiers] == [(1, 3, 8000), (2, 1, 100), (3, 1, 32000),
                                                                       (4, 0, 100000)]
        assert status.tiers[1].tokens == ITEM_TOKENS and status.summaries == 1 and status.compactions == 1
        # Four messages (52 tokens) replaced by one summary: the ratio is their quotient.
        l3 = await tiered.get_items("g", 3)
        assert status.compaction_ratio == round(2 * ITEM_TOKENS / l3[0].tokens, 4)
    text = await _metrics(server.metrics_port)
    # Sums over the memories this server reported, never one series per tenant or memory.
    assert f'agentscope_memory_tiered_tokens{{tier="L2"}} {float(ITEM_TOKENS)}' in text
    assert 'agentscope_memory_tiered_items{tier="L1"} 3.0' in text
    assert 'agentscope_memory_tiered_budget_tokens{tier="L4"} 100000.0' in text
    assert "agentscope_memory_tiered_summaries 1.0" in text and "agentscope_memory_tiered_memories 1.0" in text
    assert "agentscope_memory_tiered_l4_vectors 0.0" in text
    # Every report observes the histograms (each add reports), the ratio once there is a summary.
    ratios = _sample(text, "agentscope_memory_tiered_compaction_ratio_count")
    # (the one summary's ratio at each report since it was written)
    assert ratios >= 1
    assert _sample(text, "agentscope_memory_tiered_compaction_ratio_sum") == pytest.approx(ratios * status.compaction_ratio)
    assert _sample(text, 'agentscope_memory_tiered_fill_ratio_count{tier="L2"}') >= 5
    async with AsyncTieredClient(server.address) as tiered, AsyncMemoryClient(server.address) as memories:
        await tiered.create_memory("记忆-h", CONFIG)
        await tiered.add("记忆-h", [msg(9)])
        text = await _metrics(server.metrics_port)
        assert "agentscope_memory_tiered_memories 2.0" in text
        assert 'agentscope_memory_tiered_items{tier="L1"} 4.0' in text
        assert "tenant=" not in text and "memory_id=" not in text and "记忆" not in text
        # A deleted memory leaves the sums (by either delete path).
        await memories.delete_memory("g")
        text = await _metrics(server.metrics_port)
        assert "agentscope_memory_tiered_memories 1.0" in text and "agentscope_memory_tiered_summaries 0.0" in text
        assert 'agentscope_memory_tiered_items{tier="L1"} 1.0' in text
        async with AsyncScopeClient(server.address) as scopes:
            await scopes.delete_memory("记忆-h", force=True)
    text = await _metrics(server.metrics_port)
    assert "agentscope_memory_tiered_memories 0.0" in text
    assert 'agentscope_memory_tiered_items{tier="L1"} 0.0' in text


def _sample(text: str, series: str) -> float:
    return next(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(series + " "))


async def _metrics(port: int) -> str:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"http://127.0.0.1:{port}/metrics")).text


def test_cli_draws_the_box(threaded_server, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    with TieredClient(threaded_server.address) as tiered:
        tiered.create_memory("记忆-盒", CONFIG)
        tiered.add("记忆-盒", [msg(i) for i in range(5)], importances=[0.9, None, None, None, None])
    assert main(["status", "记忆-盒", "--target", threaded_server.address]) == 0
    lines = capsys.readouterr().out.rstrip("\n").split("\n")
    assert lines[0] == "╔" + "═" * WIDTH + "╗" and lines[-1] == "╚" + "═" * WIDTH + "╝"
    assert {columns(line) for line in lines} == {WIDTH + 2}
    assert "TIERED MEMORY STATUS · 记忆-盒" in lines[1]
    body = "\n".join(lines)
    assert "L1 Recent" in body and "3 items" in body and "L3 Summary" in body and "1 summaries" in body
    assert "📦 History compacted" in body
    assert main(["status", "记忆-盒", "--target", threaded_server.address, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["memory_id"] == "记忆-盒" and data["tiers"][0]["items"] == 3
    assert main(["status", "missing", "--target", threaded_server.address]) == 1
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("memory_id", ["代理" * 30, "a" + "代理" * 30, "agent-" * 20, "e\u0301" * 60],
                         ids=["wide", "narrow-then-wide", "narrow", "combining"])
def test_a_long_id_is_cut_to_the_box_whatever_its_characters_width(memory_id: str) -> None:
    # A wide (CJK) character cut for the "…" left the title line a column short of the box.
    status = TierStatus(memory_id, [TierUsage(t, 1, 10, 100) for t in (1, 2, 3, 4)], 1, 0, 0.0, 0, False)
    lines = render_status(status).split("\n")
    assert {columns(line) for line in lines} == {WIDTH + 2}
    assert lines[1].rstrip(" ║").endswith("…")
