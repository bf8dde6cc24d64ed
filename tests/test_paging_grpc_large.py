"""No response over 4 MiB, whatever is stored: a message of the largest accepted size and
100 MB of history move through channels with gRPC's stock 4 MiB receive limit."""

from __future__ import annotations

import hashlib
from typing import AsyncIterator

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    memory_service_pb2_grpc as pb_grpc,
)
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    state_service_pb2_grpc as state_grpc,
)
from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.errors import ResourceExhaustedError
from agentscope_memory.message import Msg, MsgRole, TextBlock
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, GRPC_DEFAULT_RECEIVE
from agentscope_memory.store.codec import encode_msg

MiB = 1024 * 1024


def sized(size: int, seed: str) -> Msg:
    """A user message whose stored form is exactly `size` bytes (Chinese and English text)."""
    msg = Msg.create(MsgRole.USER, f"{seed} 大消息 ")
    pad = size - len(encode_msg(msg))
    for _ in range(10):  # length prefixes grow with the text: converge on the exact size
        text = f"{seed} 大消息 " + "x" * pad
        candidate = Msg(msg.id, msg.name, msg.role, [TextBlock(text)], msg.metadata, msg.timestamp)
        if len(encode_msg(candidate)) == size:
            return candidate
        pad += size - len(encode_msg(candidate))
    raise AssertionError("no padding gives that size")


@pytest.fixture
async def stock(server_factory) -> AsyncIterator[tuple[AsyncMemoryClient, grpc.aio.Channel]]:
    """A client on a channel with gRPC's default limits (4 MiB receive)."""
    server = await server_factory()
    channel = grpc.aio.insecure_channel(server.address)
    client = AsyncMemoryClient(channel=channel)
    try:
        yield client, channel
    finally:
        await client.close()
        await channel.close()


async def test_a_message_of_the_largest_accepted_size_passes_every_read_in_one_page(stock) -> None:
    client, channel = stock
    assert DEFAULT_PAGE_BYTES < GRPC_DEFAULT_RECEIVE
    big = sized(DEFAULT_PAGE_BYTES, "最大")
    await client.create_memory("x")
    with pytest.raises(ResourceExhaustedError, match=r"messages\[0\]"):
        await client.add_messages("x", [sized(DEFAULT_PAGE_BYTES + 1, "过大")])
    stub = pb_grpc.MemoryServiceStub(channel)
    for kind in ("IN_MEMORY", "AUTO_CONTEXT"):
        memory_id = f"big-{kind}"
        await client.create_memory(memory_id, kind)
        await client.add_messages(memory_id, [Msg.create(MsgRole.USER, "before 之前"), big, Msg.create(MsgRole.USER, "after")])
        # Every page fits the stock channel; the big message travels alone.
        page = await stub.GetMessages(pb.GetMessagesRequest(memory_id=memory_id))
        assert len(page.messages) == 1 and page.next_page_token
        assert [m.text_content for m in await client.get_messages(memory_id)] == [
            "before 之前", big.text_content, "after"]
        entries, _ = await client.save_state(memory_id)
        with pytest.raises(grpc.aio.AioRpcError) as unary:
            await state_grpc.StateServiceStub(channel).SaveState(state_pb.SaveStateRequest(memory_id=memory_id))
        assert unary.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "StreamSaveState" in (unary.value.details() or "")
        await client.create_memory(memory_id + "-copy", kind)
        await client.load_state(memory_id + "-copy", entries)
        assert await client.get_messages(memory_id + "-copy") == await client.get_messages(memory_id)
    # The AutoContext reads page the same way.
    original: list[Msg] = []
    token = ""
    while True:
        response = await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="big-AUTO_CONTEXT", page_token=token))
        original += [msg_from_proto(m) for m in response.messages]
        token = response.next_page_token
        if not token:
            break
    assert [m.text_content for m in original] == ["before 之前", big.text_content, "after"]
    prepared: list[Msg] = []
    token = ""
    while True:
        reasoning = await stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(
            memory_id="big-AUTO_CONTEXT", system_prompt="你是助手", page_token=token))
        prepared += [msg_from_proto(m) for m in reasoning.messages]
        token = reasoning.next_page_token
        if not token:
            break
    assert prepared[0].role is MsgRole.SYSTEM and prepared[0].text_content.startswith("你是助手")
    working = await client.get_messages("big-AUTO_CONTEXT")
    assert [m.text_content for m in prepared[1:]] == [m.text_content for m in working]


async def test_a_stream_load_larger_than_the_limit_is_refused_and_changes_nothing(stock) -> None:
    client, channel = stock
    await client.create_memory("m")
    await client.add_message("m", Msg.create(MsgRole.USER, "kept 保留"))
    stub = state_grpc.StateServiceStub(channel)
    pieces = [state_pb.StreamLoadStateRequest(memory_id="m", entries=[
        state_pb.StateEntry(key="memory_messages", list=state_pb.JsonList(items=["{"]), partial=True)])]
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await stub.StreamLoadState(iter(pieces))
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "partial" in (failure.value.details() or "")
    assert [m.text_content for m in await client.get_messages("m")] == ["kept 保留"]


def digest(msgs: list[Msg]) -> str:
    h = hashlib.sha256()
    for m in msgs:
        h.update(encode_msg(m))
    return h.hexdigest()


@pytest.mark.slow
def test_100_mb_of_history_moves_through_stock_channels(threaded_server) -> None:
    """100 messages of 1 MiB: the working list, the original history, the state (200 MB: both
    lists) saved and loaded, each through a stock 4 MiB channel."""
    channel = grpc.insecure_channel(threaded_server.address)
    try:
        client = MemoryClient(channel=channel, timeout=600)
        client.create_memory("h", "AUTO_CONTEXT")
        for batch in range(10):
            client.add_messages("h", [sized(MiB, f"第{batch}批{i}") for i in range(10)])
        msgs = client.get_messages("h")
        assert len(msgs) == 100 and sum(len(encode_msg(m)) for m in msgs) == 100 * MiB
        stub = pb_grpc.MemoryServiceStub(channel)
        original: list[Msg] = []
        token, pages = "", 0
        while True:
            response = stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="h", page_token=token))
            original += [msg_from_proto(m) for m in response.messages]
            token, pages = response.next_page_token, pages + 1
            if not token:
                break
        assert digest(original) == digest(msgs) and pages >= 25
        entries, _ = client.save_state("h")
        client.create_memory("h2", "AUTO_CONTEXT")
        client.load_state("h2", entries)
        assert digest(client.get_messages("h2")) == digest(msgs)
        assert client.get_memory("h2").message_count == 100
    finally:
        channel.close()
