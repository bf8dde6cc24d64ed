"""TIERED memories survive kill -9 and travel in JsonSession directories; raw bytes to every
TieredMemoryService RPC never give UNKNOWN or INTERNAL."""

from __future__ import annotations

import json
import signal

import grpc
import pytest
from conftest import ServerProcess

from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as spb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2 as pb
from agentscope_memory.client.tiered import AsyncTieredClient
from agentscope_memory.short_term.tiered import TieredConfig
from tiered_helpers import msg

CONFIG = TieredConfig(l1_compact_trigger=65, l2_budget=100, score_importance=False)


async def test_json_session_export_and_import_carry_the_tiers(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = await server_factory(long_term_enabled=False)
    async with AsyncTieredClient(server.address) as tiered, grpc.aio.insecure_channel(server.address) as channel:
        await tiered.create_memory("会话记忆", CONFIG)
        for i in range(9):
            await tiered.add("会话记忆", [msg(i)], importances=[0.9 if i % 2 else 0.2])
        items = {t: await tiered.get_items("会话记忆", t) for t in (1, 2, 3)}
        state = spb_grpc.StateServiceStub(channel)
        exported = await state.ExportSession(spb.ExportSessionRequest(session_id="s-1", memory_ids=["会话记忆"]))
        assert set(exported.keys) == {"tieredMemory_l1", "tieredMemory_l2", "tieredMemory_l3", "tieredMemory_events",
                                      "tieredMemory_stats"}
        files = {p.name for p in server.service.sessions.root.rglob("tieredMemory_*") if not p.name.endswith(".hash")}
        assert files == {"tieredMemory_l1.jsonl", "tieredMemory_l2.jsonl", "tieredMemory_l3.jsonl",
                         "tieredMemory_events.jsonl", "tieredMemory_stats.json"}
        await tiered.create_memory("导入", CONFIG)
        await state.ImportSession(spb.ImportSessionRequest(session_id="s-1", memory_id="导入"))
        assert {t: await tiered.get_items("导入", t) for t in (1, 2, 3)} == items
        assert (await tiered.status("导入")).tiers == (await tiered.status("会话记忆")).tiers


async def test_raw_bytes_never_give_unknown_or_internal(server_factory) -> None:  # type: ignore[no-untyped-def]
    server = await server_factory(long_term_enabled=False)
    bodies = [b"", b"\x0a\x02\xff\xfe", b"\x12\x05hello", b"\x18\xff\xff\xff\xff\x0f", b"\x0a\x01x\x10\x07",
              b"\x0a\x01x\x1a\x00", json.dumps({"x": 1}).encode()]
    async with grpc.aio.insecure_channel(server.address) as channel:
        for method in pb.DESCRIPTOR.services_by_name["TieredMemoryService"].methods:
            path = f"/agentscope.memory.v1.TieredMemoryService/{method.name}"
            for body in bodies:
                if method.server_streaming:
                    call = channel.unary_stream(path)(body, timeout=5)
                    try:
                        async for _ in call:
                            break
                    except grpc.aio.AioRpcError as exc:
                        assert exc.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), (path, body)
                    finally:
                        call.cancel()
                    continue
                try:
                    await channel.unary_unary(path)(body, timeout=5)
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), (path, body, exc)


@pytest.mark.slow
async def test_tiers_survive_sigkill(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "data"
    server = ServerProcess(data)
    try:
        async with AsyncTieredClient(server.address, timeout=10) as tiered:
            await tiered.create_memory("k", CONFIG)
            sent = [msg(i) for i in range(20)]
            for i, m in enumerate(sent):
                await tiered.add("k", [m], importances=[0.9 if i % 3 == 0 else 0.4], request_id=f"r{i}")
            items = {t: await tiered.get_items("k", t) for t in (1, 2, 3)}
            status = await tiered.status("k")
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
    finally:
        server.close()
    restarted = ServerProcess(data)
    try:
        async with AsyncTieredClient(restarted.address, timeout=10) as tiered:
            assert {t: await tiered.get_items("k", t) for t in (1, 2, 3)} == items
            assert await tiered.status("k") == status
            # A retried add after the restart is not applied twice.
            replay = await tiered.add("k", [sent[19]], importances=[0.4], request_id="r19")
            assert replay.replayed and (await tiered.status("k")).tiers[0].items == status.tiers[0].items
    finally:
        restarted.close()
