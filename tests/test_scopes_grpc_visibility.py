"""Parent/child scopes over gRPC: which messages and long-term memories a memory (scope)
inherits from its ancestors and from the tenant, on sqlite and PostgreSQL."""

from __future__ import annotations

import itertools

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as ltm_grpc
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2 as scope_pb
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2_grpc as scope_grpc
from agentscope_memory.client.scopes import AsyncScopeClient
from agentscope_memory.convert.to_proto import msg_to_proto, scope_to_proto
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole

VISIBILITIES = ("LOCAL", "SHARED", "GLOBAL")
# The family: 父 is the root, 子 its child, 孙 the grandchild, 兄弟 a sibling of 子, 外人 unrelated.
PARENTS = {"父": None, "子": "父", "孙": "子", "兄弟": "父", "外人": None}


def ancestors(node: str) -> list[str]:
    out = []
    while PARENTS[node] is not None:
        node = PARENTS[node]  # type: ignore[assignment]
        out.append(node)
    return out


def expected_inherited(reader: str) -> set[tuple[str, str]]:
    """(origin, text) of what `reader` inherits: ancestors' SHARED and GLOBAL, anyone's GLOBAL."""
    out = set()
    for writer, visibility in itertools.product(PARENTS, VISIBILITIES):
        if writer == reader:
            continue
        if visibility == "GLOBAL" or (visibility == "SHARED" and writer in ancestors(reader)):
            out.add((writer, f"{writer}的{visibility}消息 message"))
    return out


@pytest.fixture(params=["sqlite", "postgres"])
async def server(request, server_factory):
    if request.param == "postgres":
        return await server_factory(store="postgres", postgres_dsn=request.getfixturevalue("postgres_dsn"))
    return await server_factory()


async def _family(scopes: AsyncScopeClient) -> None:
    for node, parent in PARENTS.items():
        if parent is None:
            async with _memories(scopes) as memories:
                await memories.create_memory(node)
        else:
            await scopes.create_child(parent, node)
    for node, visibility in itertools.product(PARENTS, VISIBILITIES):
        await scopes.add_messages(node, [Msg.create(MsgRole.USER, f"{node}的{visibility}消息 message")],
                                  visibility=visibility)


def _memories(scopes: AsyncScopeClient):
    from agentscope_memory.client import AsyncMemoryClient

    return AsyncMemoryClient(channel=scopes._channel)


async def test_short_term_visibility_matrix(server) -> None:
    async with AsyncScopeClient(server.address, timeout=20) as scopes:
        await _family(scopes)
        memories = _memories(scopes)
        for reader in PARENTS:
            inherited = await scopes.get_inherited(reader)
            assert {(m.origin_memory_id, m.message.text_content) for m in inherited} == expected_inherited(reader), reader
            for m in inherited:
                chain = ancestors(reader)
                assert m.distance == (chain.index(m.origin_memory_id) + 1 if m.origin_memory_id in chain else 0)
            # Ancestors' messages come first, the root's first; then other memories' GLOBAL ones.
            distances = [m.distance for m in inherited]
            ancestral = [d for d in distances if d]
            assert ancestral == sorted(ancestral, reverse=True)
            assert distances == ancestral + [0] * (len(distances) - len(ancestral))
            # The memory's own messages are unchanged: its three, whatever their visibility.
            assert [m.text_content for m in await memories.get_messages(reader)] == [
                f"{reader}的{v}消息 message" for v in VISIBILITIES]
        assert (await scopes.lineage("孙")).ancestors == ["子", "父"]
        assert (await scopes.lineage("父")).child_count == 2
        assert [c async for c in scopes.iter_children("父", page_size=1)] == ["兄弟", "子"]
        # Paging: one message per page gives the same messages in the same order.
        paged = [(m.origin_memory_id, m.message.text_content) async for m in scopes.iter_inherited("孙", page_size=1)]
        assert paged == [(m.origin_memory_id, m.message.text_content) for m in await scopes.get_inherited("孙")]


async def test_a_deleted_parent_message_is_no_longer_inherited(server) -> None:
    async with AsyncScopeClient(server.address, timeout=20) as scopes:
        memories = _memories(scopes)
        await memories.create_memory("planner")
        await scopes.create_child("planner", "worker")
        await scopes.add_messages("planner", [Msg.create(MsgRole.USER, t) for t in ("一", "二")], visibility="SHARED")
        assert [m.message.text_content for m in await scopes.get_inherited("worker")] == ["一", "二"]
        await scopes.add_messages("worker", [Msg.create(MsgRole.USER, "三")])
        assert [m.text_content for m in await scopes.get_context("worker")] == ["一", "二", "三"]
        await memories.delete_message("planner", 0)
        assert [m.message.text_content for m in await scopes.get_inherited("worker")] == ["二"]
        await memories.clear("planner")
        assert await scopes.get_inherited("worker") == []


async def test_pages_of_inherited_messages_fit_a_stock_4_mib_client(server) -> None:
    # A thousand 4 KB messages from a parent with a 255-byte id: each inherited item also
    # carries that id, which once went uncounted and made a page of 4.25 MB.
    parent = "父" * 85
    async with AsyncScopeClient(server.address, timeout=20) as scopes:
        memories = _memories(scopes)
        await memories.create_memory(parent)
        await scopes.create_child(parent, "孩子")
        for batch in range(10):
            await scopes.add_messages(parent, [Msg.create(MsgRole.USER, f"{batch * 100 + i:04} " + "x" * 3900)
                                               for i in range(100)], visibility="SHARED")
    texts: list[str] = []
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = scope_grpc.ScopeServiceStub(channel)
        token = ""
        while True:
            page = await stub.ListInheritedMessages(scope_pb.ListInheritedMessagesRequest(
                memory_id="孩子", page_size=1000, page_token=token))
            assert page.ByteSize() <= 4 * 1024 * 1024
            assert all(m.origin_memory_id == parent for m in page.messages)
            texts += [m.message.content[0].text.text[:4] for m in page.messages]
            token = page.next_page_token
            if not token:
                break
    assert texts == [f"{i:04}" for i in range(1000)]


async def test_a_retry_must_repeat_the_visibility(server) -> None:
    async with AsyncScopeClient(server.address, timeout=20) as scopes:
        memories = _memories(scopes)
        await memories.create_memory("p")
        await scopes.create_child("p", "c")
        msg = Msg.create(MsgRole.USER, "重试 retry")
        assert await scopes.add_messages("p", [msg], visibility="SHARED", request_id="req-1") == 1
        assert await scopes.add_messages("p", [msg], visibility="SHARED", request_id="req-1") == 1
        with pytest.raises(InvalidArgumentError, match="request_id"):
            await scopes.add_messages("p", [msg], visibility="LOCAL", request_id="req-1")
        assert [m.message.text_content for m in await scopes.get_inherited("c")] == ["重试 retry"]


async def test_long_term_visibility_matrix(server) -> None:
    family = {name: Scope(agent_name=f"agent-{name}", user_id="alice") for name in PARENTS}
    async with AsyncScopeClient(server.address, timeout=120) as scopes:
        for node, parent in PARENTS.items():
            if parent is not None:
                await scopes.set_long_term_parent(family[node], family[parent])
        for node, visibility in itertools.product(PARENTS, VISIBILITIES):
            stored = await scopes.record(family[node], [Msg.create(MsgRole.USER, f"{node}的{visibility}消息 message")],
                                         visibility=visibility)
            assert [m.visibility for m in stored] == [visibility]
        for reader in PARENTS:
            found = await scopes.search(family[reader], "消息 message", top_k=100)
            inherited = {(item.scope.agent_name.removeprefix("agent-"), item.text) for item in found if item.inherited}
            own = {item.text for item in found if not item.inherited}
            assert inherited == expected_inherited(reader), reader
            assert own == {f"{reader}的{v}消息 message" for v in VISIBILITIES}, reader
            assert all(item.scope == family[reader] for item in found if not item.inherited)
        # AgentScope's Retrieve (and its tools) in the grandchild finds what the root shared.
        stub = ltm_grpc.LongTermMemoryServiceStub(scopes._channel)
        retrieved = await stub.Retrieve(ltm_pb.RetrieveRequest(
            scope=scope_to_proto(family["孙"]), message=msg_to_proto(Msg.create(MsgRole.USER, "父的SHARED消息")),
            limit=20))
        assert "父的SHARED消息 message" in retrieved.text
        assert "父的LOCAL消息 message" not in retrieved.text
        origin = {m.memory: (m.inherited, m.scope.agent_name) for m in retrieved.memories}
        assert origin["父的SHARED消息 message"] == (True, "agent-父")
        lineage = await scopes.long_term_lineage(family["孙"])
        assert lineage.ancestors == [family["子"], family["父"]]
        assert (await scopes.long_term_lineage(family["父"])).child_count == 2
