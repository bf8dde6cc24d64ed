"""`agentscope-memory migrate store`: a store a real server filled over gRPC on SQLite, copied
into PostgreSQL (and back), then served from there; what an operator relies on while moving."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.agent_state import Slot
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.agent_state import AsyncAgentStateClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.client.pool import AsyncPoolClient
from agentscope_memory.client.scopes import AsyncScopeClient
from agentscope_memory.client.tiered import AsyncTieredClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store.transfer import COPY_MARKER
from agentscope_memory_server.cli import main
from conftest import REPO, ServerProcess

ALICE = Scope(agent_name="助手", user_id="爱丽丝")
SLOT = Slot("爱丽丝", "会话 😀")
FIRST = [Msg.create(MsgRole.USER, f"第{i}条消息 message {i}") for i in range(5)]


async def _fill(address: str) -> dict[str, object]:
    """Something of everything a server keeps; returns what a user reads back."""
    async with AsyncMemoryClient(address) as memories, AsyncLongTermClient(address) as ltm, \
            AsyncPoolClient(address) as pools, AsyncAgentStateClient(address) as states, \
            AsyncTieredClient(address) as tiered, AsyncScopeClient(address) as scopes:
        await memories.create_memory("会话-1", labels={"用户": "爱丽丝"})
        await memories.add_messages("会话-1", FIRST, request_id="req-1")
        await memories.delete_message("会话-1", 0)
        await memories.create_memory("auto", "AUTO_CONTEXT")
        await memories.add_messages("auto", [Msg.create(MsgRole.USER, "hello"), Msg.create(MsgRole.ASSISTANT, "你好")])
        for text in ("My sister Anna lives in Berlin", "我每天早上喝绿茶", "I play chess on Sundays"):
            await ltm.record(ALICE, [Msg.create(MsgRole.USER, text)], {"来源": "chat"})
        await pools.write("团队", "计划", {"step": 1})
        await pools.write("团队", "计划", {"step": 2})
        await pools.write("团队", "notes", ["a", "b"], writer="bob")
        await states.put_value(SLOT, "agent", json.dumps({"name": "助手"}))
        await states.put_list(SLOT, "memory_messages", [json.dumps({"i": i}) for i in range(3)])
        for n in range(2):
            await states.put_value(SLOT, "已删", json.dumps({"n": n}))
        await states.delete_key(SLOT, "已删")
        await tiered.create_memory("层")
        await tiered.add("层", [Msg.create(MsgRole.USER, f"tiered {i} 记忆") for i in range(4)])
        await memories.create_memory("lead")
        await scopes.create_child("lead", "helper")
        await scopes.add_messages("lead", [Msg.create(MsgRole.USER, "给大家 for everyone")], visibility="SHARED")
        return await _read(address)


async def _read(address: str) -> dict[str, object]:
    async with AsyncMemoryClient(address) as memories, AsyncLongTermClient(address) as ltm, \
            AsyncPoolClient(address) as pools, AsyncAgentStateClient(address) as states, \
            AsyncTieredClient(address) as tiered, AsyncScopeClient(address) as scopes:
        described = {d.memory_id: (d.kind, d.message_count, d.version, d.labels)
                     async for d in memories.list_memories()}
        found = await ltm.search(ALICE, "where does Anna live")
        lexical = await ltm.search(ALICE, "chess 绿茶", ranking="lexical")
        entries = await pools.list_entries("团队")
        value = await states.get_value(SLOT, "agent")
        listed = await states.get_list(SLOT, "memory_messages")
        return {
            "memories": described,
            "messages": await memories.get_messages("会话-1"),
            "auto": await memories.get_messages("auto"),
            "long_term": sorted((m.id, m.text, m.metadata) for m in await ltm.list(ALICE)),
            "search": [m.id for m in found],
            "lexical": [m.id for m in lexical],
            "pool": [(e.key, e.content_json, e.version, e.updated_by) for e in entries],
            "pool_events": [(e.sequence, e.key, e.version) async for e in pools.iter_events("团队")],
            "state": (value.json, value.version, listed.items, listed.version),
            "tiers": [[(i.seq, i.kind, i.msg.text_content if i.msg else None) for i in await tiered.get_items("层", t)]
                      for t in (1, 2, 3)],
            "context": [m.text_content for m in await scopes.get_context("helper")],
        }


@pytest.mark.timeout(300)
async def test_a_sqlite_store_moved_to_postgres_serves_the_same(server_factory, postgres_dsn, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    before = await _fill(server.address)
    await server.stop(0)
    assert before["search"][0] == next(i for i, text, _ in before["long_term"] if "Anna" in text)
    assert len(before["lexical"]) == 2

    code = await asyncio.to_thread(main, ["migrate", "store", "--from", str(data), "--to", postgres_dsn, "--progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = {table: int(rows) for table, rows in (line.split() for line in out.splitlines()[:-1])}
    sqlite_file = data / "agentscope-memory.sqlite3"
    assert summary == {table: _rows(sqlite_file, table) for table in summary}
    assert summary["ltm"] == 3 and summary["pool_entries"] == 2 and summary["agent_state_items"] == 3
    assert "every table's row count matches" in out.splitlines()[-1]
    assert "ltm" in err and "row" in err  # a bar per table on stderr

    # No scope fits in the replica's index: searches run in PostgreSQL, on the copied vectors and terms.
    moved = await server_factory(store="postgres", postgres_dsn=postgres_dsn, data_dir=tmp_path / "pg",
                                 long_term_index_max_vectors=0)
    assert await _read(moved.address) == before
    async with AsyncMemoryClient(moved.address) as memories, AsyncLongTermClient(moved.address) as ltm, \
            AsyncPoolClient(moved.address) as pools, AsyncAgentStateClient(moved.address) as states:
        # The counters came along: the next writes take the next positions and versions.
        assert await memories.add_message("会话-1", Msg.create(MsgRole.USER, "迁移之后 after")) == 5
        assert [m.text_content for m in await memories.get_messages("会话-1")][-2:] == ["第4条消息 message 4", "迁移之后 after"]
        # A retry of a request made before the move is still recognised, and not stored again.
        await memories.add_messages("会话-1", FIRST, request_id="req-1")
        assert (await memories.get_memory("会话-1")).message_count == 5
        written = await pools.write("团队", "计划", {"step": 3})
        assert (written.entry.version, written.sequence) == (3, before["pool_events"][-1][0] + 1)
        # A state key deleted before the move goes on from its versions too (no ABA after a move).
        assert await states.keys(SLOT) == [("value", "agent"), ("list", "memory_messages")]
        assert await states.put_value(SLOT, "已删", "{}", expected_version=0) == 3
        added = await ltm.record(ALICE, [Msg.create(MsgRole.USER, "Anna moved to Hamburg")])
        assert len(added) == 1
        assert (await ltm.search(ALICE, "Hamburg"))[0].id == added[0].id


def _rows(path: Path, table: str) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def test_a_non_empty_target_is_refused_naming_the_table(server_factory, postgres_dsn, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    running = await server_factory(store="postgres", postgres_dsn=postgres_dsn, data_dir=tmp_path / "pg")
    async with AsyncMemoryClient(running.address) as client:
        await client.create_memory("already-here")
    await running.stop(0)
    source = await server_factory(data_dir=tmp_path / "data")
    async with AsyncMemoryClient(source.address) as client:
        await client.create_memory("m")
    await source.stop(0)

    code = await asyncio.to_thread(main, ["migrate", "store", "--from", str(tmp_path / "data"), "--to", postgres_dsn])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "table asm_memories is not empty" in err and "Traceback" not in err


async def test_an_interrupted_copy_is_resumed_and_a_finished_one_refused(server_factory, postgres_dsn, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import psycopg

    data = tmp_path / "data"
    source = await server_factory(data_dir=data)
    async with AsyncMemoryClient(source.address) as client:
        for n in range(3):
            await client.create_memory(f"m{n}")
            await client.add_messages(f"m{n}", [Msg.create(MsgRole.USER, str(i)) for i in range(4)])
    await source.stop(0)
    argv = ["migrate", "store", "--from", str(data), "--to", postgres_dsn, "--batch-rows", "2"]
    assert await asyncio.to_thread(main, argv) == 0
    capsys.readouterr()
    # As if it had stopped in the middle of `items`: part of it there, the marker unfinished.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM asm_items WHERE memory_id <> 'm0'")
        marker = json.loads(conn.execute("SELECT value FROM asm_meta WHERE key = %s", (COPY_MARKER,)).fetchone()[0])
        marker.update(finished=False, tables_done=["memories", "list_heads"])
        conn.execute("UPDATE asm_meta SET value = %s WHERE key = %s", (json.dumps(marker), COPY_MARKER))

    assert await asyncio.to_thread(main, argv) == 0
    assert re.search(r"^items +12$", capsys.readouterr().out, re.MULTILINE)
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM asm_items").fetchone()[0] == 12

    assert await asyncio.to_thread(main, argv) == 1
    assert "already holds a finished copy" in capsys.readouterr().err


def test_a_source_a_server_is_running_on_is_refused_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    running = ServerProcess(data)
    try:
        done = subprocess.run([sys.executable, "-m", "agentscope_memory_server", "migrate", "store", "--from", str(data),
                               "--to", str(tmp_path / "copy")], capture_output=True, text=True, cwd=REPO, timeout=120)
    finally:
        running.close()
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (f"agentscope-memory migrate store: the source {data.absolute()} is in use by a running"
                           f" agentscope-memory server (pid {running.proc.pid}); stop it first\n")
    assert not (tmp_path / "copy").exists() or not any((tmp_path / "copy").iterdir())


async def test_postgres_to_postgres_and_back_to_sqlite_keeps_embeddings_and_items(
        server_factory, postgres, postgres_dsn, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    before = await _fill(server.address)
    await server.stop(0)
    other_dsn = postgres.create_database(f"copy_{tmp_path.name[-20:].lower()}")
    for source, target in ((str(data), postgres_dsn), (postgres_dsn, other_dsn), (other_dsn, str(tmp_path / "local"))):
        assert await asyncio.to_thread(main, ["migrate", "store", "--from", source, "--to", target]) == 0
    capsys.readouterr()
    sqlite_file = tmp_path / "local" / "agentscope-memory.sqlite3"
    with sqlite3.connect(sqlite_file) as back, sqlite3.connect(data / "agentscope-memory.sqlite3") as first:
        for query in ("SELECT memory_id, embedding, text, lex_terms FROM ltm ORDER BY memory_id",
                      "SELECT tenant, memory_id, list_name, seq, data FROM items ORDER BY 1, 2, 3, 4",
                      "SELECT * FROM pool_events ORDER BY 1, 2, 3", "SELECT * FROM tiered_items ORDER BY 1, 2, 3"):
            assert back.execute(query).fetchall() == first.execute(query).fetchall()
    again = await server_factory(data_dir=tmp_path / "local")
    assert await _read(again.address) == before


async def test_a_target_a_server_only_started_on_counts_as_empty(server_factory, postgres_dsn, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # An operator may start a server on the new database first: its schema and its own
    # page-token key are no data, and the key is replaced by the source's (tokens stay valid).
    await (await server_factory(store="postgres", postgres_dsn=postgres_dsn, data_dir=tmp_path / "pg")).stop(0)
    source = await server_factory(data_dir=tmp_path / "data")
    async with AsyncMemoryClient(source.address) as client:
        await client.create_memory("m")
        await client.add_messages("m", [Msg.create(MsgRole.USER, str(i)) for i in range(30)])
    async with grpc.aio.insecure_channel(source.address) as channel:
        first = await pb_grpc.MemoryServiceStub(channel).GetMessages(pb.GetMessagesRequest(memory_id="m", page_size=10))
    await source.stop(0)
    assert await asyncio.to_thread(main, ["migrate", "store", "--from", str(tmp_path / "data"), "--to", postgres_dsn]) == 0
    moved = await server_factory(store="postgres", postgres_dsn=postgres_dsn, data_dir=tmp_path / "pg-2")
    async with grpc.aio.insecure_channel(moved.address) as channel:
        second = await pb_grpc.MemoryServiceStub(channel).GetMessages(
            pb.GetMessagesRequest(memory_id="m", page_size=10, page_token=first.next_page_token))
    assert [m.content[0].text.text for m in second.messages] == [str(i) for i in range(10, 20)]


def test_every_table_of_the_store_is_copied() -> None:
    # A table added to the store and not to the copy would be left behind by every migration.
    from agentscope_memory.store.sql.dialect import TABLES as STORE_TABLES
    from agentscope_memory.store.transfer.tables import TABLES

    assert sorted(t for t, _ in TABLES) == sorted(t for t in STORE_TABLES if t != "meta")


async def test_embeddings_of_two_sizes_are_refused_for_postgres(server_factory, postgres_dsn, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    import psycopg

    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    async with AsyncLongTermClient(server.address) as ltm:
        for text in ("My sister Anna lives in Berlin", "I play chess on Sundays"):
            await ltm.record(ALICE, [Msg.create(MsgRole.USER, text)])
    await server.stop(0)
    # As a store that changed embedders keeps them until each scope is searched again.
    with sqlite3.connect(data / "agentscope-memory.sqlite3") as conn:
        conn.execute("UPDATE ltm SET embedding = zeroblob(384 * 4) WHERE rowid = (SELECT min(rowid) FROM ltm)")

    code = await asyncio.to_thread(main, ["migrate", "store", "--from", str(data), "--to", postgres_dsn])
    out, err = capsys.readouterr()
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "embeddings of 384 dimensions (1 rows), 1155 dimensions (1 rows)" in err
    with psycopg.connect(postgres_dsn) as conn:  # refused before anything was created
        assert conn.execute("SELECT to_regclass('asm_memories')").fetchone()[0] is None


async def test_a_second_copy_into_the_same_database_meanwhile_is_refused(server_factory, postgres_dsn, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import psycopg

    from agentscope_memory.store.transfer.copy import COPY_LOCK

    source = await server_factory(data_dir=tmp_path / "data")
    async with AsyncMemoryClient(source.address) as client:
        await client.create_memory("m")
    await source.stop(0)
    argv = ["migrate", "store", "--from", str(tmp_path / "data"), "--to", postgres_dsn]
    with psycopg.connect(postgres_dsn, autocommit=True) as running:  # as the first copy holds it
        running.execute(f"SELECT pg_advisory_lock({COPY_LOCK})")
        assert await asyncio.to_thread(main, argv) == 1
        assert "another copy into postgresql://" in capsys.readouterr().err
    assert await asyncio.to_thread(main, argv) == 0


@pytest.mark.timeout(300)
async def test_a_store_of_a_release_before_pinning_moves_with_its_memories_unpinned(
        server_factory, postgres_dsn, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    async with AsyncLongTermClient(server.address) as ltm:
        for text in ("我对花生过敏", "I play chess on Sundays"):
            await ltm.record(ALICE, [Msg.create(MsgRole.USER, text)])
    await server.stop(0)
    # The long-term table as a release before pinning wrote it.
    with sqlite3.connect(data / "agentscope-memory.sqlite3") as conn:
        conn.execute("ALTER TABLE ltm DROP COLUMN pinned")
    code = await asyncio.to_thread(main, ["migrate", "store", "--from", str(data), "--to", postgres_dsn])
    out, err = capsys.readouterr()
    assert code == 0, err
    moved = await server_factory(store="postgres", postgres_dsn=postgres_dsn, data_dir=tmp_path / "pg")
    async with AsyncLongTermClient(moved.address) as ltm:
        listed = await ltm.list(ALICE)
        assert sorted((m.text, m.pinned) for m in listed) == [("I play chess on Sundays", False), ("我对花生过敏", False)]
        allergy = next(m for m in listed if m.text == "我对花生过敏")
        assert (await ltm.update(allergy.id, pinned=True)).pinned
        assert (await ltm.get(allergy.id)).pinned
