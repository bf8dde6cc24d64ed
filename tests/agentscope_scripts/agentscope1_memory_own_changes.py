"""Runs inside the AgentScope 1.0.21 virtualenv: after RemoteMemory's own delete, mark change,
delete by mark or clear, its next add reads nothing of a long conversation (those answers name
the state they leave with an etag); after another client's change in between it reads what
changed and stays correct. Prints one JSON line: per step, the messages GetMessages sent this
client and how many of its answers were pages of the whole list, and whether its copy of the
stored messages (and their ids) is the one a fresh read gives."""

import asyncio
import json
import os
from typing import Any

from agentscope.message import Msg

from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory, _known_id
from agentscope_memory.client import AsyncMemoryClient
from counted_channel import counted_memory

TARGET, KEY = os.environ["GRPC_TARGET"], os.environ.get("MEM0_KEY")
MEMORY_ID = "长对话-自己的改动"
SIZE = 2000


async def main() -> None:
    mine, counter, channel = counted_memory(TARGET, MEMORY_ID, KEY)
    other = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
    fresh = AsyncMemoryClient(TARGET, api_key=KEY)
    turns = iter(range(10_000))

    def said(text: str) -> Msg:
        return Msg("用户", f"{text}（第{next(turns)}轮）", "user")

    for start in range(0, SIZE, 500):
        await other.add([said(f"填充{i}") for i in range(start, start + 500)], allow_duplicates=True)
    stored = await other.get_memory(prepend_summary=False)
    await mine.add(said("我开始说话"))  # the first add reads the whole conversation once

    async def copy_is_current() -> bool:
        read = await fresh.read_messages(MEMORY_ID)
        copy = mine._copy
        return (copy is not None and copy.etag == read.etag and copy.stored == read.messages
                and copy.ids == {_known_id(m) for m in read.messages})

    steps: list[dict[str, Any]] = []

    async def step(name: str, change: Any, *then_add: Msg) -> None:
        await change()
        received, pages = counter.counts["received"], counter.counts["pages"]
        await mine.add(list(then_add) or said(f"{name}之后我说"))
        texts = [m.get_text_content() for m in await other.get_memory(prepend_summary=False)]
        steps.append({"step": name, "received": counter.counts["received"] - received, "pages": counter.counts["pages"] - pages,
                      "copy_is_current": await copy_is_current(), "size": len(texts),
                      "unique": len(texts) == len(set(texts))})

    await step("我删除一条", lambda: mine.delete([stored[3].id]))
    await step("我给两条加标记", lambda: mine.update_messages_mark("重要", msg_ids=[stored[5].id, stored[6].id]))
    await step("我按标记删除", lambda: mine.delete_by_mark("重要"))

    # Another client's add between my change and my next add: my add reads just that message,
    # and skips it when it is among what I add.
    theirs = said("别人插话")

    async def i_delete_then_they_add() -> None:
        await mine.delete([stored[7].id])
        await other.add(theirs)

    await step("我删除后别人添加", i_delete_then_they_add, theirs, said("我接着说"))

    # Another client's delete between my mark change and my next add: my add reads the whole
    # conversation again (as before), since only a read knows what is stored now.
    async def i_mark_then_they_delete() -> None:
        await mine.update_messages_mark("看过", msg_ids=[stored[8].id])
        await other.delete([stored[9].id])

    await step("我标记后别人删除", i_mark_then_they_delete)
    await step("我清空", mine.clear)
    out = {"steps": steps, "marked_left": len(await other.get_memory(mark="重要", prepend_summary=False))}
    await fresh.close()
    await other.close()
    await channel.close()
    print(json.dumps(out, ensure_ascii=False))


asyncio.run(main())
