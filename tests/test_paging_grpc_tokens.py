"""Page tokens and etags are signed by the server: forged, altered or borrowed tokens are
INVALID_ARGUMENT `page_token: invalid or expired`, never INTERNAL and never a database query;
real tokens survive a restart and work on every replica of one database."""

from __future__ import annotations

import base64
import json
import re
from typing import Any, Awaitable, Callable

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    memory_service_pb2_grpc as pb_grpc,
)
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.paging import PageTokens
from agentscope_memory.short_term.auto_context.config import AutoContextConfig

KEYS = {"key-for-alice-000001": "alice", "key-for-bob-00000001": "bob"}
ALICE = [("x-api-key", "key-for-alice-000001")]
BOB = [("x-api-key", "key-for-bob-00000001")]


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# What an attacker sends: the old unsigned format with hostile positions, and plain garbage.
FORGED = [
    "garbage",
    "12",
    b64(json.dumps(["messages", "m", str(2**80)]).encode()),
    b64(json.dumps(["messages", "m", "١٢٣"]).encode()),  # Arabic-Indic digits
    b64(("[" * 5000 + "]" * 5000).encode()),
    b64(b'["messages","m","1\x00"]'),
    "\x00",
    "页码令牌",
    b64(b"9" * 40 + b"x" * 16),
    "A" * 100_000,
]


def user(text: str) -> Msg:
    return Msg.create(MsgRole.USER, text)


async def expect_invalid(call: Awaitable[Any]) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await call
    assert failure.value.code() == grpc.StatusCode.INVALID_ARGUMENT, failure.value.details()
    assert failure.value.details() == "page_token: invalid or expired"


@pytest.fixture
async def server(server_factory):
    return await server_factory(api_keys=KEYS)


@pytest.fixture
async def stub(server):
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.MemoryServiceStub(channel)


async def seed(stub: pb_grpc.MemoryServiceStub, memory_id: str, kind: int, count: int = 6) -> None:
    from agentscope_memory.convert.to_proto import msg_to_proto

    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=memory_id, kind=kind), metadata=ALICE)
    msgs = [msg_to_proto(user(f"第{i}条 message {i}")) for i in range(count)]
    await stub.AddMessages(pb.AddMessagesRequest(memory_id=memory_id, messages=msgs), metadata=ALICE)


# Every paged RPC of MemoryService: a request for (memory, page_size, token), and the response's
# next token.
Pager = Callable[[pb_grpc.MemoryServiceStub, str, int, str, Any], Awaitable[str]]


async def get_messages(stub, memory_id, size, token, md):
    return (await stub.GetMessages(pb.GetMessagesRequest(memory_id=memory_id, page_size=size, page_token=token), metadata=md)).next_page_token


async def original(stub, memory_id, size, token, md):
    request = pb.GetOriginalMessagesRequest(memory_id=memory_id, page_size=size, page_token=token)
    return (await stub.GetOriginalMessages(request, metadata=md)).next_page_token


async def interaction(stub, memory_id, size, token, md):
    request = pb.GetInteractionMessagesRequest(memory_id=memory_id, page_size=size, page_token=token)
    return (await stub.GetInteractionMessages(request, metadata=md)).next_page_token


async def reasoning(stub, memory_id, size, token, md):
    request = pb.PrepareReasoningInputRequest(memory_id=memory_id, page_size=size, page_token=token, system_prompt="你好")
    return (await stub.PrepareReasoningInput(request, metadata=md)).next_page_token


PAGERS = {"GetMessages": get_messages, "GetOriginalMessages": original,
          "GetInteractionMessages": interaction, "PrepareReasoningInput": reasoning}


@pytest.mark.parametrize("rpc", PAGERS)
async def test_forged_tokens_are_invalid_on_every_paged_rpc(stub, rpc: str) -> None:
    await seed(stub, "conv.1", pb.MEMORY_KIND_AUTO_CONTEXT)
    pager = PAGERS[rpc]
    for token in FORGED:
        await expect_invalid(pager(stub, "conv.1", 2, token, ALICE))
    # The server is fine and the listing still works.
    assert await pager(stub, "conv.1", 2, "", ALICE)


@pytest.mark.parametrize("rpc", PAGERS)
async def test_a_token_is_bound_to_its_memory_tenant_and_page_size(stub, rpc: str) -> None:
    await seed(stub, "a", pb.MEMORY_KIND_AUTO_CONTEXT)
    await seed(stub, "b", pb.MEMORY_KIND_AUTO_CONTEXT)
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="a", kind=pb.MEMORY_KIND_AUTO_CONTEXT), metadata=BOB)
    pager = PAGERS[rpc]
    token = await pager(stub, "a", 2, "", ALICE)
    assert token
    await expect_invalid(pager(stub, "b", 2, token, ALICE))  # another memory
    await expect_invalid(pager(stub, "a", 3, token, ALICE))  # another page size
    await expect_invalid(pager(stub, "a", 2, token, BOB))  # another tenant's memory of the same id
    # One character changed anywhere breaks the signature (the last one may only carry padding
    # bits base64 ignores).
    for i in range(len(token) - 1):
        flipped = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1:]
        await expect_invalid(pager(stub, "a", 2, flipped, ALICE))
    await pager(stub, "a", 2, token, ALICE)  # the genuine token still works


async def test_events_reload_and_list_memories_tokens_are_signed_too(stub) -> None:
    await seed(stub, "m", pb.MEMORY_KIND_AUTO_CONTEXT)
    for token in FORGED:
        await expect_invalid(stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id="m", page_token=token), metadata=ALICE))
        await expect_invalid(stub.ReloadContext(pb.ReloadContextRequest(
            memory_id="m", working_context_offload_uuid="u", page_token=token), metadata=ALICE))
        await expect_invalid(stub.ListMemories(pb.ListMemoriesRequest(page_token=token), metadata=ALICE))
    for i in range(3):
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=f"mem-{i}", kind=pb.MEMORY_KIND_IN_MEMORY), metadata=ALICE)
    first = await stub.ListMemories(pb.ListMemoriesRequest(page_size=2), metadata=ALICE)
    await expect_invalid(stub.ListMemories(pb.ListMemoriesRequest(page_size=2, page_token=first.next_page_token), metadata=BOB))
    rest = await stub.ListMemories(pb.ListMemoriesRequest(page_size=2, page_token=first.next_page_token), metadata=ALICE)
    listed = [m.memory_id for m in [*first.memories, *rest.memories]]
    rest2 = rest
    while rest2.next_page_token:
        rest2 = await stub.ListMemories(pb.ListMemoriesRequest(page_size=2, page_token=rest2.next_page_token), metadata=ALICE)
        listed += [m.memory_id for m in rest2.memories]
    assert listed == sorted(["m", "mem-0", "mem-1", "mem-2"])


async def test_etags_are_signed_and_a_forged_one_never_matches(stub) -> None:
    await seed(stub, "m", pb.MEMORY_KIND_IN_MEMORY)
    first = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m"), metadata=ALICE)
    # The old, guessable form "<created>-<version>" is not an etag any more.
    assert first.etag and not re.fullmatch(r"\d+-\d+", first.etag)
    for forged in FORGED[:8]:
        again = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=forged), metadata=ALICE)
        assert not again.not_modified and len(again.messages) == 6
    same = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=first.etag), metadata=ALICE)
    assert same.not_modified


async def test_tokens_and_etags_survive_a_restart(server_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("m")
        await client.add_messages("m", [user(f"消息 {i}") for i in range(5)])
    async with grpc.aio.insecure_channel(server.address) as channel:
        first = await pb_grpc.MemoryServiceStub(channel).GetMessages(pb.GetMessagesRequest(memory_id="m", page_size=2))
    await server.stop()
    restarted = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(restarted.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        second = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m", page_size=2, page_token=first.next_page_token))
        assert [m.content[0].text.text for m in second.messages] == ["消息 2", "消息 3"]
        assert second.etag == first.etag
        same = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m", if_none_match=first.etag))
        assert same.not_modified


async def test_a_configured_secret_is_used_and_a_different_one_refuses_the_tokens(server_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data, page_token_secret="the-secret-of-replica-set-1")
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("m")
        await client.add_messages("m", [user(f"m{i}") for i in range(5)])
    async with grpc.aio.insecure_channel(server.address) as channel:
        first = await pb_grpc.MemoryServiceStub(channel).GetMessages(pb.GetMessagesRequest(memory_id="m", page_size=2))
    await server.stop()
    rotated = await server_factory(data_dir=data, page_token_secret="rotated-secret-000000000")
    async with grpc.aio.insecure_channel(rotated.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await expect_invalid(stub.GetMessages(pb.GetMessagesRequest(memory_id="m", page_size=2, page_token=first.next_page_token)))
    await rotated.stop()
    again = await server_factory(data_dir=data, page_token_secret="the-secret-of-replica-set-1")
    async with grpc.aio.insecure_channel(again.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        page = await stub.GetMessages(pb.GetMessagesRequest(memory_id="m", page_size=2, page_token=first.next_page_token))
        assert [m.content[0].text.text for m in page.messages] == ["m2", "m3"]


async def test_the_key_is_created_once_per_database() -> None:
    from agentscope_memory.store.in_process import InProcessStore

    store = InProcessStore()
    try:
        a, b = PageTokens(store), PageTokens(store)
        await a.ready()
        await b.ready()
        token = a.issue("messages", ["t", "m", 0], [1, 2, 3])
        assert b.read(token, "messages", ["t", "m", 0], 3) == [1, 2, 3]
    finally:
        await store.close()


async def test_page_of_another_snapshot_is_aborted_naming_the_change(stub) -> None:
    await seed(stub, "m", pb.MEMORY_KIND_AUTO_CONTEXT)
    first = await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="m", page_size=2), metadata=ALICE)
    await stub.DeleteMemory(pb.DeleteMemoryRequest(memory_id="m"), metadata=ALICE)
    await seed(stub, "m", pb.MEMORY_KIND_AUTO_CONTEXT)
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(
            memory_id="m", page_size=2, page_token=first.next_page_token), metadata=ALICE)
    assert failure.value.code() == grpc.StatusCode.ABORTED
    assert "was deleted and created again between pages" in (failure.value.details() or "")


async def test_replicas_on_one_postgres_accept_each_others_tokens(server_factory, postgres_dsn) -> None:
    a, b = [await server_factory(store="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]
    async with AsyncMemoryClient(a.address) as client:
        await client.create_memory("m", "AUTO_CONTEXT", auto_context_config=AutoContextConfig())
        await client.add_messages("m", [user(f"副本 {i}") for i in range(5)])
    async with grpc.aio.insecure_channel(a.address) as ca, grpc.aio.insecure_channel(b.address) as cb:
        first = await pb_grpc.MemoryServiceStub(ca).GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="m", page_size=3))
        rest = await pb_grpc.MemoryServiceStub(cb).GetOriginalMessages(pb.GetOriginalMessagesRequest(
            memory_id="m", page_size=3, page_token=first.next_page_token))
    assert [m.content[0].text.text for m in rest.messages] == ["副本 3", "副本 4"] and not rest.next_page_token
