"""Runs inside the AgentScope 1.0.21 virtualenv: on a 2000-message conversation, RemoteMemory's
delete, delete_by_mark and update_messages_mark, and the same calls on AgentScope's own
InMemoryMemory. Prints one JSON line: per step, both answers, the calls RemoteMemory made and
the bytes it sent and received (every message of every call on its channel, streams too), and
at the end what each memory holds (texts per mark)."""

import asyncio
import json
import os
from collections import Counter
from typing import Any

import grpc
from agentscope.memory import InMemoryMemory, MemoryBase
from agentscope.message import Msg

from agentscope_memory.agentscope_adapters.per_loop import PerLoop
from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory
from agentscope_memory.client import AsyncMemoryClient

TARGET, KEY = os.environ["GRPC_TARGET"], os.environ.get("MEM0_KEY")
MEMORY_ID = "两千条-按标记"
SIZE = 2000


def _method(details: Any) -> str:
    method = details.method.decode() if isinstance(details.method, bytes) else details.method
    return method.rsplit("/", 1)[-1]


class WireCounter:
    """The calls on one channel and the serialized bytes of every message they sent and got
    (`interceptors()` for the channel: gRPC files an interceptor under one kind only)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.sent = 0
        self.received = 0

    def interceptors(self) -> list[Any]:
        counter = self

        class Unary(grpc.aio.UnaryUnaryClientInterceptor):
            async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
                counter.calls[_method(details)] += 1
                counter.sent += request.ByteSize()
                response = await (await continuation(details, request))
                counter.received += response.ByteSize()
                return response

        class ServerStream(grpc.aio.UnaryStreamClientInterceptor):
            async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
                counter.calls[_method(details)] += 1
                counter.sent += request.ByteSize()
                call = await continuation(details, request)

                async def responses() -> Any:
                    async for response in call:
                        counter.received += response.ByteSize()
                        yield response
                return responses()

        class ClientStream(grpc.aio.StreamUnaryClientInterceptor):
            async def intercept_stream_unary(self, continuation: Any, details: Any, request_iterator: Any) -> Any:
                counter.calls[_method(details)] += 1

                def counted(request: Any) -> Any:
                    counter.sent += request.ByteSize()
                    return request

                async def requests() -> Any:
                    if hasattr(request_iterator, "__aiter__"):
                        async for request in request_iterator:
                            yield counted(request)
                    else:
                        for request in request_iterator:
                            yield counted(request)
                return Answered(await continuation(details, requests()))

        class Answered:
            """A client-streaming call (gRPC awaits what the interceptor returns), counting its answer."""

            def __init__(self, call: Any) -> None:
                self._call = call

            def __getattr__(self, name: str) -> Any:
                return getattr(self._call, name)

            def __await__(self) -> Any:
                response = yield from self._call.__await__()
                counter.received += response.ByteSize()
                return response

        return [Unary(), ServerStream(), ClientStream()]


async def _fill(memory: MemoryBase, msgs: list[Msg]) -> None:
    """2000 messages: every tenth marked 旧, ten of them also 临时 (as AgentScope's add marks)."""
    for start in range(0, SIZE, 10):
        await memory.add(msgs[start], marks=["旧", "临时"] if start % 200 == 0 else ["旧"])
        await memory.add(msgs[start + 1:start + 10])


async def _steps(memory: MemoryBase, ids: list[str], counter: WireCounter | None) -> list[dict[str, Any]]:
    steps = [
        ("删除三条（一条不存在）", lambda: memory.delete([ids[3], ids[1500], "不存在的"])),
        ("给三条加已读", lambda: memory.update_messages_mark("已读", msg_ids=[ids[5], ids[6], ids[1999]])),
        ("一条已读换成重要", lambda: memory.update_messages_mark("重要", old_mark="已读", msg_ids=[ids[5]])),
        ("去掉所有已读", lambda: memory.update_messages_mark(None, old_mark="已读")),
        ("按临时删除", lambda: memory.delete_by_mark("临时")),
        ("按重要或没有的标记删除", lambda: memory.delete_by_mark(["重要", "没有的"])),
        ("两条的旧换成新（已有新的不计）", lambda: memory.update_messages_mark("新", old_mark="旧", msg_ids=[ids[10], ids[20]])),
        ("删除空列表", lambda: memory.delete([])),
    ]
    out = []
    for name, call in steps:
        before = (Counter(counter.calls), counter.sent, counter.received) if counter else None
        answer = await call()
        step: dict[str, Any] = {"step": name, "answer": answer}
        if counter is not None and before is not None:
            step["calls"] = dict(counter.calls - before[0])
            step["sent"], step["received"] = counter.sent - before[1], counter.received - before[2]
        out.append(step)
    return out


async def _holds(memory: MemoryBase) -> dict[str, Any]:
    out: dict[str, Any] = {"size": await memory.size()}
    for mark in ("旧", "临时", "已读", "重要", "新"):
        out[mark] = [m.get_text_content() for m in await memory.get_memory(mark=mark, prepend_summary=False)]
    out["all"] = [m.get_text_content() for m in await memory.get_memory(prepend_summary=False)]
    return out


async def main() -> None:
    msgs = [Msg("用户" if i % 2 else "助手", f"第{i}条消息：" + "内容" * 40, "user" if i % 2 else "assistant")
            for i in range(SIZE)]
    ids = [m.id for m in msgs]
    local = InMemoryMemory()
    await _fill(local, msgs)
    await local.update_messages_mark("新", msg_ids=[ids[20]])
    local_steps = await _steps(local, ids, None)

    writer = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
    await _fill(writer, msgs)
    await writer.update_messages_mark("新", msg_ids=[ids[20]])
    counter = WireCounter()
    channel = grpc.aio.insecure_channel(TARGET, interceptors=counter.interceptors())
    remote = RemoteMemory(TARGET, MEMORY_ID, api_key=KEY)
    remote._clients = PerLoop(lambda: AsyncMemoryClient(channel=channel, api_key=KEY))
    await remote.size()  # the memory is known to this client; the steps start from here
    stored_bytes = counter.received
    remote_steps = await _steps(remote, ids, counter)
    print(json.dumps({"local": local_steps, "remote": remote_steps, "stored_bytes": stored_bytes,
                      "local_holds": await _holds(local), "remote_holds": await _holds(remote)}, ensure_ascii=False))
    await writer.close()
    await channel.close()


asyncio.run(main())
