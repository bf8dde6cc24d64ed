"""Two server replicas on one PostgreSQL, long-term writers through both, one replica killed
with kill -9 in the middle and started again: every acknowledged record is stored, none twice
(each text once per scope), and both replicas see everything at once, by list and by search."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole
from conftest import ServerProcess

SCOPE = pb.Scope(agent_name="助手", user_id="共享用户")
WRITERS = 4
ROUNDS = 30


def _config(tmp_path: Path, dsn: str) -> str:
    path = tmp_path / "replica.toml"
    path.write_text(f'store = "postgres"\npostgres_dsn = "{dsn}"\nlong_term_embedder = "minilm"\n')
    return str(path)


def _text(writer: int, i: int) -> str:
    return f"writer {writer} message {i}: 第{writer}位作者的第{i}条消息"


async def _all_texts(stub: pb_grpc.LongTermMemoryServiceStub) -> list[str]:
    texts, token = [], ""
    while True:
        page = await stub.ListLongTermMemories(pb.ListLongTermMemoriesRequest(scope=SCOPE, page_size=50, page_token=token))
        texts += [m.memory for m in page.memories if m.memory_type == "message"]
        token = page.next_page_token
        if not token:
            return texts


@pytest.mark.slow
async def test_kill_9_of_one_replica_loses_and_duplicates_nothing(tmp_path: Path, postgres_dsn: str) -> None:
    config = _config(tmp_path, postgres_dsn)
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    servers = [ServerProcess(d, None, "--config", config) for d in dirs]
    channels = [grpc.aio.insecure_channel(s.address) for s in servers]
    stubs = [pb_grpc.LongTermMemoryServiceStub(c) for c in channels]
    acknowledged: set[str] = set()
    attempted: set[str] = set()
    killed = asyncio.Event()
    failovers = 0
    in_flight = [0, 0]  # Record calls under way, per replica
    try:
        async def writer(w: int) -> None:
            # Each writer records its growing conversation (the whole history each time, as an
            # agent's EndTurn does) through the replicas in turn; a call the killed replica
            # cannot answer goes to the other one.
            nonlocal failovers
            rng = random.Random(w)
            conversation: list[str] = []
            for i in range(ROUNDS):
                conversation.append(_text(w, i))
                attempted.add(conversation[-1])
                request = pb.RecordRequest(scope=SCOPE, messages=[
                    msg_to_proto(Msg.create(MsgRole.USER, t)) for t in conversation[-rng.randint(1, 4):]])
                for attempt in range(40):
                    target = (w + i + attempt) % 2
                    in_flight[target] += 1
                    try:
                        await stubs[target].Record(request, timeout=20)
                        acknowledged.update(conversation[-len(request.messages):])
                        break
                    except grpc.aio.AioRpcError as exc:
                        assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                                              grpc.StatusCode.CANCELLED), exc
                        failovers += 1
                        await asyncio.sleep(0.05)
                    finally:
                        in_flight[target] -= 1
                else:
                    raise AssertionError(f"writer {w} could not record round {i}")
                if i == ROUNDS // 3 and w == 0:
                    killed.set()

        async def killer() -> None:
            await killed.wait()
            # Kill while a Record is inside the replica (a call that has just started is still
            # embedding), so the kill cuts a call rather than falling between two.
            while True:
                while in_flight[0] == 0:
                    await asyncio.sleep(0.001)
                await asyncio.sleep(0.002)
                if in_flight[0] > 0:
                    break
            servers[0].kill()
            # The old channel stays open (closing it would cancel calls in flight, which a
            # client does not see when a server dies); it answers UNAVAILABLE meanwhile.
            servers[0] = ServerProcess(dirs[0], servers[0].port, "--config", config)
            channels.append(grpc.aio.insecure_channel(servers[0].address))
            stubs[0] = pb_grpc.LongTermMemoryServiceStub(channels[-1])

        await asyncio.gather(killer(), *(writer(w) for w in range(WRITERS)))
        assert len(acknowledged) == WRITERS * ROUNDS
        assert failovers > 0, "the kill hit no call: the test proved nothing"

        for stub in stubs:
            texts = await _all_texts(stub)
            assert len(texts) == len(set(texts)), "a text stored twice"
            assert acknowledged <= set(texts) <= attempted
            # Search on either replica finds the newest text of every writer at once.
            for w in range(WRITERS):
                last = _text(w, ROUNDS - 1)
                found = await stub.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(
                    scope=SCOPE, query=last, top_k=3))
                assert last in [r.memory.memory for r in found.results]
    finally:
        for channel in channels:
            await channel.close()
        for server in servers:
            server.close()


async def test_concurrent_updates_through_both_replicas_lose_nothing(server_factory, postgres_dsn: str) -> None:
    import json

    replicas = [await server_factory(store="postgres", postgres_dsn=postgres_dsn, long_term_embedder="minilm")
                for _ in range(2)]
    channels = [grpc.aio.insecure_channel(r.address) for r in replicas]
    stubs = [pb_grpc.LongTermMemoryServiceStub(c) for c in channels]
    try:
        recorded = await stubs[0].Record(pb.RecordRequest(scope=SCOPE, messages=[
            msg_to_proto(Msg.create(MsgRole.USER, "我喜欢在周末爬山"))]))
        memory_id = recorded.memories[0].id

        async def update(i: int) -> None:
            await stubs[i % 2].UpdateLongTermMemory(pb.UpdateLongTermMemoryRequest(
                id=memory_id, metadata_json=json.dumps({f"标签{i}": i})))

        # Readers on both replicas meanwhile always get the memory, whole.
        async def read() -> None:
            for _ in range(20):
                for stub in stubs:
                    found = await stub.SearchLongTermMemories(pb.SearchLongTermMemoriesRequest(scope=SCOPE, query="爬山"))
                    assert [r.memory.memory for r in found.results] == ["我喜欢在周末爬山"]

        await asyncio.gather(read(), *(update(i) for i in range(24)))
        for stub in stubs:
            got = await stub.GetLongTermMemory(pb.GetLongTermMemoryRequest(id=memory_id))
            assert json.loads(got.memory.metadata_json) == {f"标签{i}": i for i in range(24)}
            history = await stub.GetLongTermMemoryHistory(pb.GetLongTermMemoryHistoryRequest(id=memory_id))
            assert [h.event for h in history.entries].count("UPDATE") == 24
    finally:
        for channel in channels:
            await channel.close()
