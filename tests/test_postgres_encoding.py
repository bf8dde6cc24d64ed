"""Any Unicode text is kept on PostgreSQL as on SQLite: a database of another encoding (LATIN1
refused every Chinese id, SQL_ASCII gave text back as bytes, EUC_CN refuses emoji), each call an
internal error, is refused at start, untouched; and the connection's text is UTF-8 whatever the
environment's PGCLIENTENCODING says."""

from __future__ import annotations

import json

import psycopg
import pytest

from agentscope_memory.client import AsyncMemoryClient, AsyncPoolClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store.base import StoreOpenError


@pytest.mark.parametrize("encoding", ["LATIN1", "SQL_ASCII", "EUC_CN"])
async def test_a_database_of_another_encoding_is_refused_at_start_untouched(server_factory, postgres,
                                                                             encoding: str) -> None:
    name = f"enc_{encoding.lower()}"
    with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    try:
        with pytest.raises(StoreOpenError, match=f"'{name}' has encoding {encoding}; .* needs a UTF8 database"):
            await server_factory(store="postgres", postgres_dsn=postgres.dsn(name))
        with psycopg.connect(postgres.dsn(name)) as conn:
            assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'asm%'").fetchone() == (0,)
    finally:
        with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name}")


async def test_chinese_text_is_kept_whatever_pgclientencoding_says(server_factory, postgres_dsn,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGCLIENTENCODING", "LATIN1")
    server = await server_factory(store="postgres", postgres_dsn=postgres_dsn)
    async with AsyncMemoryClient(server.address) as memories, AsyncPoolClient(server.address) as pools:
        await memories.create_memory("会话", labels={"用户": "爱丽丝 😀"})
        await memories.add_message("会话", Msg.create(MsgRole.USER, "你好"))
        assert (await memories.get_memory("会话")).labels == {"用户": "爱丽丝 😀"}
        await pools.write("团队", "计划", {"步骤": "第一步"})
        assert [(e.key, json.loads(e.content_json)) async for e in pools.iter_entries("团队")] == [("计划", {"步骤": "第一步"})]
