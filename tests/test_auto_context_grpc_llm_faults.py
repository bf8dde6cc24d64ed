"""The OpenAI-compatible chat client (`agentscope_memory.llm`) against the scripted LLM, and its
faults as an AUTO_CONTEXT memory sees them through gRPC in both profiles."""

from __future__ import annotations

import dataclasses

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import DeadlineExceededError, UnavailableError
from agentscope_memory.llm import ChatClient, LlmConfig
from scripted_llm import ScriptedLLM, ScriptedReply
from test_auto_context_grpc_end_to_end import D3_CONFIG, d3_messages

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def llm():
    with ScriptedLLM() as server:
        yield server


def client_for(llm: ScriptedLLM, **overrides) -> ChatClient:
    values = {"base_url": llm.base_url, "model": "m-1", "api_key": "sk-test", "timeout_s": 2.0, "max_retries": 2}
    values.update(overrides)
    return ChatClient(LlmConfig(**values))


async def test_a_completion_carries_text_usage_model_and_key(llm) -> None:
    llm.push(ScriptedReply.text("a summary", prompt_tokens=7, completion_tokens=3))
    chat = client_for(llm)
    try:
        result = await chat.chat(HELLO, temperature=0)
    finally:
        await chat.close()
    assert (result.text, result.input_tokens, result.output_tokens) == ("a summary", 7, 3)
    assert result.seconds >= 0
    (request,) = llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body == {"model": "m-1", "messages": HELLO, "temperature": 0}


async def test_server_errors_are_retried_with_backoff(llm) -> None:
    llm.push(ScriptedReply.error(500), ScriptedReply.error(503), ScriptedReply.text("third time"))
    chat = client_for(llm, max_retries=2)
    try:
        assert (await chat.chat(HELLO)).text == "third time"
    finally:
        await chat.close()
    assert len(llm.requests) == 3


async def test_server_errors_beyond_the_retries_are_unavailable(llm) -> None:
    llm.default = ScriptedReply.error(500)
    chat = client_for(llm, max_retries=1)
    try:
        with pytest.raises(UnavailableError, match="HTTP 500"):
            await chat.chat(HELLO)
    finally:
        await chat.close()
    assert len(llm.requests) == 2


async def test_a_refused_request_is_not_retried(llm) -> None:
    llm.default = ScriptedReply.error(401, "bad key")
    chat = client_for(llm, max_retries=3)
    try:
        with pytest.raises(UnavailableError, match="refused the request: HTTP 401"):
            await chat.chat(HELLO)
    finally:
        await chat.close()
    assert len(llm.requests) == 1


async def test_a_timeout_is_deadline_exceeded_after_retries(llm) -> None:
    llm.default = ScriptedReply.text("too late").after(1.0)
    chat = client_for(llm, timeout_s=0.2, max_retries=1)
    try:
        with pytest.raises(DeadlineExceededError, match="timed out after 0.2s"):
            await chat.chat(HELLO)
    finally:
        await chat.close()
    assert len(llm.requests) == 2


async def test_a_timeout_then_an_answer_succeeds(llm) -> None:
    llm.push(ScriptedReply.text("slow").after(1.0), ScriptedReply.text("fast"))
    chat = client_for(llm, timeout_s=0.3, max_retries=1)
    try:
        assert (await chat.chat(HELLO)).text == "fast"
    finally:
        await chat.close()


@pytest.mark.parametrize(("reply", "message"), [
    (ScriptedReply.raw(b"<html>gateway</html>"), "malformed"),
    (ScriptedReply.raw(b'{"choices": []}'), "malformed"),
    (ScriptedReply.raw(b'{"choices": [{"message": {"role": "assistant"}}]}'), "malformed"),
    (ScriptedReply.text(""), "empty"),
    (ScriptedReply.text("   \n"), "empty"),
], ids=["not-json", "no-choices", "no-content", "empty", "blank"])
async def test_malformed_or_empty_output_is_a_clear_error(llm, reply, message) -> None:
    llm.default = reply
    chat = client_for(llm, max_retries=0)
    try:
        with pytest.raises(UnavailableError, match=message):
            await chat.chat(HELLO)
    finally:
        await chat.close()


async def test_a_reply_past_the_size_limit_is_unusable_and_not_asked_again(llm) -> None:
    from agentscope_memory.llm import MAX_RESPONSE_BYTES

    # Just under the limit a reply is read as any other; past it, it is an unusable reply.
    fits = "摘要" + "x" * (MAX_RESPONSE_BYTES - 1000)
    llm.push(ScriptedReply.text(fits), ScriptedReply.text("摘要" + "x" * MAX_RESPONSE_BYTES))
    chat = client_for(llm, max_retries=2)
    try:
        assert (await chat.chat(HELLO)).text == fits
        with pytest.raises(UnavailableError, match="unusable response: larger than 4 MiB"):
            await chat.chat(HELLO)
    finally:
        await chat.close()
    assert len(llm.chat_requests) == 2


async def test_an_unreachable_endpoint_is_unavailable() -> None:
    with ScriptedLLM() as gone:
        url = gone.base_url
    chat = ChatClient(LlmConfig(url, "m", timeout_s=1.0, max_retries=0))
    try:
        with pytest.raises(UnavailableError, match="unreachable"):
            await chat.chat(HELLO)
    finally:
        await chat.close()


# -- through gRPC ---------------------------------------------------------------------------


async def _memory(server_factory, llm: ScriptedLLM, profile: str, **settings):
    config = dataclasses.replace(D3_CONFIG, profile=profile)
    settings.setdefault("llm_max_retries", 0)
    server = await server_factory(llm_base_url=llm.base_url, **settings)
    client = AsyncMemoryClient(server.address)
    channel = grpc.aio.insecure_channel(server.address)
    await client.create_memory("ac", "AUTO_CONTEXT", auto_context_config=config)
    return client, channel, pb_grpc.MemoryServiceStub(channel)


@pytest.mark.parametrize("profile", ["parity", "improved"],
                         ids=["parity", "improved"])
async def test_malformed_summary_through_grpc_keeps_the_memory(server_factory, llm, profile) -> None:
    llm.default = ScriptedReply.raw(b"not json at all")
    client, channel, stub = await _memory(server_factory, llm, profile)
    try:
        msgs = d3_messages()
        await client.add_messages("ac", msgs)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "malformed" in err.value.details()
        assert await client.get_messages("ac") == msgs
        assert not (await stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id="ac"))).events
        keys = [e.key for e in (await client.save_state("ac"))[0]]
        # Parity leaves Java's orphan offload (Q7); improved leaves nothing behind.
        assert ("autoContextMemory_offloadContext" in keys) is (profile == "parity")
        # The next call, with a working model, compresses normally.
        llm.default = ScriptedReply.text("SUMMARY")
        out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
        assert out.compressed and out.message_count == 13
    finally:
        await client.close()
        await channel.close()


async def test_a_summary_past_the_size_limit_through_grpc_keeps_the_memory(server_factory, llm) -> None:
    from agentscope_memory.llm import MAX_RESPONSE_BYTES

    llm.default = ScriptedReply.text("SUMMARY " + "x" * MAX_RESPONSE_BYTES)
    client, channel, stub = await _memory(server_factory, llm, "improved")
    try:
        msgs = d3_messages()
        await client.add_messages("ac", msgs)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "larger than 4 MiB" in err.value.details()
        assert await client.get_messages("ac") == msgs
    finally:
        await client.close()
        await channel.close()


async def test_a_transient_500_is_retried_by_the_server(server_factory, llm) -> None:
    llm.push(ScriptedReply.error(500), ScriptedReply.text("SUMMARY"))
    client, channel, stub = await _memory(server_factory, llm, "parity", llm_max_retries=1)
    try:
        await client.add_messages("ac", d3_messages())
        out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
        assert out.compressed and len(llm.requests) == 2
        summary = (await client.get_messages("ac"))[1]
        assert summary.text_content.startswith("SUMMARY\n<!-- CONTEXT_OFFLOAD: uuid=")
        assert summary.metadata["_chat_usage"]["inputTokens"] == 10
        assert summary.metadata["_chat_usage"]["outputTokens"] == 20
    finally:
        await client.close()
        await channel.close()
