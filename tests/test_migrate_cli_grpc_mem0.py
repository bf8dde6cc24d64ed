"""`agentscope-memory migrate mem0`: the earlier mem0 layout moved into a store on request, with a
bar counting points, then served by a server that finds nothing more to migrate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory_server.cli import main
from mem0_layout import write_mem0_layout

ALICE = Scope(agent_name="Assistant", user_id="alice")


async def test_migrate_mem0_moves_every_point_into_the_given_store(server_factory, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old"
    layout = await write_mem0_layout(old)
    new = tmp_path / "new"

    argv = ["migrate", "mem0", "--from", str(old / "mem0"), "--to", str(new), "--progress"]
    assert await asyncio.to_thread(main, argv) == 0
    out, err = capsys.readouterr()
    assert out == f"moved 3 long-term memories from {old / 'mem0'} into {new}\n"
    assert "mem0 points" in err and "3/3" in err

    # Again: the store's marker says it is done, nothing is read or stored twice.
    assert await asyncio.to_thread(main, argv) == 0
    assert "already holds the memories of a mem0 migration" in capsys.readouterr().out

    server = await server_factory(data_dir=new)
    async with AsyncLongTermClient(server.address) as ltm:
        listed = await ltm.list(ALICE)
        assert {(m.id, m.text) for m in listed} == {(layout.kept[0].id, "I like green tea"), (layout.kept[1].id, "好的，记住了")}
        assert [(e.event, e.new_text) for e in await ltm.history(layout.kept[0].id)] == [
            ("ADD", "I like tea"), ("UPDATE", "I like green tea")]
        assert [m.id for m in await ltm.search(ALICE, "what do I drink")][0] == layout.kept[0].id
    assert [m.id for m in await server.service.long_term.list("tenant-b", Scope(user_id="bob"))] == [layout.other[0].id]


async def test_a_directory_without_mem0_data_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = await asyncio.to_thread(main, ["migrate", "mem0", "--from", str(tmp_path / "nothing"), "--to", str(tmp_path / "new")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert f"{tmp_path / 'nothing'} holds no mem0 data of an earlier version" in err

