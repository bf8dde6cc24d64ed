"""Runs inside the AgentScope 1.0.21 virtualenv: RemoteMemory's add skips the ids already stored
(InMemoryMemory's `allow_duplicates=False`) without reading the whole conversation each time.
Prints one JSON line: two clients' adds, deletes, mark changes and clears of one conversation,
step by step, beside the same calls on one shared InMemoryMemory; and how many messages one
client's add receives from the server as the conversation grows."""

import asyncio
import json
import os
from typing import Any

import grpc
from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg

from agentscope_memory.agentscope_adapters.per_loop import PerLoop
from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory
from agentscope_memory.client import AsyncMemoryClient

TARGET, KEY = os.environ["GRPC_TARGET"], os.environ.get("MEM0_KEY")


class ReceivedMessages(grpc.aio.UnaryUnaryClientInterceptor):
    """Counts the messages GetMessages answers carry on one client's channel."""

    def __init__(self) -> None:
        self.count = 0
        self.reads = 0

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        response = await (await continuation(details, request))
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if method.endswith("/GetMessages"):
            self.reads += 1
            self.count += len(response.messages)
        return response


async def _texts(memory: MemoryBase) -> list[str]:
    return [m.get_text_content() for m in await memory.get_memory(prepend_summary=False)]


async def _two_clients(a: MemoryBase, b: MemoryBase, viewer: MemoryBase) -> list[list[Any]]:
    """Each step's name and the conversation after it, as a third client reads it (`a` reading
    it would bring its copy up to date, hiding a stale one)."""
    m1, m2, m3, m4, m5, m6 = (Msg("user", f"第{i}条", "user") for i in range(1, 7))

    async def b_adds_6_during_as_add_of_5() -> None:
        if isinstance(a, RemoteMemory):
            # `b` adds right after `a` has checked the ids, before `a`'s own add reaches the server.
            client = a._client
            add = client.add_messages_with_etags

            async def raced(*args: Any, **kwargs: Any) -> Any:
                client.add_messages_with_etags = add
                await b.add(m6)
                return await add(*args, **kwargs)

            client.add_messages_with_etags = raced
        else:
            await b.add(m6)
        await a.add(m5)

    steps = [
        ("a adds 1, 2", lambda: a.add([m1, m2])),
        ("b adds 3", lambda: b.add(m3)),
        ("a adds 3 (b stored it) and 4", lambda: a.add([m3, m4])),
        ("b adds 4 (a stored it)", lambda: b.add(m4)),
        ("b deletes 1", lambda: b.delete([m1.id])),
        ("a adds 1 (deleted) and 2 (stored)", lambda: a.add([m1, m2])),
        ("b marks all (rewrites the list)", lambda: b.update_messages_mark("看过")),
        ("a adds 2 (stored) and 5", lambda: a.add([m2, m5])),
        ("b deletes by the mark", lambda: b.delete_by_mark("看过")),
        ("a adds 5 (stored) and 4 (deleted)", lambda: a.add([m5, m4])),
        ("b clears", b.clear),
        ("a adds 3 (cleared)", lambda: a.add(m3)),
        ("b adds 3 (a stored it)", lambda: b.add(m3)),
        ("b adds 6 while a adds 5", b_adds_6_during_as_add_of_5),
        ("a adds 6 (b stored it)", lambda: a.add(m6)),
    ]
    outcomes = []
    for name, call in steps:
        await call()
        outcomes.append([name, await _texts(viewer)])
    return outcomes


async def _received_per_add(memory_id: str) -> dict[str, Any]:
    """What one client's adds receive as another client grows the conversation: for each size,
    the messages received by an add after the other client added two, then by an add right
    after its own."""
    counter = ReceivedMessages()
    watched = RemoteMemory(TARGET, memory_id, api_key=KEY)
    channel = grpc.aio.insecure_channel(TARGET, interceptors=[counter])
    watched._clients = PerLoop(lambda: AsyncMemoryClient(channel=channel, api_key=KEY))
    other = RemoteMemory(TARGET, memory_id, api_key=KEY)
    await watched.add(Msg("user", "开始", "user"))
    received: dict[str, Any] = {}
    for size in (10, 100, 1000, 3000):
        stored = await other.size()
        await other.add([Msg("user", f"填充{i}", "user") for i in range(size - stored)], allow_duplicates=True)
        await watched.size()  # the agent reads its memory each turn: the whole conversation
        await other.add([Msg("user", "别人说", "user"), Msg("assistant", "别人答", "assistant")])
        before = counter.count
        await watched.add(Msg("user", f"我在{size}条后说", "user"))
        after_theirs = counter.count - before
        before = counter.count
        await watched.add(Msg("assistant", f"我在{size}条后答", "assistant"))
        received[str(size)] = {"after_their_adds": after_theirs, "after_my_add": counter.count - before}
    received["stored"] = await other.size()
    await channel.close()
    await other.close()
    return received


async def main() -> None:
    shared = InMemoryMemory()
    local = await _two_clients(shared, shared, shared)
    a, b, viewer = (RemoteMemory(TARGET, "py-adds-两个客户端", api_key=KEY) for _ in range(3))
    remote = await _two_clients(a, b, viewer)
    for memory in (a, b, viewer):
        await memory.close()
    print(json.dumps({"local": local, "remote": remote, "received": await _received_per_add("py-adds-计数")},
                     ensure_ascii=False))


asyncio.run(main())
