"""`timeout` is the deadline of what the user called: `get_messages` of a memory that takes
several pages (and any new start of a read the server aborted) is one call, so its pages share
one deadline; each page used to get a whole `timeout` of its own, and a long conversation over
a slow link could take many times the timeout the user set."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole

PAGE_DELAY_S = 0.3  # a slow link, before each page is asked for
TIMEOUT_S = 20.0


def _fill(messages: int) -> list[list[Msg]]:
    return [[Msg.create(MsgRole.USER, f"第{i + j}条") for j in range(min(1000, messages - i))]
            for i in range(0, messages, 1000)]


def _assert_one_deadline(timeouts: list[float]) -> None:
    assert len(timeouts) == 3  # 2500 messages, 1000 a page; over 250 history entries, 100 a page
    # Each page is given what is left of the call's deadline: at least the delay before it less.
    assert timeouts[0] <= TIMEOUT_S
    for earlier, later in zip(timeouts, timeouts[1:], strict=False):
        assert later <= earlier - PAGE_DELAY_S


def test_the_pages_of_get_messages_share_the_calls_deadline(threaded_server) -> None:
    with MemoryClient(threaded_server.address, timeout=TIMEOUT_S) as client:
        client.create_memory("长对话")
        for batch in _fill(2500):
            client.add_messages("长对话", batch)
        timeouts: list[float] = []
        pages = client._stub.GetMessages

        def slow_page(request: Any, **kwargs: Any) -> Any:
            timeouts.append(kwargs["timeout"])
            time.sleep(PAGE_DELAY_S)
            return pages(request, **kwargs)

        client._stub.GetMessages = slow_page
        assert len(client.get_messages("长对话")) == 2500
    _assert_one_deadline(timeouts)


async def test_the_async_clients_pages_share_it_too(server) -> None:
    async with AsyncMemoryClient(server.address, timeout=TIMEOUT_S) as client:
        await client.create_memory("长对话")
        for batch in _fill(2500):
            await client.add_messages("长对话", batch)
        timeouts: list[float] = []
        pages = client._stub.GetMessages

        async def slow_page(request: Any, **kwargs: Any) -> Any:
            timeouts.append(kwargs["timeout"])
            await asyncio.sleep(PAGE_DELAY_S)
            return await pages(request, **kwargs)

        client._stub.GetMessages = slow_page
        assert len(await client.get_messages("长对话")) == 2500
    _assert_one_deadline(timeouts)


async def test_a_long_term_history_of_several_pages_shares_one_deadline(server) -> None:
    scope = Scope(agent_name="助手", user_id="长历史")
    async with AsyncLongTermClient(server.address, timeout=TIMEOUT_S) as client:
        [item] = await client.record(scope, [Msg.create(MsgRole.USER, "用户喜欢绿茶")])
        for i in range(250):  # with the ADD, over 250 entries: 100 a page
            await client.update(item.id, importance=(i % 10) / 10)
        timeouts: list[float] = []
        pages = client._stub.GetLongTermMemoryHistory

        async def slow_page(request: Any, **kwargs: Any) -> Any:
            timeouts.append(kwargs["timeout"])
            await asyncio.sleep(PAGE_DELAY_S)
            return await pages(request, **kwargs)

        client._stub.GetLongTermMemoryHistory = slow_page
        assert len(await client.history(item.id)) >= 251
    _assert_one_deadline(timeouts)
