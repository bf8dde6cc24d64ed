"""Spans and metrics of calls that do not end normally: a stream the client cancels, a stream
abandoned mid-way, an unexpected server error; and `traceparent` metadata that is malformed or
hostile, which starts a new trace and never fails the call."""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as st
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as st_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.message import Msg, MsgRole
from otlp_receiver import OtlpReceiver, ReceivedSpan

ERROR = 2  # OTLP's STATUS_CODE_ERROR
SAVE = "agentscope.memory.v1.StateService/StreamSaveState"
WATCH = "agentscope.memory.v1.MemoryService/WatchMessages"


async def _big_memory(address: str) -> None:
    # Several 4 MiB pieces of StreamSaveState, so the client can cancel after the first.
    async with AsyncMemoryClient(address, timeout=30) as client:
        await client.create_memory("大会话")
        for _ in range(12):
            await client.add_messages("大会话", [Msg.create(MsgRole.USER, "字" * 4000) for _ in range(100)])


async def _cancel_streams(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        save = st_grpc.StateServiceStub(channel).StreamSaveState(st.StreamSaveStateRequest(memory_id="大会话"))
        await save.read()
        save.cancel()
        watch = pb_grpc.MemoryServiceStub(channel).WatchMessages()
        await watch.write(pb.WatchMessagesRequest(memory_id="大会话", renewal=1))
        await watch.read()
        watch.cancel()
        await asyncio.sleep(0.5)  # the server sees the cancellations


async def _one(receiver: OtlpReceiver, name: str) -> ReceivedSpan:
    spans = receiver.named(name)
    assert len(spans) == 1, [s.name for s in receiver.spans]
    return spans[0]


async def test_a_stream_the_client_cancels_ends_its_span_as_cancelled_not_as_a_server_error(
        receiver, server_factory) -> None:
    server = await server_factory(otlp_endpoint=receiver.endpoint)
    await _big_memory(server.address)
    await _cancel_streams(server.address)
    # Ended, and so exported (within the exporter's 1 s batching), while the server runs on.
    for _ in range(50):
        if receiver.named(SAVE) and receiver.named(WATCH):
            break
        await asyncio.sleep(0.1)
    save = await _one(receiver, SAVE)
    assert save.attributes["rpc.grpc.status_code"] == grpc.StatusCode.CANCELLED.value[0]
    assert save.status_code != ERROR
    # A cancelled watch may also end as its requests ending (grpc does not always tell the
    # handler which): CANCELLED or OK, never a server error.
    watch = await _one(receiver, WATCH)
    assert watch.attributes["rpc.grpc.status_code"] in (grpc.StatusCode.CANCELLED.value[0], 0)
    assert watch.status_code != ERROR


async def test_a_cancelled_stream_is_counted_as_cancelled_in_the_metrics(server_factory) -> None:
    server = await server_factory(metrics_port=0)
    await _big_memory(server.address)
    await _cancel_streams(server.address)
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics")).text

    def count(method: str, code: grpc.StatusCode) -> float:
        service, _, name = method.rpartition("/")
        line = (f'rpc_server_call_duration_seconds_count{{rpc_grpc_status_code="{code.value[0]}",'
                f'rpc_method="{name}",rpc_service="{service}",rpc_system="grpc"}} ')
        return sum(float(found.split()[-1]) for found in text.splitlines() if found.startswith(line))

    assert count(SAVE, grpc.StatusCode.CANCELLED) == 1
    assert count(WATCH, grpc.StatusCode.CANCELLED) + count(WATCH, grpc.StatusCode.OK) == 1
    assert count(SAVE, grpc.StatusCode.UNKNOWN) == 0 and count(WATCH, grpc.StatusCode.UNKNOWN) == 0


async def test_an_unexpected_failure_is_an_error_span_with_internal(receiver, server_factory,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from agentscope_memory.short_term.manager import MemoryManager

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("磁盘坏了")

    server = await server_factory(otlp_endpoint=receiver.endpoint)
    monkeypatch.setattr(MemoryManager, "get_memory", broken)
    async with grpc.aio.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await pb_grpc.MemoryServiceStub(channel).GetMemory(pb.GetMemoryRequest(memory_id="会话"))
    assert failed.value.code() == grpc.StatusCode.INTERNAL
    await server.stop(0)
    span = await _one(receiver, "agentscope.memory.v1.MemoryService/GetMemory")
    assert span.status_code == ERROR
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.INTERNAL.value[0]


@pytest.mark.parametrize("metadata", [
    (("traceparent", "garbage"),),
    (("traceparent", "00-" + "a" * 7000),),
    (("traceparent", "00-00000000000000000000000000000000-b7ad6b7169203331-01"),),
    (("traceparent", "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),),
    (("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
     ("tracestate", ",".join(f"k{i}=" + "v" * 200 for i in range(30)))),
    (("traceparent-bin", b"\xff\xfe\x00"),),
])
async def test_a_malformed_or_hostile_traceparent_starts_a_new_trace_and_the_call_succeeds(
        receiver, server_factory, metadata: tuple[tuple[str, str | bytes], ...]) -> None:
    server = await server_factory(otlp_endpoint=receiver.endpoint)
    async with grpc.aio.insecure_channel(server.address) as channel:
        await pb_grpc.MemoryServiceStub(channel).CreateMemory(
            pb.CreateMemoryRequest(memory_id="会话", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=metadata)
    await server.stop(0)
    span = await _one(receiver, "agentscope.memory.v1.MemoryService/CreateMemory")
    assert span.attributes["rpc.grpc.status_code"] == 0
    valid = metadata[0][1] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert (span.trace_id == "0af7651916cd43dd8448eb211c80319c") == valid
    assert span.trace_id != "0" * 32


async def test_a_call_past_its_deadline_is_deadline_exceeded_not_unknown(receiver, server_factory) -> None:
    from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
    from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as ltm_grpc
    from scripted_llm import ScriptedLLM, ScriptedReply

    slow = ScriptedReply.json({"domain": "user_preferences"})
    with ScriptedLLM(default=ScriptedReply(content=slow.content, delay_s=3.0)) as llm:
        server = await server_factory(otlp_endpoint=receiver.endpoint, llm_base_url=llm.base_url,
                                      llm_api_key="sk-test", llm_max_retries=0)
        async with grpc.aio.insecure_channel(server.address) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as late:
                await ltm_grpc.LongTermMemoryServiceStub(channel).SearchLongTermMemories(
                    ltm_pb.SearchLongTermMemoriesRequest(scope=ltm_pb.Scope(user_id="alice"), query="她喝什么茶",
                                                         route_query=True), timeout=1.0)
            assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        await asyncio.sleep(0.5)
        await server.stop(0)
    span = await _one(receiver, "agentscope.memory.v1.LongTermMemoryService/SearchLongTermMemories")
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
