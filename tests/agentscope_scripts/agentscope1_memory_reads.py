"""Runs inside the AgentScope 1.0.21 virtualenv: RemoteMemory's `get_memory` and `size` (which
ReActAgent calls at every reasoning step) over a 2000-message conversation, while another client
and this one change it. Prints one JSON line: per step, what this client's reads received
(GetMessages calls, messages, bytes, and answers that were pages of the whole list) and whether
what they answered equals what a fresh RemoteMemory reads and what one InMemoryMemory given the
same calls answers."""

import asyncio
import json
import os
from typing import Any, Awaitable, Callable

from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg, TextBlock

from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory
from agentscope_memory.client import AsyncMemoryClient
from counted_channel import counted_memory
from agentscope_memory.message import Msg as StoredMsg
from agentscope_memory.message import MsgRole
from agentscope_memory.message import TextBlock as StoredText

TARGET, KEY = os.environ["GRPC_TARGET"], os.environ.get("MEM0_KEY")
MEMORY_ID = "长对话-读取"
SIZE = 2000


async def view(memory: MemoryBase) -> dict[str, Any]:
    """Everything ReActAgent reads of its memory: all messages whole, those with and without a
    mark, and the size."""
    return {
        "all": [m.to_dict() for m in await memory.get_memory(prepend_summary=False)],
        "提示": [m.id for m in await memory.get_memory(mark="提示", prepend_summary=False)],
        "没有提示": [m.id for m in await memory.get_memory(exclude_mark="提示", prepend_summary=False)],
        "看过": [m.id for m in await memory.get_memory(mark="看过", prepend_summary=False)],
        "size": await memory.size(),
    }


async def main() -> None:
    mine, counter, channel = counted_memory(TARGET, MEMORY_ID, KEY)
    other = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
    java = AsyncMemoryClient(TARGET, api_key=KEY)  # another client that writes no AgentScope JSON
    local = InMemoryMemory()  # the same calls on AgentScope's own memory
    turns = iter(range(100_000))

    def said(text: str, role: str = "user") -> Msg:
        return Msg("用户" if role == "user" else "助手", f"{text}（第{next(turns)}轮）", role)

    async def both(call: Callable[[MemoryBase], Awaitable[Any]], who: MemoryBase) -> None:
        await call(who)
        await call(local)

    def adds(who: MemoryBase, msgs: Msg | list[Msg], **kwargs: Any) -> Callable[[], Awaitable[None]]:
        """A step: `who` adds these messages (made once: the same ids on both memories)."""
        return lambda: both(lambda m: m.add(msgs, **kwargs), who)

    for start in range(0, SIZE, 500):
        await adds(other, [said(f"填充{i}", "user" if i % 2 else "assistant") for i in range(start, start + 499)],
                   allow_duplicates=True)()
        await adds(other, said(f"提示{start}"), marks="提示")()
    await adds(other, Msg("助手", [TextBlock(type="text", text="块一"), TextBlock(type="text", text="块二")],
                          "assistant"))()
    stored = await other.get_memory(prepend_summary=False)

    async def java_adds() -> None:
        written = StoredMsg(id="java-1", name="助手", role=MsgRole.ASSISTANT, timestamp="2026-11-27 10:00:00.000",
                            content=[StoredText("来自Java的回复")])
        await java.add_messages(MEMORY_ID, [written])
        # InMemoryMemory gets the message RemoteMemory reads for it (its id and time kept).
        fresh = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
        await local.add((await fresh.get_memory(prepend_summary=False))[-1])
        await fresh.close()

    async def caller_changes_what_it_got() -> None:
        # InMemoryMemory hands out its own messages; a RemoteMemory reader changing the ones it
        # got must not change what its next read answers.
        for msg in await mine.get_memory(prepend_summary=False):
            if isinstance(msg.content, list):
                msg.content[0]["text"] = "被调用者改了"
                msg.content.append({"type": "text", "text": "多出来的"})

    async def at_once() -> None:
        a, b = said("同时-别人"), said("同时-我")
        await asyncio.gather(mine.get_memory(), other.add(a), mine.add(b), mine.size(), mine.get_memory(mark="提示"))
        # The server's order of the two adds is whichever came first.
        order = [m.id for m in await other.get_memory(prepend_summary=False)][-2:]
        await local.add(sorted([a, b], key=lambda m: order.index(m.id)))

    steps: list[tuple[str, Callable[[], Awaitable[Any]], int]] = [
        ("第一次读", lambda: asyncio.sleep(0), 1),
        ("没有变化", lambda: asyncio.sleep(0), 3),
        ("别人添加一条", adds(other, said("别人说")), 1),
        ("别人添加两条带标记", adds(other, [said("别人又说"), said("别人再说")], marks="提示"), 1),
        ("Java添加一条", java_adds, 1),
        ("别人删除一条", lambda: both(lambda m: m.delete([stored[10].id]), other), 1),
        ("别人改标记", lambda: both(lambda m: m.update_messages_mark("看过", msg_ids=[stored[20].id]), other), 1),
        ("我添加", adds(mine, said("我说", "assistant"), marks="看过"), 1),
        # More than one AddMessages call takes: appended by a rewrite (read, then replaced whole).
        ("我一次添加600条", adds(mine, [said(f"批量{i}") for i in range(600)]), 1),
        ("我删除", lambda: both(lambda m: m.delete([stored[30].id, stored[31].id]), mine), 1),
        ("我给Java的消息加标记", lambda: both(lambda m: m.update_messages_mark("提示", msg_ids=["java-1"]), mine), 1),
        ("我替换标记", lambda: both(lambda m: m.update_messages_mark("旧提示", old_mark="提示"), mine), 1),
        ("我按标记删除", lambda: both(lambda m: m.delete_by_mark("旧提示"), mine), 1),
        ("我改拿到的消息", caller_changes_what_it_got, 1),
        ("同时读写", at_once, 1),
        ("别人清空后添加", lambda: both(lambda m: m.clear(), other), 0),
        ("别人清空后添加", adds(other, said("清空后")), 1),
        ("我清空", lambda: both(lambda m: m.clear(), mine), 1),
    ]
    out: list[dict[str, Any]] = []
    for name, change, views in steps:
        await change()
        if not views:
            continue
        before = dict(counter.counts)
        seen = [await view(mine) for _ in range(views)]
        got = {k: counter.counts[k] - before[k] for k in counter.counts}
        fresh = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
        truth = await view(fresh)
        await fresh.close()
        out.append({"step": name, **got, "size": truth["size"],
                    "as_fresh_read": all(s == truth for s in seen),
                    "as_in_memory_memory": await view(local) == truth})
    await java.close()
    await other.close()
    await channel.close()
    print(json.dumps({"steps": out}, ensure_ascii=False))


asyncio.run(main())
