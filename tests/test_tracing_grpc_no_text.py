"""What a trace may hold: names, codes, counts and sizes; never a message's text, an LLM's
answer or a key. A collector is often run by other people than the memories' owners."""

from __future__ import annotations


import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as ltm_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.errors import NotFoundError
from agentscope_memory.message import Msg, MsgRole
from otlp_receiver import OtlpReceiver
from scripted_llm import ScriptedLLM, ScriptedReply

ERROR = 2  # OTLP's STATUS_CODE_ERROR
SECRET_TEXT = "我每天早上喝绿茶"
SERVER_KEY = "tenant-a-key-0000001"
LLM_KEY = "sk-llm-secret-0000001"


def _everything(receiver: OtlpReceiver) -> str:
    """Every string a collector got: attributes, events and their attributes, status messages."""
    parts: list[str] = []
    for s in receiver.spans:
        parts += [s.name, s.status_message, *map(str, s.attributes.values())]
        for name, attributes in s.events:
            parts += [name, *map(str, attributes.values())]
    return "\n".join(parts)


async def test_a_failed_llm_call_and_a_missing_memory_leave_no_text_in_the_trace(receiver, server_factory) -> None:
    # The LLM answers garbage that quotes the conversation, as a broken proxy may: the error
    # says it was malformed, and the span must not carry the quote along.
    garbage = ScriptedReply(body=f"<html>upstream echoed: {SECRET_TEXT} {LLM_KEY}</html>".encode())
    with ScriptedLLM(default=garbage) as llm:
        server = await server_factory(otlp_endpoint=receiver.endpoint, llm_base_url=llm.base_url,
                                      llm_api_key=LLM_KEY, llm_max_retries=0,
                                      api_keys={SERVER_KEY: "tenant-a"})
        async with grpc.aio.insecure_channel(server.address) as channel:
            ltm = ltm_grpc.LongTermMemoryServiceStub(channel)
            scope = ltm_pb.Scope(agent_name="助手", user_id="alice")
            said = Msg.create(MsgRole.USER, SECRET_TEXT)
            await ltm.Record(ltm_pb.RecordRequest(scope=scope, messages=[msg_to_proto(said)]),
                             metadata=(("x-api-key", SERVER_KEY),))
            with pytest.raises(grpc.aio.AioRpcError) as routed:  # routing needs the LLM
                await ltm.SearchLongTermMemories(ltm_pb.SearchLongTermMemoriesRequest(
                    scope=scope, query=SECRET_TEXT, route_query=True), metadata=(("x-api-key", SERVER_KEY),))
            assert routed.value.code() == grpc.StatusCode.UNAVAILABLE
        async with AsyncMemoryClient(server.address, timeout=10, api_key=SERVER_KEY) as client:
            with pytest.raises(NotFoundError):
                await client.get_memory(f"会话-{SECRET_TEXT}")
        assert llm.requests, "the LLM was called"
        await server.stop(0)  # flushes the exporter

    chats = [s for s in receiver.spans if s.name.startswith("chat ")]
    assert chats and all(s.status_code == ERROR for s in chats)
    # What failed is named by its type (OpenTelemetry's error.type), not by its message.
    assert all(s.attributes.get("error.type") == "agentscope_memory.errors.UnavailableError" for s in chats)
    everything = _everything(receiver)
    for secret in (SECRET_TEXT, LLM_KEY, SERVER_KEY, "upstream echoed"):
        assert secret not in everything, secret

    # A memory that is not there is the caller's answer, not a failed transaction.
    (missing,) = receiver.named("agentscope.memory.v1.MemoryService/GetMemory")
    below = receiver.children(missing)
    assert below and all(s.status_code != ERROR for s in below)
