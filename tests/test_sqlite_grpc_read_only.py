"""A store file the server can no longer write (made read-only, immutable, or on a mount made
read-only while it serves): a write answers FAILED_PRECONDITION naming the file and the reason
(not INTERNAL with an incident id), stores nothing of itself, reads still answer with what was
stored, and once the file is writable again writes go on without a restart.

Root ignores file modes, so the file is made immutable (`chattr +i`); skipped where it cannot be."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import immutable

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import FailedPreconditionError
from agentscope_memory.message import Msg, MsgRole

DB_NAME = "agentscope-memory.sqlite3"


async def test_a_write_to_a_store_that_cannot_be_written_names_the_file_and_keeps_what_was_stored(
        server_factory, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = await server_factory(data_dir=data, long_term_enabled=False)
    async with AsyncMemoryClient(first.address, retries=0) as client:
        await client.create_memory("只读")
        await client.add_message("只读", Msg.create(MsgRole.USER, "第一句"))
    await first.stop(0)
    # A server that started on a writable file, and then the file is not writable any more.
    server = await server_factory(data_dir=data, long_term_enabled=False)
    async with AsyncMemoryClient(server.address, retries=0) as client:
        with immutable(data / DB_NAME):
            with pytest.raises(FailedPreconditionError) as error:
                await client.add_message("只读", Msg.create(MsgRole.USER, "第二句"))
            assert str(data / DB_NAME) in str(error.value) and "cannot be written" in str(error.value)
            assert "nothing of this call was stored" in str(error.value) and "incident" not in str(error.value)
            assert [m.text_content for m in await client.get_messages("只读")] == ["第一句"]
        await client.add_message("只读", Msg.create(MsgRole.USER, "第三句"))
        assert [m.text_content for m in await client.get_messages("只读")] == ["第一句", "第三句"]
