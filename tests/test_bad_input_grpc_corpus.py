"""The bad-input corpus (tests/bad_input_corpus.py) against a real server on sqlite and on
PostgreSQL: every case gets its exact status, a message naming the field, a healthy server
afterwards, and no change to any stored memory, message, version, long-term memory or session
file."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import grpc
from bad_input_corpus import (
    AUTO_CONTEXT_ID,
    IN_MEMORY_ID,
    SCOPE,
    SESSION_ID,
    STREAMING,
    Case,
    corpus,
    text_msg,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2 as lpb,
)
from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2_grpc as lpb_grpc,
)
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    memory_service_pb2_grpc as pb_grpc,
)
from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as mpb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb
from agentscope_memory._proto.agentscope.memory.v1 import (
    state_service_pb2_grpc as spb_grpc,
)

CASES = corpus()


def test_the_corpus_is_large_and_covers_every_rpc() -> None:
    assert len(CASES) >= 500
    covered = {(c.service, c.method) for c in CASES}
    for module, name in ((pb, "MemoryService"), (lpb, "LongTermMemoryService"), (spb, "StateService")):
        for method in module.DESCRIPTOR.services_by_name[name].methods:
            if method.name == "ListTools":
                continue  # takes nothing a client could get wrong; its undecodable bytes are covered below
            assert (f"agentscope.memory.v1.{name}", method.name) in covered, method.name


async def _seed(channel: grpc.aio.Channel) -> None:
    memory = pb_grpc.MemoryServiceStub(channel)
    await memory.CreateMemory(pb.CreateMemoryRequest(
        memory_id=IN_MEMORY_ID, kind=pb.MEMORY_KIND_IN_MEMORY, labels={"项目": "演示", "session_id": SESSION_ID}))
    await memory.AddMessages(pb.AddMessagesRequest(memory_id=IN_MEMORY_ID, messages=[
        text_msg("你好，我叫小明"), text_msg("hello", role=mpb.ROLE_ASSISTANT, metadata_json='{"n":1,"f":1.5}')]))
    await memory.CreateMemory(pb.CreateMemoryRequest(memory_id=AUTO_CONTEXT_ID, kind=pb.MEMORY_KIND_AUTO_CONTEXT))
    await memory.AddMessages(pb.AddMessagesRequest(memory_id=AUTO_CONTEXT_ID, messages=[text_msg("こんにちは 🎌")]))
    await memory.AttachPlanNote(pb.AttachPlanNoteRequest(memory_id=AUTO_CONTEXT_ID, plan=pb.PlanNote(description="计划")))
    long_term = lpb_grpc.LongTermMemoryServiceStub(channel)
    await long_term.Record(lpb.RecordRequest(scope=SCOPE, messages=[text_msg("用户喜欢绿茶")]))
    state = spb_grpc.StateServiceStub(channel)
    await state.ExportSession(spb.ExportSessionRequest(session_id=SESSION_ID, memory_ids=[IN_MEMORY_ID]))


async def _snapshot(channel: grpc.aio.Channel, sessions: Path) -> Any:
    memory = pb_grpc.MemoryServiceStub(channel)
    state = spb_grpc.StateServiceStub(channel)
    listed = await memory.ListMemories(pb.ListMemoriesRequest(page_size=1000))
    out: list[Any] = []
    for m in listed.memories:
        messages = await memory.GetMessages(pb.GetMessagesRequest(memory_id=m.memory_id))
        saved = await state.SaveState(spb.SaveStateRequest(memory_id=m.memory_id))
        out.append((m.memory_id, m.version, m.message_count, sorted(m.labels.items()),
                    [x.SerializeToString() for x in messages.messages],
                    [e.SerializeToString() for e in saved.entries]))
    long_term = lpb_grpc.LongTermMemoryServiceStub(channel)
    items = await long_term.ListLongTermMemories(lpb.ListLongTermMemoriesRequest(scope=SCOPE))
    out.append(sorted((i.id, i.memory, i.metadata_json, i.updated_at) for i in items.memories))
    files = sorted(
        (str(p.relative_to(sessions)), hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sessions.rglob("*") if p.is_file()
    )
    out.append(files)
    return out


async def _send(channel: grpc.aio.Channel, case: Case) -> grpc.aio.AioRpcError | None:
    try:
        if case.method in STREAMING:
            async for _ in channel.unary_stream(case.path)(case.request, timeout=10):
                break
        else:
            await channel.unary_unary(case.path)(case.request, timeout=30)
    except grpc.aio.AioRpcError as exc:
        return exc
    return None


async def _run_corpus(server) -> None:
    sessions = server.settings.sessions_root()
    async with grpc.aio.insecure_channel(server.address, options=[
        ("grpc.max_send_message_length", 64 * 1024 * 1024)]) as channel:
        await _seed(channel)
        before = await _snapshot(channel, sessions)
        assert len(before[-1]) >= 2 and before[-2], "the seed wrote session files and a long-term memory"
        health = health_pb2_grpc.HealthStub(channel)
        failures: list[str] = []
        for case in CASES:
            error = await _send(channel, case)
            if error is None:
                failures.append(f"{case.name}: accepted")
            elif error.code() != case.code or case.field not in (error.details() or ""):
                failures.append(f"{case.name}: {error.code().name} {error.details()!r} "
                                f"(want {case.code.name} naming {case.field!r})")
            status = await health.Check(health_pb2.HealthCheckRequest(service=""))
            assert status.status == health_pb2.HealthCheckResponse.SERVING, case.name
            after = await _snapshot(channel, sessions)
            if after != before:
                failures.append(f"{case.name}: stored data changed")
                before = after
        assert not failures, f"{len(failures)} of {len(CASES)} cases failed:\n" + "\n".join(failures[:80])


async def test_corpus_on_sqlite(server_factory) -> None:
    await _run_corpus(await server_factory())


async def test_corpus_on_postgres(server_factory, postgres_dsn) -> None:
    await _run_corpus(await server_factory(store="postgres", postgres_dsn=postgres_dsn))

