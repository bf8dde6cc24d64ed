"""Bad input gets a specific status naming the field and the reason, and changes nothing."""

from __future__ import annotations

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as mpb
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.convert.to_proto import msg_to_proto

INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED


def good() -> mpb.Msg:
    return msg_to_proto(Msg.create(MsgRole.USER, "fine"))


def text_block(text: str = "t") -> mpb.ContentBlock:
    return mpb.ContentBlock(text=mpb.TextBlock(text=text))


@pytest.fixture
async def stub(server_factory):
    server = await server_factory(max_message_bytes=2000, max_batch_messages=5)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=[good(), good()]))
        yield stub


async def snapshot(stub) -> tuple[list[bytes], int]:
    page = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"))
    memory = (await stub.GetMemory(pb.GetMemoryRequest(memory_id="m"))).memory
    return [m.SerializeToString() for m in page.messages], memory.version


async def expect(stub, call, request, code: grpc.StatusCode, *fragments: str) -> None:
    before = await snapshot(stub)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call(request)
    assert err.value.code() == code, err.value.details()
    for fragment in fragments:
        assert fragment in err.value.details(), err.value.details()
    assert await snapshot(stub) == before


def bad_msg(**changes) -> mpb.Msg:
    msg = good()
    for name, value in changes.items():
        if name == "content":
            del msg.content[:]
            msg.content.extend(value)
        else:
            setattr(msg, name, value)
    return msg


# Any Unicode text is an id (`../etc`, `a/b`, `会话 42` are valid: see test_ids_grpc_unicode.py);
# what is refused is empty, blank, control characters (NUL included) and more than 256 bytes.
@pytest.mark.parametrize("memory_id", ["", "   ", "a\x00b", "tab\tid", "del\x7f", "c1\x85", "x" * 257, "会" * 86])
async def test_bad_memory_ids_are_rejected_everywhere(stub, memory_id: str) -> None:
    for call, request in [
        (stub.CreateMemory, pb.CreateMemoryRequest(memory_id=memory_id, kind=pb.MEMORY_KIND_IN_MEMORY)),
        (stub.AddMessages, pb.AddMessagesRequest(memory_id=memory_id, messages=[good()])),
        (stub.GetMessages, pb.GetMessagesRequest(memory_id=memory_id)),
        (stub.DeleteMessage, pb.DeleteMessageRequest(memory_id=memory_id, index=0)),
        (stub.ClearMessages, pb.ClearMessagesRequest(memory_id=memory_id)),
        (stub.GetMemory, pb.GetMemoryRequest(memory_id=memory_id)),
        (stub.DeleteMemory, pb.DeleteMemoryRequest(memory_id=memory_id)),
    ]:
        await expect(stub, call, request, INVALID, "memory_id")


async def test_id_refusals_name_the_reason(stub) -> None:
    await expect(stub, stub.GetMessages, pb.GetMessagesRequest(memory_id="a\x00b"), INVALID,
                 "memory_id", "NUL character")
    await expect(stub, stub.GetMessages, pb.GetMessagesRequest(memory_id="会" * 86), INVALID,
                 "memory_id", "258 bytes of UTF-8; at most 256")
    await expect(stub, stub.GetMessages, pb.GetMessagesRequest(memory_id="a\x01b"), INVALID,
                 "memory_id", "control character")
    await expect(stub, stub.GetMessages, pb.GetMessagesRequest(memory_id=""), INVALID,
                 "memory_id: is required")


async def test_unknown_memory_is_not_found(stub) -> None:
    for call, request in [
        (stub.AddMessages, pb.AddMessagesRequest(memory_id="ghost", messages=[good()])),
        (stub.GetMessages, pb.GetMessagesRequest(memory_id="ghost")),
        (stub.DeleteMessage, pb.DeleteMessageRequest(memory_id="ghost", index=0)),
        (stub.ClearMessages, pb.ClearMessagesRequest(memory_id="ghost")),
        (stub.GetMemory, pb.GetMemoryRequest(memory_id="ghost")),
    ]:
        await expect(stub, call, request, grpc.StatusCode.NOT_FOUND, "'ghost' does not exist")


async def test_unknown_role(stub) -> None:
    await expect(stub, stub.AddMessages,
                 pb.AddMessagesRequest(memory_id="m", messages=[good(), bad_msg(role=42)]),
                 INVALID, "messages[1].role", "unknown role 42")


async def test_block_with_no_type(stub) -> None:
    await expect(stub, stub.AddMessages,
                 pb.AddMessagesRequest(memory_id="m", messages=[bad_msg(content=[text_block(), mpb.ContentBlock()])]),
                 INVALID, "messages[0].content[1]", "has no type")


async def test_invalid_base64(stub) -> None:
    image = mpb.ContentBlock(image=mpb.ImageBlock(source=mpb.Source(
        base64=mpb.Base64Source(media_type="image/png", data="not base64!!"))))
    await expect(stub, stub.AddMessages, pb.AddMessagesRequest(memory_id="m", messages=[bad_msg(content=[image])]),
                 INVALID, "messages[0].content[0].image.source.base64.data", "not valid base64")


async def test_media_without_source_or_data(stub) -> None:
    audio = mpb.ContentBlock(audio=mpb.AudioBlock())
    await expect(stub, stub.AddMessages, pb.AddMessagesRequest(memory_id="m", messages=[bad_msg(content=[audio])]),
                 INVALID, "messages[0].content[0].audio.source", "is required")
    url = mpb.ContentBlock(image=mpb.ImageBlock(source=mpb.Source(url=mpb.UrlSource(url=""))))
    await expect(stub, stub.AddMessages, pb.AddMessagesRequest(memory_id="m", messages=[bad_msg(content=[url])]),
                 INVALID, "image.source.url.url", "is required")


@pytest.mark.parametrize(("text", "reason"), [("{not json", "not valid JSON"), ("[1,2]", "must be a JSON object"),
                                               ('{"x": NaN}', "not valid JSON")])
async def test_malformed_metadata(stub, text: str, reason: str) -> None:
    await expect(stub, stub.AddMessages, pb.AddMessagesRequest(memory_id="m", messages=[bad_msg(metadata_json=text)]),
                 INVALID, "messages[0].metadata_json", reason)


async def test_malformed_tool_input(stub) -> None:
    block = mpb.ContentBlock(tool_use=mpb.ToolUseBlock(id="c", name="n", input_json='"str"'))
    await expect(stub, stub.AddMessages, pb.AddMessagesRequest(memory_id="m", messages=[bad_msg(content=[block])]),
                 INVALID, "messages[0].content[0].tool_use.input_json", "JSON object")


async def test_negative_index(stub) -> None:
    await expect(stub, stub.DeleteMessage, pb.DeleteMessageRequest(memory_id="m", index=-1),
                 INVALID, "index", "must not be negative")


async def test_message_over_the_size_limit(stub) -> None:
    await expect(stub, stub.AddMessages,
                 pb.AddMessagesRequest(memory_id="m", messages=[good(), bad_msg(content=[text_block("x" * 5000)])]),
                 EXHAUSTED, "messages[1]", "at most 2000")


async def test_batch_over_the_batch_limit(stub) -> None:
    await expect(stub, stub.AddMessages, pb.AddMessagesRequest(memory_id="m", messages=[good()] * 6),
                 EXHAUSTED, "messages", "at most 5 per call")


async def test_empty_batch(stub) -> None:
    await expect(stub, stub.AddMessages, pb.AddMessagesRequest(memory_id="m"), INVALID,
                 "messages", "at least one")


async def test_unspecified_kind_and_misplaced_config(stub) -> None:
    await expect(stub, stub.CreateMemory, pb.CreateMemoryRequest(memory_id="n"), INVALID, "kind")
    await expect(stub, stub.CreateMemory,
                 pb.CreateMemoryRequest(memory_id="n", kind=pb.MEMORY_KIND_IN_MEMORY,
                                        auto_context_config=pb.AutoContextConfig(msg_threshold=3)),
                 INVALID, "auto_context_config")


async def test_bad_page_tokens_and_sizes(stub) -> None:
    await expect(stub, stub.GetMessages, pb.GetMessagesRequest(memory_id="m", page_token="garbage"),
                 INVALID, "page_token")
    other = await stub.ListMemories(pb.ListMemoriesRequest(page_size=1))
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="n", kind=pb.MEMORY_KIND_IN_MEMORY))
    other = await stub.ListMemories(pb.ListMemoriesRequest(page_size=1))
    # A token of one listing is refused by another.
    await expect(stub, stub.GetMessages, pb.GetMessagesRequest(memory_id="m", page_token=other.next_page_token),
                 INVALID, "page_token")
    await expect(stub, stub.GetMessages, pb.GetMessagesRequest(memory_id="m", page_size=-1),
                 INVALID, "page_size")


async def test_bad_request_id(stub) -> None:
    await expect(stub, stub.AddMessages,
                 pb.AddMessagesRequest(memory_id="m", messages=[good()], request_id="has space"),
                 INVALID, "request_id")


async def test_unicode_and_empty_values_are_accepted(stub) -> None:
    odd = bad_msg(content=[text_block(""), text_block("用户😀\u2028\x7f")], name="", metadata_json="{}")
    response = await stub.AddMessages(pb.AddMessagesRequest(memory_id="m", messages=[odd]))
    assert response.message_count == 3
    page = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"))
    odd.metadata_json = ""  # "{}" and "" both mean an empty map; the server writes ""
    assert page.messages[2] == odd


async def test_unimplemented_rpcs_say_what_is_missing(stub, server_factory) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="m"))
    assert err.value.code() in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.FAILED_PRECONDITION)
    assert err.value.details()
