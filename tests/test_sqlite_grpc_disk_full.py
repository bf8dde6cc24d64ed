"""The data dir's disk full: a write answers RESOURCE_EXHAUSTED saying so (not INTERNAL with an
incident id), stores nothing of itself, and what was acknowledged before reads back whole.

The disk is a small tmpfs mounted for the test, so it needs the right to mount (root)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from conftest import small_tmpfs

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import ResourceExhaustedError
from agentscope_memory.message import Msg, MsgRole


@pytest.fixture
def small_disk() -> Iterator[Path]:
    with small_tmpfs("3m", "asm-full-") as mount:
        yield mount


async def test_a_full_disk_answers_resource_exhausted_and_keeps_what_was_stored(server_factory, small_disk) -> None:
    server = await server_factory(data_dir=small_disk / "data", long_term_enabled=False)
    async with AsyncMemoryClient(server.address, retries=0) as client:
        await client.create_memory("满")
        stored = []
        with pytest.raises(ResourceExhaustedError) as error:
            for i in range(200):
                text = f"{i}:" + "字" * 30_000
                await client.add_message("满", Msg.create(MsgRole.USER, text))
                stored.append(text)
        assert "the store's disk is full" in str(error.value) and "nothing of this call was stored" in str(error.value)
        assert "incident" not in str(error.value)
        assert 10 < len(stored) < 200
        assert [m.text_content for m in await client.get_messages("满")] == stored
