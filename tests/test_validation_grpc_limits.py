"""A message at the nesting limit travels every path and back: what AddMessages accepts,
SaveState returns, the Python client reads, LoadState and ImportSession accept again."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from agentscope_memory import errors
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb
from agentscope_memory._proto.agentscope.memory.v1 import (
    state_service_pb2_grpc as spb_grpc,
)
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.message import (
    Msg,
    MsgRole,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentscope_memory.validation import MAX_JSON_DEPTH


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "叶"}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


async def test_a_message_at_the_depth_limit_round_trips(server) -> None:
    # Message object 1, metadata object 2: 255 more levels make the message's JSON 256 deep.
    at_limit = Msg.create(MsgRole.USER, "深", metadata=nested(MAX_JSON_DEPTH - 1))
    # A tool input inside two tool results: block 3, result output 5, inner block 5... input last.
    inner = ToolUseBlock(id="c", name="f", input=nested(MAX_JSON_DEPTH - 7))
    tool = Msg.create(MsgRole.TOOL, content=[ToolResultBlock(id="r", name="f", output=[
        ToolResultBlock(id="r2", name="f", output=[inner, TextBlock("x")])])])
    async with AsyncMemoryClient(server.address, timeout=30) as client, grpc.aio.insecure_channel(server.address) as ch:
        await client.create_memory("深 1")
        await client.add_messages("深 1", [at_limit, tool])
        read = await client.get_messages("深 1")
        assert read[0].metadata == at_limit.metadata and read[1] == tool
        entries, _ = await client.save_state("深 1")
        await client.create_memory("深 2")
        await client.load_state("深 2", entries)
        assert await client.get_messages("深 2") == read
        state = spb_grpc.StateServiceStub(ch)
        await state.ExportSession(spb.ExportSessionRequest(session_id="深 会话", memory_ids=["深 1"]))
        await client.create_memory("深 3")
        await state.ImportSession(spb.ImportSessionRequest(session_id="深 会话", memory_id="深 3"))
        assert await client.get_messages("深 3") == read

        too_deep = Msg.create(MsgRole.USER, "深", metadata=nested(MAX_JSON_DEPTH))
        with pytest.raises(errors.InvalidArgumentError, match=r"messages\[0\]\.metadata_json: is nested more than 256"):
            await client.add_messages("深 1", [too_deep])
        assert await client.get_messages("深 1") == read
