"""InMemoryMemory semantics through gRPC, with the asyncio and the blocking client."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.errors import AbortedError, AlreadyExistsError, NotFoundError
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock, ToolUseBlock
from agentscope_memory.convert.to_proto import msg_to_proto


def user(text: str) -> Msg:
    return Msg.create(MsgRole.USER, text)


async def test_add_then_get_returns_messages_in_insertion_order(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m1")
    sent = [user(f"message {i}") for i in range(5)]
    assert await aclient.add_messages("m1", sent[:2]) == 2
    assert await aclient.add_messages("m1", sent[2:]) == 5
    assert await aclient.get_messages("m1") == sent


async def test_get_returns_a_fresh_snapshot(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m1")
    await aclient.add_message("m1", user("a"))
    first = await aclient.get_messages("m1")
    first.append(user("local only"))
    first[0].content.append(TextBlock("mutated"))
    assert [m.text_content for m in await aclient.get_messages("m1")] == ["a"]


async def test_new_memory_is_empty(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("empty")
    assert await aclient.get_messages("empty") == []
    assert (await aclient.get_memory("empty")).message_count == 0


async def test_delete_message_by_index(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m1")
    msgs = [user("one"), user("two"), user("three")]
    await aclient.add_messages("m1", msgs)
    assert await aclient.delete_message("m1", 1) is True
    assert await aclient.get_messages("m1") == [msgs[0], msgs[2]]


async def test_delete_out_of_range_is_a_no_op(aclient: AsyncMemoryClient) -> None:
    # AgentScope's contract: -1, 5 and size are ignored; the size stays 2.
    await aclient.create_memory("m1")
    await aclient.add_messages("m1", [user("a"), user("b")])
    for index in (-1, 5, 2):
        assert await aclient.delete_message("m1", index) is False
    assert len(await aclient.get_messages("m1")) == 2
    await aclient.create_memory("m2")
    assert await aclient.delete_message("m2", 0) is False


@pytest.mark.parametrize("kind", ["IN_MEMORY", "AUTO_CONTEXT", "TIERED"])
async def test_a_delete_naming_the_message_it_means_never_deletes_another(aclient: AsyncMemoryClient,
                                                                          kind: str) -> None:
    # Two clients read [甲, 乙, 丙]; one deletes 甲, so 乙 moves to index 0 and the other's stale
    # "delete index 1" would hit 丙.
    await aclient.create_memory("会话", kind)
    msgs = [Msg.create(MsgRole.USER, text, id=f"消息-{text}") for text in ("甲", "乙", "丙")]
    await aclient.add_messages("会话", msgs)
    assert await aclient.delete_message("会话", 0, expected_id="消息-甲") is True
    with pytest.raises(AbortedError, match="index 1 has id '消息-丙', not '消息-乙'.*nothing was deleted"):
        await aclient.delete_message("会话", 1, expected_id="消息-乙")
    with pytest.raises(AbortedError, match="index 2 is past the end"):
        await aclient.delete_message("会话", 2, expected_id="消息-乙")
    assert [m.id for m in await aclient.get_messages("会话")] == ["消息-乙", "消息-丙"]
    assert await aclient.delete_message("会话", 0, expected_id="消息-乙") is True
    assert [m.id for m in await aclient.get_messages("会话")] == ["消息-丙"]


async def test_add_hundred_delete_fifty_then_clear(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m1")
    await aclient.add_messages("m1", [user(str(i)) for i in range(100)])
    for _ in range(50):
        await aclient.delete_message("m1", 0)
    assert [m.text_content for m in await aclient.get_messages("m1")] == [str(i) for i in range(50, 100)]
    await aclient.clear("m1")
    assert await aclient.get_messages("m1") == []
    await aclient.clear("m1")
    assert (await aclient.get_memory("m1")).message_count == 0


async def test_tool_messages_keep_every_field(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m1")
    call = Msg.create(
        MsgRole.ASSISTANT,
        content=[ToolUseBlock("call_1", "get_weather", {"city": "Paris", "days": 3}, '{"city":"Paris"}', {})],
        name="Assistant",
        metadata={"_chat_usage": {"inputTokens": 1, "outputTokens": 2, "time": 0.5, "totalTokens": 3}},
    )
    result = Msg.create(
        MsgRole.TOOL,
        content=[ToolResultBlock("call_1", "get_weather", [TextBlock('"Sunny"')], {})],
        name="Assistant",
    )
    await aclient.add_messages("m1", [call, result])
    assert await aclient.get_messages("m1") == [call, result]


async def test_long_histories_come_in_pages(aclient: AsyncMemoryClient, server) -> None:
    await aclient.create_memory("long")
    batch = [user(f"m{i}") for i in range(1000)]
    for start in range(0, 2500, 1000):
        await aclient.add_messages("long", [user(f"m{i}") for i in range(start, min(start + 1000, 2500))])
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        first = await stub.GetMessages(pb.GetMessagesRequest(memory_id="long", page_size=1000))
        assert len(first.messages) == 1000 and first.total_size == 2500 and first.next_page_token
        second = await stub.GetMessages(
            pb.GetMessagesRequest(memory_id="long", page_size=1000, page_token=first.next_page_token)
        )
        assert second.messages[0].content[0].text.text == "m1000"
    texts = [m.text_content async for m in aclient.iter_messages("long", page_size=300)]
    assert texts == [f"m{i}" for i in range(2500)]
    del batch


async def test_pages_are_cut_by_size(server_factory) -> None:
    server = await server_factory(max_page_bytes=100_000)
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("big")
        await client.add_messages("big", [user("x" * 30_000) for _ in range(10)])
        async with grpc.aio.insecure_channel(server.address) as channel:
            page = await pb_grpc.MemoryServiceStub(channel).GetMessages(pb.GetMessagesRequest(memory_id="big"))
        assert 1 <= len(page.messages) <= 4 and page.next_page_token
        assert len(await client.get_messages("big")) == 10


async def test_a_change_between_pages_aborts_the_listing_instead_of_mixing_states(aclient: AsyncMemoryClient, server) -> None:
    await aclient.create_memory("m1")
    await aclient.add_messages("m1", [user(str(i)) for i in range(10)])
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        first = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m1", page_size=5))
        await stub.DeleteMessage(pb.DeleteMessageRequest(memory_id="m1", index=0))
        with pytest.raises(grpc.aio.AioRpcError) as failure:
            await stub.GetMessages(pb.GetMessagesRequest(memory_id="m1", page_size=5, page_token=first.next_page_token))
    # The token names the state the first page read: the second page of another state would
    # make a list that never existed, so the read fails and says why.
    assert failure.value.code() == grpc.StatusCode.ABORTED
    assert "'m1' changed (version 2 -> 3) between pages" in (failure.value.details() or "")
    assert [m.text_content for m in await aclient.get_messages("m1")] == [str(i) for i in range(1, 10)]


async def test_etag_tells_a_client_its_cached_messages_are_current(aclient: AsyncMemoryClient, server) -> None:
    await aclient.create_memory("m1")
    await aclient.add_messages("m1", [user("a"), user("b")])
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)

        async def get(etag: str = "") -> pb.GetMessagesResponse:
            return await stub.GetMessages(pb.GetMessagesRequest(memory_id="m1", if_none_match=etag))

        first = await get()
        assert first.etag and not first.not_modified and len(first.messages) == 2
        same = await get(first.etag)
        assert same.not_modified and not same.messages and same.etag == first.etag and same.total_size == 2
        # An add names the state it was applied to: a client holding that etag can append locally.
        added = await stub.AddMessages(pb.AddMessagesRequest(memory_id="m1", messages=[msg_to_proto(user("c"))]))
        assert added.previous_etag == first.etag and added.etag not in ("", first.etag)
        after_add = await get(first.etag)
        assert not after_add.not_modified and len(after_add.messages) == 3 and after_add.etag == added.etag
        # Every other change moves the etag too.
        etags = [after_add.etag]
        await stub.DeleteMessage(pb.DeleteMessageRequest(memory_id="m1", index=0))
        etags.append((await get(etags[-1])).etag)
        await stub.ClearMessages(pb.ClearMessagesRequest(memory_id="m1"))
        etags.append((await get(etags[-1])).etag)
        await aclient.load_state("m1", (await aclient.save_state("m1"))[0])
        etags.append((await get(etags[-1])).etag)
        assert len(set(etags)) == 4
        # Deleted and created again, back at the same version: still a different etag.
        await aclient.delete_memory("m1")
        await aclient.create_memory("m1")
        await aclient.add_messages("m1", [user("a"), user("b")])
        again = await get(first.etag)
        assert not again.not_modified and again.etag != first.etag and len(again.messages) == 2


async def test_etag_edge_cases(aclient: AsyncMemoryClient, server) -> None:
    await aclient.create_memory("m1")
    await aclient.add_messages("m1", [user(str(i)) for i in range(10)])
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        first = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m1", page_size=5))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetMessages(pb.GetMessagesRequest(memory_id="m1", page_token=first.next_page_token,
                                                         if_none_match=first.etag))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "if_none_match" in err.value.details()
        # A made-up etag is just a mismatch.
        full = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m1", if_none_match="no such etag"))
        assert len(full.messages) == 10 and not full.not_modified
        # A replayed add did not change anything now, so it names no states.
        request = pb.AddMessagesRequest(memory_id="m1", messages=[msg_to_proto(user("c"))], request_id="r1")
        await stub.AddMessages(request)
        replay = await stub.AddMessages(request)
        assert replay.replayed and replay.etag == "" and replay.previous_etag == ""


async def test_get_messages_is_one_state_when_the_history_is_rewritten_between_pages(server_factory) -> None:
    server = await server_factory(max_page_bytes=2_000)
    async with AsyncMemoryClient(server.address) as client, AsyncMemoryClient(server.address) as other:
        await client.create_memory("m")
        await client.add_messages("m", [user(f"old {i} " + "x" * 500) for i in range(10)])
        real = client._stub.GetMessages
        tokens: list[str] = []

        async def get_then_rewrite(request, **kwargs):
            tokens.append(request.page_token)
            response = await real(request, **kwargs)
            if len(tokens) == 1:  # as a compression does, between the client's pages
                await other.clear("m")
                await other.add_messages("m", [user(f"new {i}") for i in range(3)])
            return response

        client._stub.GetMessages = get_then_rewrite
        assert [m.text_content for m in await client.get_messages("m")] == ["new 0", "new 1", "new 2"]
        assert tokens[0] == "" and tokens[1] != "" and tokens[2] == "", "the first read was abandoned"


def test_blocking_get_messages_is_one_state_too(threaded_server) -> None:
    with MemoryClient(threaded_server.address) as client, MemoryClient(threaded_server.address) as other:
        client.create_memory("m")
        for start in range(0, 2500, 1000):
            client.add_messages("m", [user(f"old {i}") for i in range(start, min(start + 1000, 2500))])
        real = client._stub.GetMessages
        calls: list[str] = []

        def get_then_rewrite(request, **kwargs):
            response = real(request, **kwargs)
            calls.append(request.page_token)
            if len(calls) == 1:
                other.clear("m")
                other.add_message("m", user("new"))
            return response

        client._stub.GetMessages = get_then_rewrite
        assert [m.text_content for m in client.get_messages("m")] == ["new"]


async def test_get_messages_raises_rather_than_mix_states_when_every_attempt_is_torn(server_factory) -> None:
    server = await server_factory(max_page_bytes=2_000)
    async with AsyncMemoryClient(server.address) as client, AsyncMemoryClient(server.address) as other:
        await client.create_memory("m")
        await client.add_messages("m", [user(f"第{i}条 " + "x" * 500) for i in range(10)])
        real = client._stub.GetMessages
        first_pages = 0

        async def get_then_append(request, **kwargs):
            nonlocal first_pages
            response = await real(request, **kwargs)
            if not request.page_token:  # another writer appends after every first page
                first_pages += 1
                await other.add_message("m", user("又一条"))
            return response

        client._stub.GetMessages = get_then_append
        with pytest.raises(AbortedError, match="between pages"):
            await client.get_messages("m")
        assert first_pages == 5  # CONSISTENT_READ_ATTEMPTS, then the error


async def test_memories_are_listed_created_and_deleted(aclient: AsyncMemoryClient) -> None:
    for i in range(7):
        await aclient.create_memory(f"mem-{i}", labels={"team": "a"})
    listed = [m async for m in aclient.list_memories(page_size=3)]
    assert [m.memory_id for m in listed] == [f"mem-{i}" for i in range(7)]
    assert listed[0].labels == {"team": "a"} and listed[0].kind == "IN_MEMORY"
    with pytest.raises(AlreadyExistsError):
        await aclient.create_memory("mem-0")
    again = await aclient.create_memory("mem-0", allow_existing=True)
    assert again.memory_id == "mem-0"
    await aclient.delete_memory("mem-0")
    with pytest.raises(NotFoundError):
        await aclient.get_messages("mem-0")
    with pytest.raises(NotFoundError):
        await aclient.delete_memory("mem-0")


async def test_version_grows_with_every_change(aclient: AsyncMemoryClient) -> None:
    created = await aclient.create_memory("m1")
    await aclient.add_message("m1", user("a"))
    await aclient.delete_message("m1", 0)
    await aclient.clear("m1")
    assert (await aclient.get_memory("m1")).version == created.version + 3


async def test_concurrent_appends_are_all_kept(aclient: AsyncMemoryClient) -> None:
    await aclient.create_memory("m1")

    async def writer(w: int) -> None:
        for i in range(20):
            await aclient.add_message("m1", user(f"{w}:{i}"))

    await asyncio.gather(*(writer(w) for w in range(8)))
    texts = [m.text_content for m in await aclient.get_messages("m1")]
    assert len(texts) == 160
    for w in range(8):
        mine = [t for t in texts if t.startswith(f"{w}:")]
        assert mine == [f"{w}:{i}" for i in range(20)]


async def test_memory_store_backend_behaves_the_same(server_factory) -> None:
    server = await server_factory(store="memory")
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("m1")
        await client.add_messages("m1", [user("a"), user("b"), user("c")])
        await client.delete_message("m1", 1)
        assert [m.text_content for m in await client.get_messages("m1")] == ["a", "c"]


def test_blocking_client_has_the_same_semantics(threaded_server) -> None:
    with MemoryClient(threaded_server.address, timeout=10) as client:
        client.create_memory("sync")
        msgs = [user("one"), user("two"), user("three")]
        assert client.add_messages("sync", msgs) == 3
        assert client.get_messages("sync") == msgs
        assert client.delete_message("sync", 7) is False
        assert client.delete_message("sync", -1) is False
        assert client.delete_message("sync", 0) is True
        assert [m.text_content for m in client.get_messages("sync")] == ["two", "three"]
        with pytest.raises(AbortedError, match="nothing was deleted"):
            client.delete_message("sync", 0, expected_id=msgs[0].id)
        assert client.delete_message("sync", 1, expected_id=msgs[2].id) is True
        assert [m.text_content for m in client.get_messages("sync")] == ["two"]
        assert [m.memory_id for m in client.list_memories()] == ["sync"]
        client.clear("sync")
        assert client.get_messages("sync") == []
        with pytest.raises(NotFoundError, match="'nope' does not exist"):
            client.get_messages("nope")
