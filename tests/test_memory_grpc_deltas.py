"""`GetMessages` deltas over gRPC: a second client's appends reach a caching reader as just the
added messages (`accept_delta` -> `delta`), across a restart and across replicas of one
PostgreSQL database; older readers (no `accept_delta`) get the whole list as before."""

from __future__ import annotations

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings
from agentscope_memory.session.state import MEMORY_MESSAGES, StateEntry, messages_to_items


def user(text: str) -> Msg:
    return Msg.create(MsgRole.USER, text)


def texts(response: pb.GetMessagesResponse) -> list[str]:
    return [m.content[0].text.text for m in response.messages]


async def test_a_second_clients_appends_arrive_as_a_delta(server_factory) -> None:
    server = await server_factory()
    async with AsyncMemoryClient(server.address) as writer, grpc.aio.insecure_channel(server.address) as channel:
        reader = pb_grpc.MemoryServiceStub(channel)
        await writer.create_memory("m")
        await writer.add_messages("m", [user(f"旧 {i}") for i in range(3)])
        first = await reader.GetMessages(pb.GetMessagesRequest(memory_id="m"))
        await writer.add_messages("m", [user("新 1"), user("新 2")])
        delta = await reader.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=first.etag, accept_delta=True))
        assert delta.delta and texts(delta) == ["新 1", "新 2"] and delta.total_size == 5
        old_client = await reader.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=first.etag))
        assert not old_client.delta and len(old_client.messages) == 5 and old_client.etag == delta.etag
        # A delete by the other client: the whole list again.
        await writer.delete_message("m", 0)
        await writer.add_messages("m", [user("新 3")])
        whole = await reader.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=delta.etag, accept_delta=True))
        assert not whole.delta and texts(whole) == ["旧 1", "旧 2", "新 1", "新 2", "新 3"]


async def test_a_delta_after_a_restart(server_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    async with AsyncMemoryClient(server.address) as client, grpc.aio.insecure_channel(server.address) as channel:
        await client.create_memory("m")
        await client.add_messages("m", [user("a")])
        etag = (await pb_grpc.MemoryServiceStub(channel).GetMessages(pb.GetMessagesRequest(memory_id="m"))).etag
    await server.stop()
    restarted = await server_factory(data_dir=data)
    async with AsyncMemoryClient(restarted.address) as client, grpc.aio.insecure_channel(restarted.address) as channel:
        await client.add_messages("m", [user("b")])
        page = await pb_grpc.MemoryServiceStub(channel).GetMessages(
            pb.GetMessagesRequest(memory_id="m", if_none_match=etag, accept_delta=True))
        assert page.delta and texts(page) == ["b"]


async def test_replicas_on_one_postgres_answer_deltas_of_each_others_writes(server_factory, postgres_dsn) -> None:
    a, b = [await server_factory(store="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]
    async with AsyncMemoryClient(a.address) as writer, grpc.aio.insecure_channel(b.address) as channel:
        reader = pb_grpc.MemoryServiceStub(channel)
        await writer.create_memory("m", "AUTO_CONTEXT")
        await writer.add_messages("m", [user("副本 0")])
        first = await reader.GetMessages(pb.GetMessagesRequest(memory_id="m"))
        await writer.add_messages("m", [user("副本 1")])
        page = await reader.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=first.etag, accept_delta=True))
        assert page.delta and texts(page) == ["副本 1"]
        await writer.clear("m")
        await writer.add_messages("m", [user("副本 2"), user("副本 3")])
        page = await reader.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=page.etag, accept_delta=True))
        assert not page.delta and texts(page) == ["副本 2", "副本 3"]


@pytest.mark.parametrize("mode", ["remote", "local"])
async def test_the_python_clients_keep_a_copy_current_with_etags(server_factory, tmp_path, mode) -> None:
    """`read_messages` and `add_messages_with_etags` (remote and local mode alike) tell a caller
    that keeps a copy what changed since its etag: nothing, only the added messages, or (after
    anything else) the whole list, read across pages as one state."""
    if mode == "remote":
        server = await server_factory()
        client, other = AsyncMemoryClient(server.address), AsyncMemoryClient(server.address)
    else:
        client = other = AsyncMemoryClient.local(ServiceSettings(data_dir=tmp_path / "local"))
    async with client:
        await client.create_memory("会话")
        whole = await client.read_messages("会话")
        assert (whole.messages, whole.not_modified, whole.delta) == ([], False, False) and whole.etag
        # More than one page (1000 messages by default): still one list, named by one etag.
        half = await client.add_messages_with_etags("会话", [user(f"旧 {i}") for i in range(600)])
        assert half.message_count == 600 and half.previous_etag == whole.etag and not half.replayed
        added = await client.add_messages_with_etags("会话", [user(f"旧 {i}") for i in range(600, 1200)])
        assert added.message_count == 1200 and added.previous_etag == half.etag
        whole = await client.read_messages("会话")
        assert whole.etag == added.etag and [m.text_content for m in whole.messages] == [f"旧 {i}" for i in range(1200)]
        same = await client.read_messages("会话", if_none_match=whole.etag, accept_delta=True)
        assert same.not_modified and same.messages == [] and same.etag == whole.etag
        await other.add_messages("会话", [user("新 1"), user("新 2")])
        delta = await client.read_messages("会话", if_none_match=whole.etag, accept_delta=True)
        assert delta.delta and [m.text_content for m in delta.messages] == ["新 1", "新 2"]
        # Without accept_delta, a changed memory answers the whole list.
        full = await client.read_messages("会话", if_none_match=whole.etag)
        assert not full.delta and len(full.messages) == 1202 and full.etag == delta.etag
        await other.delete_message("会话", 0)
        after_delete = await client.read_messages("会话", if_none_match=delta.etag, accept_delta=True)
        assert not after_delete.delta and len(after_delete.messages) == 1201
        assert after_delete.messages[0].text_content == "旧 1" and after_delete.etag != delta.etag
        # An add that was not the only change since a copy's etag says so.
        await other.add_messages("会话", [user("别人")])
        mine = await client.add_messages_with_etags("会话", [user("我的")])
        assert mine.previous_etag != after_delete.etag and mine.message_count == 1203
    if mode == "remote":
        await other.close()


@pytest.mark.parametrize("mode", ["remote", "local"])
def test_the_blocking_clients_keep_a_copy_current_with_etags(threaded_server, tmp_path, mode) -> None:
    """The blocking `MemoryClient` (remote and local) answers etags as the asyncio one: it had
    no `read_messages` nor `add_messages_with_etags`, so a blocking caller kept no copy."""
    if mode == "remote":
        client, other = MemoryClient(threaded_server.address), MemoryClient(threaded_server.address)
    else:
        client = other = MemoryClient.local(ServiceSettings(data_dir=tmp_path / "local"))
    with client:
        client.create_memory("会话")
        empty = client.read_messages("会话")
        half = client.add_messages_with_etags("会话", [user(f"旧 {i}") for i in range(600)])
        assert half.message_count == 600 and half.previous_etag == empty.etag and not half.replayed
        added = client.add_messages_with_etags("会话", [user(f"旧 {i}") for i in range(600, 1200)])
        whole = client.read_messages("会话")  # two pages, one state
        assert whole.etag == added.etag and [m.text_content for m in whole.messages] == [f"旧 {i}" for i in range(1200)]
        same = client.read_messages("会话", if_none_match=whole.etag, accept_delta=True)
        assert same.not_modified and same.messages == []
        other.add_messages("会话", [user("新 1")])
        delta = client.read_messages("会话", if_none_match=whole.etag, accept_delta=True)
        assert delta.delta and [m.text_content for m in delta.messages] == ["新 1"]
        other.delete_message("会话", 0)
        after_delete = client.read_messages("会话", if_none_match=delta.etag, accept_delta=True)
        assert not after_delete.delta and len(after_delete.messages) == 1200
        assert client.get_messages("会话") == after_delete.messages
    if mode == "remote":
        other.close()


def _texts_of(msgs: list[Msg]) -> list[str]:
    return [m.text_content for m in msgs]


@pytest.mark.parametrize("mode", ["remote", "local"])
async def test_a_clients_own_delete_clear_and_load_keep_its_copy_without_a_read(server_factory, tmp_path, mode) -> None:
    """`delete_message_with_etags`, `clear_with_etags` and `load_state_with_etags` answer the
    etags just before and after the change (they answered nothing, so a caller that keeps a copy
    read the whole list again after each): the copy with the change applied is the state the
    etag after names, which a read right after confirms as not modified. After another client's
    add in between, the etag before is not the copy's."""
    if mode == "remote":
        server = await server_factory()
        client, other = AsyncMemoryClient(server.address), AsyncMemoryClient(server.address)
    else:
        client = other = AsyncMemoryClient.local(ServiceSettings(data_dir=tmp_path / "local"))
    async with client:
        await client.create_memory("对话")
        await client.add_messages("对话", [user(f"第{i}句") for i in range(600)])
        await client.add_messages("对话", [user(f"第{i}句") for i in range(600, 1200)])
        whole = await client.read_messages("对话")
        copy, etag = _texts_of(whole.messages), whole.etag

        deleted = await client.delete_message_with_etags("对话", 5)
        assert (deleted.deleted, deleted.message_count, deleted.previous_etag) == (True, 1199, etag)
        copy, etag = copy[:5] + copy[6:], deleted.etag
        assert (await client.read_messages("对话", if_none_match=etag, accept_delta=True)).not_modified
        past = await client.delete_message_with_etags("对话", 5000)
        assert (past.deleted, past.etag, past.previous_etag) == (False, etag, etag)

        _, version = await client.save_state("对话")
        kept = [user(t) for t in copy[:3]]
        loaded = await client.load_state_with_etags("对话", [StateEntry(MEMORY_MESSAGES, items=messages_to_items(kept))],
                                                    expected_version=version)
        assert loaded.previous_etag == etag and loaded.version == version + 1
        copy, etag = copy[:3], loaded.etag
        same = await client.read_messages("对话", if_none_match=etag, accept_delta=True)
        assert same.not_modified and _texts_of(await client.get_messages("对话")) == copy

        # Another client's add in between: the delete's etag before is not the copy's.
        await other.add_messages("对话", [user("别人插话")])
        theirs = await client.delete_message_with_etags("对话", 0)
        assert theirs.deleted and theirs.previous_etag != etag
        read = await client.read_messages("对话", if_none_match=etag, accept_delta=True)
        assert not read.delta and _texts_of(read.messages) == ["第1句", "第2句", "别人插话"] and read.etag == theirs.etag

        cleared = await client.clear_with_etags("对话")
        assert cleared.previous_etag == theirs.etag
        empty = await client.read_messages("对话", if_none_match=cleared.etag, accept_delta=True)
        assert empty.not_modified
        assert await client.delete_message("对话", 0) is False
    if mode == "remote":
        await other.close()


def test_the_blocking_client_answers_the_etags_of_its_deletes_clears_and_loads(threaded_server) -> None:
    with MemoryClient(threaded_server.address) as client:
        client.create_memory("对话")
        client.add_messages("对话", [user("你好"), user("再见"), user("谢谢")])
        whole = client.read_messages("对话")
        deleted = client.delete_message_with_etags("对话", 1)
        assert deleted.deleted and deleted.previous_etag == whole.etag
        assert client.read_messages("对话", if_none_match=deleted.etag).not_modified
        loaded = client.load_state_with_etags("对话", [StateEntry(MEMORY_MESSAGES, items=messages_to_items([user("载入")]))])
        assert loaded.previous_etag == deleted.etag and loaded.version > 0
        assert client.read_messages("对话", if_none_match=loaded.etag).not_modified
        cleared = client.clear_with_etags("对话")
        assert cleared.previous_etag == loaded.etag
        assert client.read_messages("对话", if_none_match=cleared.etag).not_modified
