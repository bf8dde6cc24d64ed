"""OpenTelemetry traces: a span per RPC exported over OTLP/HTTP to a real receiver, child spans
for store transactions, embedding, vector search and LLM calls, and the caller's trace continued
from the Python client's `traceparent`."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as ltm_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import NotFoundError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msg_to_proto
from scripted_llm import ScriptedLLM, ScriptedReply

SERVER = 2  # OTLP's SPAN_KIND_SERVER


async def test_each_rpc_is_a_server_span_in_the_callers_trace_with_store_spans_below(receiver, server_factory) -> None:
    server = await server_factory(otlp_endpoint=receiver.endpoint, otel_service_name="记忆-memory")
    app = TracerProvider().get_tracer("agent")
    with app.start_as_current_span("agent turn", kind=SpanKind.INTERNAL) as turn:
        async with AsyncMemoryClient(server.address, timeout=10) as client:
            await client.create_memory("会话-1")
            await client.add_message("会话-1", Msg.create(MsgRole.USER, "你好, tracing"))
            assert [m.text_content for m in await client.get_messages("会话-1")] == ["你好, tracing"]
            with pytest.raises(NotFoundError):
                await client.get_memory("missing")
    await server.stop(0)  # flushes the exporter

    trace_id = format(turn.get_span_context().trace_id, "032x")
    add = receiver.named("agentscope.memory.v1.MemoryService/AddMessages")
    assert len(add) == 1
    (add_span,) = add
    assert add_span.kind == SERVER and add_span.trace_id == trace_id
    assert add_span.parent_span_id == format(turn.get_span_context().span_id, "016x")
    assert add_span.service_name == "记忆-memory"
    assert add_span.attributes["rpc.system"] == "grpc"
    assert add_span.attributes["rpc.service"] == "agentscope.memory.v1.MemoryService"
    assert add_span.attributes["rpc.method"] == "AddMessages"
    assert add_span.attributes["rpc.grpc.status_code"] == 0
    stores = [s for s in receiver.children(add_span) if s.name == "store.transaction"]
    assert stores and stores[0].attributes["db.system.name"] == "sqlite"
    assert any(s.attributes["agentscope_memory.write"] for s in stores)

    (missing,) = receiver.named("agentscope.memory.v1.MemoryService/GetMemory")
    # NOT_FOUND is the caller's problem, not the server's: the span is not an error.
    assert missing.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert missing.status_code != 2 and missing.trace_id == trace_id


async def test_long_term_calls_show_embedding_vector_search_and_llm_spans(receiver, server_factory) -> None:
    with ScriptedLLM(default=ScriptedReply.json({"domain": "user_preferences"})) as llm:
        server = await server_factory(otlp_endpoint=receiver.endpoint, llm_base_url=llm.base_url,
                                      llm_api_key="sk-test", llm_max_retries=0)
        async with grpc.aio.insecure_channel(server.address) as channel:
            ltm = ltm_grpc.LongTermMemoryServiceStub(channel)
            scope = ltm_pb.Scope(agent_name="助手", user_id="alice")
            said = Msg.create(MsgRole.USER, "我每天早上喝绿茶 and I like chess")
            await ltm.Record(ltm_pb.RecordRequest(scope=scope, messages=[msg_to_proto(said)]))
            found = await ltm.SearchLongTermMemories(ltm_pb.SearchLongTermMemoriesRequest(
                scope=scope, query="她喝什么茶", route_query=True))
            assert found.routed_domain == "user_preferences"
        await asyncio.sleep(0)
        await server.stop(0)

    (search,) = receiver.named("agentscope.memory.v1.LongTermMemoryService/SearchLongTermMemories")
    below = {s.name: s for s in receiver.children(search)}
    assert {"embed", "vector_search", "store.transaction"} <= set(below)
    assert below["embed"].attributes["agentscope_memory.embedder.purpose"] == "query"
    assert below["embed"].attributes["agentscope_memory.embedder.batch_size"] == 1
    chat = [s for name, s in below.items() if name.startswith("chat ")]
    assert chat and chat[0].attributes["gen_ai.operation.name"] == "chat"
    assert chat[0].attributes["gen_ai.usage.input_tokens"] > 0
    (record,) = receiver.named("agentscope.memory.v1.LongTermMemoryService/Record")
    assert any(s.name == "embed" and s.attributes["agentscope_memory.embedder.purpose"] == "passage"
               for s in receiver.children(record))


async def test_no_endpoint_no_tracing(receiver, server_factory) -> None:
    server = await server_factory()
    async with AsyncMemoryClient(server.address, timeout=10) as client:
        await client.create_memory("m")
    await server.stop(0)
    assert server.settings.otlp_endpoint is None and receiver.spans == []


async def test_tracing_refuses_to_start_without_a_valid_service_name(tmp_path) -> None:
    from conftest import make_settings
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="otel_service_name"):
        make_settings(tmp_path, otlp_endpoint="http://127.0.0.1:4318", otel_service_name="")


async def test_an_add_on_a_watch_is_an_add_messages_span_under_the_watchs(receiver, server_factory) -> None:
    from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
    from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc

    server = await server_factory(otlp_endpoint=receiver.endpoint)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        call = stub.WatchMessages()
        await call.write(pb.WatchMessagesRequest(memory_id="m", renewal=1))
        await call.read()
        said = msg_to_proto(Msg.create(MsgRole.USER, "over the watch"))
        await call.write(pb.WatchMessagesRequest(add=pb.AddMessagesRequest(messages=[said]), add_id=1))
        assert (await call.read()).added.response.message_count == 1
        await call.write(pb.WatchMessagesRequest(add=pb.AddMessagesRequest(), add_id=2))
        assert (await call.read()).added.failure.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        await call.done_writing()
        assert await call.read() == grpc.aio.EOF
    await server.stop(0)  # flushes the exporter

    (stream,) = receiver.named("agentscope.memory.v1.MemoryService/WatchMessages")
    adds = receiver.named("agentscope.memory.v1.MemoryService/AddMessages")
    assert len(adds) == 2 and all(a.parent_span_id == stream.span_id and a.trace_id == stream.trace_id for a in adds)
    assert sorted(a.attributes["rpc.grpc.status_code"] for a in adds) == [0, grpc.StatusCode.INVALID_ARGUMENT.value[0]]
    assert all(a.attributes["rpc.method"] == "AddMessages" for a in adds)
    ok = next(a for a in adds if a.attributes["rpc.grpc.status_code"] == 0)
    assert any(s.name == "store.transaction" for s in receiver.children(ok))
