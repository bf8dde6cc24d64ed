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
from agentscope_memory.convert.from_proto import UNKNOWN_ROLE_KEY, msg_from_proto
from agentscope_memory.message import ImageBlock, MessageError, MsgRole, TextBlock, ToolResultBlock

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


# A role number a newer server has (the proto's Role enum stops at ROLE_TOOL = 4 here).
NEWER_ROLE = 9


class NewerRoleServer(mem_grpc.MemoryServiceServicer):
    async def GetMessages(self, request, context):
        newer = pb.Msg(id="m3", role=NEWER_ROLE, name="开发者", metadata_json='{"来源": "新版"}',
                       content=[pb.ContentBlock(text=pb.TextBlock(text="请用中文回答"))])
        return mem_pb.GetMessagesResponse(messages=[_shared()[1], newer], total_size=2, etag="e1")


async def test_a_role_of_a_newer_server_is_read_as_user_with_its_number_in_metadata() -> None:
    """A role number this version does not know failed the whole read (`messages[1].role:
    unknown role 9`); the message is now read as USER (AgentScope's default role) with the
    number kept in its metadata, and a warning."""
    server = grpc.aio.server()
    mem_grpc.add_MemoryServiceServicer_to_server(NewerRoleServer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with AsyncMemoryClient(f"127.0.0.1:{port}", timeout=10) as client:
                tool, newer = await client.get_messages("对话")
                assert [m.id for m in (await client.read_messages("对话")).messages] == ["m2", "m3"]
    finally:
        await server.stop(None)
    assert tool.role is MsgRole.TOOL and "unknown_role" not in str(tool.metadata)
    assert newer.role is MsgRole.USER and newer.name == "开发者" and newer.text_content == "请用中文回答"
    assert newer.metadata == {"来源": "新版", UNKNOWN_ROLE_KEY: NEWER_ROLE}
    assert any("role this client does not know (9)" in str(w.message) for w in caught if w.category is RuntimeWarning)


def test_a_request_holding_an_unknown_role_is_still_refused() -> None:
    with pytest.raises(MessageError, match=r"messages\[0\]\.role: unknown role 9"):
        msg_from_proto(pb.Msg(role=NEWER_ROLE, content=[pb.ContentBlock(text=pb.TextBlock(text="x"))]), "messages[0]")


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
