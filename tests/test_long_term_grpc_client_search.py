"""Ranked search from the Python clients (asyncio, blocking, local) and the `long-term search`
command: every score component comes back, weights and filters apply, in English and Chinese."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentscope_memory.client.long_term import AsyncLongTermClient, LongTermClient
from agentscope_memory.client.local import AsyncLocalLongTermClient
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory_server.cli import main

ALICE = Scope(agent_name="助手", user_id="alice")
TEXTS = ["My sister Anna lives in Berlin", "我每天早上喝绿茶", "I play chess on Sundays"]


async def test_asyncio_client_search_returns_every_score(server) -> None:
    async with AsyncLongTermClient(server.address) as ltm:
        for text in TEXTS:
            await ltm.record(ALICE, [Msg.create(MsgRole.USER, text)])
        found = await ltm.search(ALICE, "where does Anna live")
        assert found[0].text == "My sister Anna lives in Berlin"
        s = found[0].scores
        assert s.final == pytest.approx(0.5 * s.semantic + s.dense**2 * (0.2 * s.decay + 0.3 * s.importance))
        assert s.dense > 0 and s.lexical == 1.0
        chinese = await ltm.search(ALICE, "她喝什么茶", top_k=1)
        assert [i.text for i in chinese] == ["我每天早上喝绿茶"]
        only_importance = await ltm.search(ALICE, "Anna", alpha=0.0, beta=0.0, gamma=1.0, top_k=2, ranking="seed")
        assert len(only_importance) == 2 and all(i.scores.final == pytest.approx(i.scores.importance) for i in only_importance)
        assert await ltm.search(ALICE, "Anna", memory_types=["fact"]) == []
        with pytest.raises(InvalidArgumentError, match="alpha"):
            await ltm.search(ALICE, "Anna", alpha=2.0)
        with pytest.raises(TypeError, match="gama"):
            await ltm.search(ALICE, "Anna", gama=1.0)
        with pytest.raises(ValueError, match="ranking 'best'"):
            await ltm.search(ALICE, "Anna", ranking="best")


def test_blocking_client_and_the_command(threaded_server, capsys: pytest.CaptureFixture[str]) -> None:
    with LongTermClient(threaded_server.address) as ltm:
        for text in TEXTS:
            ltm.record(ALICE, [Msg.create(MsgRole.USER, text)])
        assert ltm.search(ALICE, "绿茶")[0].text == "我每天早上喝绿茶"
    common = ["--agent-name", "助手", "--user-id", "alice", "--target", threaded_server.address]
    assert main(["long-term", "search", "chess", "--top-k", "2", *common]) == 0
    out, err = capsys.readouterr()
    header, first = out.splitlines()[:2]
    assert header.startswith("FINAL\tSEMANTIC\tDENSE\tLEXICAL\tDECAY\tIMPORTANCE")
    assert first.endswith("I play chess on Sundays") and "2 results" in err
    assert main(["long-term", "search", "绿茶", "--json", *common]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["memory"] == "我每天早上喝绿茶" and set(rows[0]["scores"]) >= {"final", "dense", "lexical", "decay"}
    assert main(["long-term", "search", "x", "--user-id", "a/../b" * 50, "--target", threaded_server.address]) == 1
    assert "user_id" in capsys.readouterr().err


async def test_local_mode_search(tmp_path) -> None:
    from conftest import make_settings

    async with AsyncLocalLongTermClient(make_settings(tmp_path / "data")) as ltm:
        for text in TEXTS:
            await ltm.record(ALICE, [Msg.create(MsgRole.USER, text)])
        found = await ltm.search(ALICE, "Anna Berlin", top_k=1)
        assert [i.text for i in found] == ["My sister Anna lives in Berlin"] and found[0].scores.final > 0
        assert await ltm.search(ALICE, "Anna", memory_types=["fact"]) == []


async def test_every_client_filters_by_metadata(server, tmp_path) -> None:
    # The RPC has taken metadata_filter_json all along; the clients had no way to send it.
    from conftest import make_settings

    tagged = [("我每天早上喝绿茶", {"主题": "饮食"}), ("I drink green tea at noon", {"主题": "饮食", "day": 2}),
              ("Green tea stains are hard to clean", {"主题": "家务", "tags": ["厨房"]})]

    async def check(ltm) -> None:
        for text, metadata in tagged:
            await ltm.record(ALICE, [Msg.create(MsgRole.USER, text)], metadata=metadata)
        assert {i.text for i in await ltm.search(ALICE, "green tea", metadata={"主题": "饮食"})} == {
            "我每天早上喝绿茶", "I drink green tea at noon"}
        assert [i.text for i in await ltm.search(ALICE, "green tea", metadata={"主题": "饮食", "day": 2.0})] == [
            "I drink green tea at noon"]
        assert [i.text for i in await ltm.search(ALICE, "tea", metadata={"tags": ["厨房"]})] == [tagged[2][0]]
        assert await ltm.search(ALICE, "tea", metadata={"day": True}) == []
        with pytest.raises(InvalidArgumentError, match="metadata_filter_json"):
            await ltm.search(ALICE, "tea", metadata={"k": "\x00"})

    async with AsyncLongTermClient(server.address) as remote:
        await check(remote)
    async with AsyncLocalLongTermClient(make_settings(tmp_path / "local")) as local:
        await check(local)

    def blocking() -> list[str]:
        # In a thread: the server answers on this test's event loop.
        with LongTermClient(server.address) as ltm:
            return [i.text for i in ltm.search(ALICE, "tea", metadata={"主题": "家务"})]

    assert await asyncio.to_thread(blocking) == [tagged[2][0]]
