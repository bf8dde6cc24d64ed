"""A client reading from a newer server: a content block (or a media source) of a kind this
version does not know is left out of what it reads, with a warning, instead of failing the whole
read of a conversation that newer agents share (as the Java client does). The server, reading a
request, still refuses such a block, naming it."""

from __future__ import annotations

import warnings

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as mem_grpc
from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.message import ImageBlock, MessageError, TextBlock, ToolResultBlock

# Field 12 of ContentBlock and field 9 of Source, length-delimited: kinds a newer server added.
NEWER_BLOCK = pb.ContentBlock.FromString(b"\x62\x02\x08\x01")
NEWER_IMAGE = pb.ContentBlock(image=pb.ImageBlock(source=pb.Source.FromString(b"\x4a\x00")))


def _shared() -> list[pb.Msg]:
    return [
        pb.Msg(id="m1", role=pb.ROLE_USER, content=[pb.ContentBlock(text=pb.TextBlock(text="看这张图")), NEWER_IMAGE,
                                                    NEWER_BLOCK]),
        pb.Msg(id="m2", role=pb.ROLE_TOOL, content=[pb.ContentBlock(tool_result=pb.ToolResultBlock(
            id="c1", name="search", output=[NEWER_BLOCK, pb.ContentBlock(text=pb.TextBlock(text="found"))]))]),
    ]


class NewerServer(mem_grpc.MemoryServiceServicer):
    async def GetMessages(self, request, context):
        return mem_pb.GetMessagesResponse(messages=_shared(), total_size=2)


async def test_a_client_leaves_out_blocks_of_a_newer_kind_and_reads_the_rest() -> None:
    server = grpc.aio.server()
    mem_grpc.add_MemoryServiceServicer_to_server(NewerServer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with AsyncMemoryClient(f"127.0.0.1:{port}", timeout=10) as client:
                first, second = await client.get_messages("对话")
    finally:
        await server.stop(None)
    assert [type(b) for b in first.content] == [TextBlock] and first.text_content == "看这张图"
    [result] = second.content
    assert isinstance(result, ToolResultBlock) and [type(b) for b in result.output] == [TextBlock]
    said = {str(w.message) for w in caught if w.category is RuntimeWarning}
    assert any("field 12" in m for m in said) and any("field 9" in m for m in said)


def test_a_request_holding_a_block_of_an_unknown_kind_is_still_refused() -> None:
    with pytest.raises(MessageError, match=r"messages\[0\]\.content\[1\]\.image\.source: has no kind"):
        msg_from_proto(_shared()[0], "messages[0]")
    with pytest.raises(MessageError, match=r"messages\[1\]\.content\[0\]\.tool_result\.output\[0\]: has no type"):
        msg_from_proto(_shared()[1], "messages[1]")
    # An empty block is an error for a client too: nothing newer is in it.
    empty = pb.Msg(id="m", role=pb.ROLE_USER, content=[pb.ContentBlock()])
    with pytest.raises(MessageError, match="has no type"):
        msg_from_proto(empty, "message", newer_kinds=True)
    with pytest.warns(RuntimeWarning, match="field (9|12)"):
        read = msg_from_proto(_shared()[0], "message", newer_kinds=True)
    assert not any(isinstance(b, ImageBlock) for b in read.content)
