"""kill -9 during a burst of concurrent writes: every acknowledged message survives, once, in order."""

from __future__ import annotations

import asyncio
import signal

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msg_to_proto
from conftest import ServerProcess

WRITERS = 8


def message(writer: int, i: int) -> pb.AddMessagesRequest:
    msg = msg_to_proto(Msg.create(MsgRole.USER, f"{writer}:{i}"))
    return pb.AddMessagesRequest(memory_id="d", messages=[msg], request_id=f"w{writer}-{i}")


@pytest.mark.slow
async def test_acknowledged_writes_survive_sigkill(tmp_path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data)
    acked: dict[int, list[int]] = {w: [] for w in range(WRITERS)}
    in_flight: dict[int, pb.AddMessagesRequest] = {}
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="d", kind=pb.MEMORY_KIND_IN_MEMORY))

            async def writer(w: int) -> None:
                for i in range(100_000):
                    request = message(w, i)
                    in_flight[w] = request
                    try:
                        await stub.AddMessages(request, timeout=10)
                    except grpc.aio.AioRpcError:
                        return
                    acked[w].append(i)
                    del in_flight[w]

            tasks = [asyncio.create_task(writer(w)) for w in range(WRITERS)]
            # Let the burst build up, then kill the server without warning.
            while sum(len(v) for v in acked.values()) < 400:
                await asyncio.sleep(0.02)
            server.proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        server.close()

    total_acked = sum(len(v) for v in acked.values())
    assert total_acked >= 400
    restarted = ServerProcess(data)
    try:
        async with grpc.aio.insecure_channel(restarted.address) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            texts = [m.content[0].text.text for m in await all_messages(stub)]
            assert len(texts) == len(set(texts)), "a message was stored twice"
            for w in range(WRITERS):
                mine = [int(t.split(":")[1]) for t in texts if t.startswith(f"{w}:")]
                # In order, without gaps; the call in flight at the kill may or may not be there.
                assert mine == list(range(len(mine)))
                assert len(acked[w]) <= len(mine) <= len(acked[w]) + 1
            # Retrying the calls that were in flight is safe: none is stored twice.
            for request in in_flight.values():
                await stub.AddMessages(request, timeout=10)
            after = [m.content[0].text.text for m in await all_messages(stub)]
            assert len(after) == len(set(after))
            assert len(after) == total_acked + len(in_flight)
    finally:
        restarted.close()


async def all_messages(stub) -> list:
    out, token = [], ""
    while True:
        page = await stub.GetMessages(pb.GetMessagesRequest(memory_id="d", page_token=token), timeout=10)
        out.extend(page.messages)
        token = page.next_page_token
        if not token:
            return out
