"""SIGTERM drains a real server process under load: health turns NOT_SERVING, new calls get
UNAVAILABLE, calls already running finish with their real answer, no call ever ends CANCELLED,
and every acknowledged write is stored (read back after a restart)."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections import Counter
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.convert.to_proto import auto_context_config_to_proto, msg_to_proto
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from auto_context_helpers import A, TR, TU, U
from conftest import ServerProcess
from scripted_llm import ScriptedLLM, ScriptedReply

WRITERS = 32
COMPRESSORS = 4
# reference/autocontext.md D3: five tool runs in a row are summarised by the LLM.
D3 = AutoContextConfig(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3, min_compression_token_threshold=0)


def d3() -> list[Msg]:
    msgs = [U("User query 用户问题")]
    for i in range(5):
        msgs += [TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}")]
    return msgs + [A("Assistant response")] + [U(f"Message {i}") for i in range(10)]


def _server(tmp_path: Path, llm: ScriptedLLM) -> ServerProcess:
    config = tmp_path / "server.toml"
    config.write_text(
        "shutdown_grace_s = 30\n"
        "long_term_enabled = false\n"
        f'llm_base_url = "{llm.base_url}"\n'
        'llm_api_key = "scripted"\n'
    )
    return ServerProcess(tmp_path / "data", None, "--config", str(config))


async def _health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        return reply.status


@pytest.mark.slow
async def test_sigterm_drains_many_writers_and_running_calls(tmp_path: Path) -> None:
    hold = threading.Event()
    with ScriptedLLM(default=ScriptedReply.text("SUMMARY 摘要"), hold=hold) as llm:
        server = _server(tmp_path, llm)
        try:
            acked: dict[int, list[str]] = {i: [] for i in range(WRITERS)}
            endings: Counter[str] = Counter()
            terminated = asyncio.Event()
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = pb_grpc.MemoryServiceStub(channel)
                for i in range(WRITERS):
                    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=f"writer-{i}", kind=pb.MEMORY_KIND_IN_MEMORY))
                for i in range(COMPRESSORS):
                    await stub.CreateMemory(pb.CreateMemoryRequest(
                        memory_id=f"ac-{i}", kind=pb.MEMORY_KIND_AUTO_CONTEXT,
                        auto_context_config=auto_context_config_to_proto(D3)))
                    await stub.AddMessages(pb.AddMessagesRequest(memory_id=f"ac-{i}", messages=[msg_to_proto(m) for m in d3()]))

                async def writer(i: int) -> None:
                    # Each writer its own connection, like separate agents; it writes until the
                    # server refuses it, as a client would before moving to another replica.
                    async with grpc.aio.insecure_channel(server.address) as own:
                        writes = pb_grpc.MemoryServiceStub(own)
                        n = 0
                        while True:
                            text = f"writer {i} message {n} 消息"
                            try:
                                await writes.AddMessages(pb.AddMessagesRequest(
                                    memory_id=f"writer-{i}", messages=[msg_to_proto(Msg.create(MsgRole.USER, text))]), timeout=60)
                            except grpc.aio.AioRpcError as exc:
                                endings[exc.code().name] += 1
                                if terminated.is_set() or exc.code() != grpc.StatusCode.UNAVAILABLE:
                                    return
                                raise
                            acked[i].append(text)
                            n += 1

                async def compress(i: int) -> pb.CompressIfNeededResponse:
                    return await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id=f"ac-{i}"), timeout=60)

                writers = [asyncio.create_task(writer(i)) for i in range(WRITERS)]
                compressions = [asyncio.create_task(compress(i)) for i in range(COMPRESSORS)]
                # The compressions are inside the server (their LLM requests arrived and wait at
                # the hold), and every writer has been acknowledged at least once.
                while len(llm.chat_requests) < COMPRESSORS or not all(acked.values()):
                    await asyncio.sleep(0.02)
                terminated.set()
                server.proc.send_signal(signal.SIGTERM)

                # Health reports the shutdown while the running calls are still held...
                while await _health(server.address) != health_pb2.HealthCheckResponse.NOT_SERVING:
                    await asyncio.sleep(0.02)
                assert not any(c.done() for c in compressions)
                # ...and a new call is refused with UNAVAILABLE.
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.GetMemory(pb.GetMemoryRequest(memory_id="writer-0"), timeout=10)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
                assert "shutting down" in (refused.value.details() or "")

                hold.set()
                # The calls that were running get their real answer.
                for done in await asyncio.gather(*compressions):
                    assert done.compressed
                await asyncio.gather(*writers)
            assert await asyncio.to_thread(server.proc.wait, 60) == 0
            log = server.log_path.read_text()
            # The drain began with at least the held compressions in flight.
            shutting_down = log.split("shutting down", 1)[1].splitlines()[0]
            assert int(shutting_down.split("in_flight=")[1].split()[0]) >= COMPRESSORS, shutting_down
            # Every writer ended on UNAVAILABLE; none on CANCELLED or anything else.
            assert endings == Counter({"UNAVAILABLE": WRITERS}), endings
        finally:
            hold.set()
            server.close()

    # Every acknowledged write is stored, once, in order; the summaries were committed.
    with ScriptedLLM(default=ScriptedReply.text("SUMMARY")) as llm:
        again = _server(tmp_path, llm)
        try:
            async with grpc.aio.insecure_channel(again.address) as channel:
                stub = pb_grpc.MemoryServiceStub(channel)
                for i in range(WRITERS):
                    page = await stub.GetMessages(pb.GetMessagesRequest(memory_id=f"writer-{i}", page_size=1000))
                    assert [msg_from_proto(m).text_content for m in page.messages] == acked[i]
                for i in range(COMPRESSORS):
                    events = await stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id=f"ac-{i}"))
                    assert [e.event_type for e in events.events] == ["TOOL_INVOCATION_COMPRESS"]
        finally:
            again.close()


async def test_a_watch_ends_with_unavailable_when_the_server_drains(server_factory) -> None:
    server = await server_factory()
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(
            memory_id="watched", kind=pb.MEMORY_KIND_AUTO_CONTEXT, auto_context_config=auto_context_config_to_proto(
                AutoContextConfig(msg_threshold=5, last_keep=4, large_payload_threshold=100))))
        watch = stub.WatchCompressionEvents(pb.WatchCompressionEventsRequest(memory_id="watched"))
        # The watch is live: it delivers the event of a first compression.
        await stub.AddMessages(pb.AddMessagesRequest(memory_id="watched", messages=[msg_to_proto(m) for m in (
            U("a"), A("b"), U("y" * 300), A("ok"), U("next"))]))
        assert (await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="watched"))).compressed
        first = await asyncio.wait_for(watch.read(), 10)
        assert first.event.sequence == 1
        await _stop_and_expect_unavailable(server, watch)


async def test_a_coherent_watch_carrying_adds_ends_with_unavailable_when_the_server_drains(server_factory) -> None:
    # The bidirectional stream waits for its next item with its request reader still running;
    # draining ends that wait, and the stream, UNAVAILABLE (not CANCELLED).
    server = await server_factory()
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="watched", kind=pb.MEMORY_KIND_IN_MEMORY))
        watch = stub.WatchMessages()
        await watch.write(pb.WatchMessagesRequest(memory_id="watched", renewal=1))
        assert (await asyncio.wait_for(watch.read(), 10)).HasField("started")
        await watch.write(pb.WatchMessagesRequest(add_id=1, add=pb.AddMessagesRequest(
            messages=[msg_to_proto(U("a"))], request_id="r1")))
        answer = await asyncio.wait_for(watch.read(), 10)
        assert answer.added.add_id == 1 and answer.added.response.message_count == 1
        await _stop_and_expect_unavailable(server, watch)


async def _stop_and_expect_unavailable(server, stream) -> None:
    """Stop `server` (5 s grace) while `stream` waits for its next item: the stream ends UNAVAILABLE."""
    stopping = asyncio.create_task(server.stop(5))
    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await asyncio.wait_for(stream.read(), 10)
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "shutting down" in (ended.value.details() or "")
    await stopping
