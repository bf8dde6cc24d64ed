"""Another program holding the sqlite file's write lock (a local-mode client beside the server,
which the data-dir lock allows, or an operator's `sqlite3` shell) longer than SQLite's busy
timeout: a write answers UNAVAILABLE saying so (clients retry it), not INTERNAL."""

from __future__ import annotations

import sqlite3
import time

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import UnavailableError
from agentscope_memory.message import Msg, MsgRole


@pytest.mark.slow
async def test_a_write_lock_held_elsewhere_answers_unavailable(server_factory, tmp_path) -> None:
    server = await server_factory(data_dir=tmp_path / "data", long_term_enabled=False)
    async with AsyncMemoryClient(server.address, retries=0, timeout=60) as client:
        await client.create_memory("锁")
        await client.add_message("锁", Msg.create(MsgRole.USER, "before"))
        other = sqlite3.connect(tmp_path / "data" / "agentscope-memory.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="locked by another program") as error:
                await client.add_message("锁", Msg.create(MsgRole.USER, "while locked"))
            assert "incident" not in str(error.value) and time.monotonic() - started < 30
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert await client.add_message("锁", Msg.create(MsgRole.USER, "after")) == 2
        assert [m.text_content for m in await client.get_messages("锁")] == ["before", "after"]
