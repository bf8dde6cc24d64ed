"""PostgreSQL's disk full: a write answers RESOURCE_EXHAUSTED saying so (not INTERNAL with an
incident id), stores nothing of itself, and what was acknowledged before reads back whole.

The database lives in a tablespace on a small tmpfs mounted for the test (root only)."""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Any, Iterator

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import ResourceExhaustedError
from agentscope_memory.message import Msg, MsgRole


@pytest.fixture
def full_dsn(postgres: Any) -> Iterator[str]:
    import psycopg

    from conftest import small_tmpfs
    from postgres_server import _service_user

    with small_tmpfs("6m", "asm-pg-full-") as mount:
        shutil.chown(mount, _service_user())
        name = f"full_{uuid.uuid4().hex[:8]}"
        try:
            with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
                conn.execute(f"CREATE TABLESPACE {name} LOCATION '{mount}'")
                conn.execute(f"CREATE DATABASE {name} TABLESPACE {name}")
            yield postgres.dsn(name)
        finally:
            with psycopg.connect(postgres.dsn(), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                conn.execute(f"DROP TABLESPACE IF EXISTS {name}")


async def test_a_full_disk_answers_resource_exhausted_and_keeps_what_was_stored(server_factory, full_dsn) -> None:
    server = await server_factory(store="postgres", postgres_dsn=full_dsn, long_term_enabled=False)
    async with AsyncMemoryClient(server.address, retries=0) as client:
        await client.create_memory("满")
        stored = []
        with pytest.raises(ResourceExhaustedError) as error:
            for i in range(400):
                # Random enough that PostgreSQL's compression does not shrink it.
                text = f"{i}:" + os.urandom(32_000).hex()
                await client.add_message("满", Msg.create(MsgRole.USER, text))
                stored.append(text)
        assert "PostgreSQL's disk is full" in str(error.value) and "nothing of this call was stored" in str(error.value)
        assert "incident" not in str(error.value)
        assert 10 < len(stored) < 400
        assert [m.text_content for m in await client.get_messages("满")] == stored
