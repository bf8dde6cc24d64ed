"""Replicas on PostgreSQL as operators run them: the tables made once by their owner, servers
logging in as a role granted only reads and writes (or only reads), replicas started while others
write. A schema that is complete is left alone at start: its DDL needs the owner and takes table
locks that queue behind (and deadlock with) the other replicas' writes."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest
from conftest import ServerThread, make_settings

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import FailedPreconditionError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store.base import StoreOpenError


def _role_dsn(postgres: Any, dsn: str, grants: str) -> str:
    """A fresh login role granted `grants` on every table of `dsn`'s database, and its DSN."""
    role = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        conn.execute(f"GRANT {grants} ON ALL TABLES IN SCHEMA public TO {role}")
    return dsn.replace("postgresql://postgres@", f"postgresql://{role}@")


@pytest.fixture
async def made_by_owner(server_factory, postgres_dsn) -> str:
    """A database whose tables its owner's server made, holding memory "m" with one message."""
    owner = await server_factory(store="postgres", postgres_dsn=postgres_dsn)
    async with AsyncMemoryClient(owner.address) as client:
        await client.create_memory("m")
        await client.add_message("m", Msg.create(MsgRole.USER, "你好"))
    await owner.stop(0)
    return postgres_dsn


async def test_a_role_granted_reads_and_writes_serves_every_call(server_factory, postgres, made_by_owner) -> None:
    dsn = _role_dsn(postgres, made_by_owner, "SELECT, INSERT, UPDATE, DELETE")
    server = await server_factory(store="postgres", postgres_dsn=dsn)
    async with AsyncMemoryClient(server.address) as client:
        await client.add_message("m", Msg.create(MsgRole.USER, "again"))
        await client.create_memory("会话")
        assert [m.text_content for m in await client.get_messages("m")] == ["你好", "again"]
        assert [m.memory_id async for m in client.list_memories()] == ["m", "会话"]


async def test_a_role_granted_only_reads_reads_and_a_write_names_the_refusal(
        server_factory, postgres, made_by_owner) -> None:
    dsn = _role_dsn(postgres, made_by_owner, "SELECT")
    server = await server_factory(store="postgres", postgres_dsn=dsn)
    async with AsyncMemoryClient(server.address, retries=0) as client:
        assert [m.text_content for m in await client.get_messages("m")] == ["你好"]
        assert [m.memory_id async for m in client.list_memories()] == ["m"]
        with pytest.raises(FailedPreconditionError, match="permission denied for table asm_.*needs SELECT, INSERT, UPDATE and DELETE on them"):
            await client.add_message("m", Msg.create(MsgRole.USER, "refused"))
        assert [m.text_content for m in await client.get_messages("m")] == ["你好"]


async def test_a_replica_starts_while_another_replicas_write_is_in_flight(tmp_path, made_by_owner) -> None:
    # A write transaction of another replica, still open (a lock on the tables it wrote).
    writer = psycopg.connect(made_by_owner)
    writer.execute("INSERT INTO asm_requests VALUES ('default', 'm', 'r-1', 'f', '{}', 0)")
    writer.execute("INSERT INTO asm_memories SELECT tenant, 'n', kind, config_json, labels_json, create_time,"
                   " update_time, 1 FROM asm_memories WHERE memory_id = 'm'")
    starting = asyncio.create_task(asyncio.to_thread(
        ServerThread, make_settings(tmp_path / "data", store="postgres", postgres_dsn=made_by_owner)))
    try:
        done, _ = await asyncio.wait({starting}, timeout=15)
        assert done, "the replica's start waited for another replica's write transaction"
    finally:
        writer.commit()
        writer.close()
    replica = await starting
    try:
        async with AsyncMemoryClient(replica.address) as client:
            assert [m.memory_id async for m in client.list_memories()] == ["m", "n"]
    finally:
        await asyncio.to_thread(replica.stop)


async def test_a_role_that_may_not_create_the_tables_is_refused_at_start_naming_why(
        server_factory, postgres, postgres_dsn) -> None:
    dsn = _role_dsn(postgres, postgres_dsn, "SELECT, INSERT, UPDATE, DELETE")
    refusal = r"making the asm_ tables \(permission denied for schema public\): start a server logging in as"
    with pytest.raises(StoreOpenError, match=refusal):
        await server_factory(store="postgres", postgres_dsn=dsn)
