"""The Python clients' update and history of a long-term memory: remote (asyncio and blocking)
and local mode give the same answers, in Chinese and English, and refuse alike."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentscope_memory.client import AsyncLongTermClient, LongTermClient
from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings

SCOPE = Scope(agent_name="助手", user_id="用户-1")


def _changes(history: list) -> list[tuple[str, str | None, str | None]]:
    # ASSESS entries (background importance scoring) may come and go with timing.
    return [(h.event, h.old_text, h.new_text) for h in history if h.event != "ASSESS"]


async def _exercise(ltm) -> None:
    [item] = await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "我喜欢绿茶")])
    changed = await ltm.update(item.id, "我改喝咖啡了", importance=0.9, metadata={"topic": "饮品"})
    assert changed.text == "我改喝咖啡了" and changed.importance == pytest.approx(0.9)
    assert changed.metadata["topic"] == "饮品"
    assert (await ltm.get(item.id)).text == "我改喝咖啡了"
    assert _changes(await ltm.history(item.id)) == [("ADD", None, "我喜欢绿茶"), ("UPDATE", "我喜欢绿茶", "我改喝咖啡了")]
    with pytest.raises(InvalidArgumentError) as refused:
        await ltm.update(item.id, "", importance=None)
    assert refused.value.field == "text"
    with pytest.raises(InvalidArgumentError) as refused:
        await ltm.update(item.id, importance=1.5)
    assert refused.value.field == "importance"
    with pytest.raises(NotFoundError):
        await ltm.history("no-such-memory")
    # Nothing the refusals touched changed.
    assert (await ltm.get(item.id)).text == "我改喝咖啡了"


async def test_remote_async_client(server) -> None:
    async with AsyncLongTermClient(server.address) as ltm:
        await _exercise(ltm)


async def test_local_mode(tmp_path: Path) -> None:
    async with AsyncLongTermClient.local(ServiceSettings(data_dir=tmp_path)) as ltm:
        await _exercise(ltm)


async def test_blocking_client(server) -> None:
    def run() -> None:
        with LongTermClient(server.address) as ltm:
            [item] = ltm.record(SCOPE, [Msg.create(MsgRole.USER, "I like green tea")])
            assert ltm.update(item.id, "I switched to coffee").text == "I switched to coffee"
            assert _changes(ltm.history(item.id))[-1] == ("UPDATE", "I like green tea", "I switched to coffee")

    await asyncio.to_thread(run)
