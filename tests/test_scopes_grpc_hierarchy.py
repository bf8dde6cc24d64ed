"""Parent/child scopes over gRPC: cycles, detaching, deleting a parent, creating a child in one
call, tenant isolation of every ScopeService RPC, and bad input."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as ltm_grpc
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2 as scope_pb
from agentscope_memory._proto.agentscope.memory.v1 import scope_service_pb2_grpc as scope_grpc
from agentscope_memory.client import AsyncLongTermClient, AsyncMemoryClient
from agentscope_memory.client.scopes import AsyncScopeClient
from agentscope_memory.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.short_term.auto_context.config import AutoContextConfig

KEYS = {"key-for-tenant-a-0001": "tenant-a", "key-for-tenant-b-0001": "tenant-b"}


@pytest.fixture(params=["sqlite", "postgres"])
async def server(request, server_factory):
    if request.param == "postgres":
        return await server_factory(store="postgres", postgres_dsn=request.getfixturevalue("postgres_dsn"))
    return await server_factory()


async def _chain(memories: AsyncMemoryClient, scopes: AsyncScopeClient) -> None:
    await memories.create_memory("根")
    await scopes.create_child("根", "中")
    await scopes.create_child("中", "叶")


async def test_cycles_and_self_parents_are_refused_and_change_nothing(server) -> None:
    async with AsyncMemoryClient(server.address) as memories, AsyncScopeClient(server.address) as scopes:
        await _chain(memories, scopes)
        with pytest.raises(FailedPreconditionError, match="parent_memory_id.*cycle"):
            await scopes.set_parent("根", "叶")
        with pytest.raises(FailedPreconditionError, match="parent_memory_id.*cycle"):
            await scopes.set_parent("中", "叶")
        with pytest.raises(InvalidArgumentError, match="parent_memory_id"):
            await scopes.set_parent("中", "中")
        with pytest.raises(NotFoundError, match="parent_memory_id"):
            await scopes.set_parent("中", "不存在")
        assert (await scopes.lineage("叶")).ancestors == ["中", "根"]
        assert (await scopes.lineage("根")).ancestors == []
        # Moving and detaching.
        assert await scopes.set_parent("叶", "根") == ["根"]
        assert (await scopes.lineage("根")).child_count == 2
        assert await scopes.set_parent("叶", None) == []
        assert (await scopes.lineage("叶")).parent == ""


async def test_long_term_cycles_are_refused(server) -> None:
    a, b, c = (Scope(agent_name=n, user_id="u") for n in ("甲", "乙", "丙"))
    async with AsyncScopeClient(server.address) as scopes:
        assert await scopes.set_long_term_parent(b, a) == [a]
        assert await scopes.set_long_term_parent(c, b) == [b, a]
        with pytest.raises(FailedPreconditionError, match="parent.*cycle"):
            await scopes.set_long_term_parent(a, c)
        with pytest.raises(InvalidArgumentError, match="parent"):
            await scopes.set_long_term_parent(a, a)
        assert await scopes.set_long_term_parent(c, None) == []
        assert (await scopes.long_term_lineage(c)).ancestors == []
        assert (await scopes.long_term_lineage(a)).child_count == 1


async def test_deleting_a_parent_long_term_scope_needs_force_and_then_detaches_its_children(server) -> None:
    parent, child = Scope(agent_name="主管", user_id="用户"), Scope(agent_name="助手", user_id="用户")
    async with AsyncScopeClient(server.address) as scopes, AsyncLongTermClient(server.address, timeout=30) as ltm:
        await scopes.set_long_term_parent(child, parent)
        await ltm.record(parent, [Msg.create(MsgRole.USER, "项目预算是十万元")])
        await ltm.record(child, [Msg.create(MsgRole.USER, "我负责写测试")])
        with pytest.raises(FailedPreconditionError, match="force.*1 child scope"):
            await ltm.forget(parent)
        assert len(await ltm.list(parent)) == 1 and (await scopes.long_term_lineage(child)).ancestors == [parent]
        assert await ltm.forget(parent, force=True) == 1
        assert await ltm.list(parent) == []
        assert (await scopes.long_term_lineage(child)).ancestors == []
        assert [m.text for m in await ltm.list(child)] == ["我负责写测试"]
        # A scope without children needs no force.
        assert await ltm.forget(child) == 1


async def test_a_lineage_is_at_most_32_deep(server) -> None:
    async with AsyncMemoryClient(server.address) as memories, AsyncScopeClient(server.address) as scopes:
        await memories.create_memory("m0")
        for i in range(1, 33):
            await scopes.create_child(f"m{i - 1}", f"m{i}")
        assert len((await scopes.lineage("m32")).ancestors) == 32
        with pytest.raises(FailedPreconditionError, match="parent_memory_id.*32"):
            await scopes.create_child("m32", "m33")
        with pytest.raises(NotFoundError):
            await memories.get_memory("m33")


async def test_attaching_a_subtree_keeps_its_deepest_lineage_within_32(server) -> None:
    # Two chains of 32 memories: hanging one under the other would give its leaf 63 ancestors,
    # of which reads see only 32 (so the leaf would silently stop inheriting from the root).
    async with AsyncMemoryClient(server.address) as memories, AsyncScopeClient(server.address) as scopes:
        for chain in ("上", "下"):
            await memories.create_memory(f"{chain}0")
            for i in range(1, 32):
                await scopes.create_child(f"{chain}{i - 1}", f"{chain}{i}")
        with pytest.raises(FailedPreconditionError, match="parent_memory_id.*32"):
            await scopes.set_parent("下0", "上31")
        assert (await scopes.lineage("下0")).ancestors == []
        # A subtree that still fits may move: 下30 has one level below it, 上30 has 30 ancestors.
        assert len(await scopes.set_parent("下30", "上30")) == 31
        leaf = await scopes.lineage("下31")
        assert len(leaf.ancestors) == 32 and leaf.ancestors[-1] == "上0"
        await scopes.add_messages("上0", [Msg.create(MsgRole.USER, "根的计划", name="u")], visibility="SHARED")
        assert [m.message.text_content for m in await scopes.get_inherited("下31")] == ["根的计划"]


async def test_attaching_a_long_term_subtree_keeps_its_deepest_lineage_within_32(server) -> None:
    async with AsyncScopeClient(server.address) as scopes:
        for chain in ("up", "down"):
            for i in range(1, 32):
                await scopes.set_long_term_parent(Scope(agent_name=f"{chain}{i}"), Scope(agent_name=f"{chain}{i - 1}"))
        with pytest.raises(FailedPreconditionError, match="parent.*32"):
            await scopes.set_long_term_parent(Scope(agent_name="down0"), Scope(agent_name="up31"))
        assert (await scopes.long_term_lineage(Scope(agent_name="down31"))).ancestors[-1] == Scope(agent_name="down0")


async def test_a_memory_deleted_by_any_path_leaves_no_marks_or_links_to_its_successor(server) -> None:
    # The web inspector deletes through the library's `MemoryManager.delete_memory`, not
    # ScopeService: a new memory with the same id restarts its sequence numbers at 1, so the
    # old SHARED marks made its first (LOCAL, private) messages visible to the old children.
    async with AsyncMemoryClient(server.address) as memories, AsyncScopeClient(server.address) as scopes:
        await memories.create_memory("旧")
        await scopes.create_child("旧", "孩子")
        await scopes.add_messages("旧", [Msg.create(MsgRole.USER, f"共享{i}", name="u") for i in range(2)],
                                  visibility="SHARED")
        await server.service.memories.delete_memory("default", "旧")
        assert (await scopes.lineage("孩子")).ancestors == []
        await memories.create_memory("旧")
        await memories.add_messages("旧", [Msg.create(MsgRole.USER, f"私密{i}", name="u") for i in range(3)])
        assert await scopes.get_inherited("孩子") == []
        assert (await scopes.lineage("旧")).child_count == 0


async def test_deleting_a_parent_needs_force_and_then_detaches_its_children(server) -> None:
    async with AsyncMemoryClient(server.address) as memories, AsyncScopeClient(server.address) as scopes:
        await _chain(memories, scopes)
        await scopes.create_child("根", "旁")
        await scopes.add_messages("中", [Msg.create(MsgRole.USER, "中的消息")])
        await scopes.add_messages("根", [Msg.create(MsgRole.USER, "共享")], visibility="SHARED")
        with pytest.raises(FailedPreconditionError, match="force.*2 child"):
            await memories.delete_memory("根")
        with pytest.raises(FailedPreconditionError, match="force"):
            await scopes.delete_memory("根")
        assert (await memories.get_memory("根")).message_count == 1
        assert [m.message.text_content for m in await scopes.get_inherited("叶")] == ["共享"]
        await scopes.delete_memory("根", force=True)
        with pytest.raises(NotFoundError):
            await memories.get_memory("根")
        # Children are detached roots that keep everything of their own; grandchildren stay.
        for child in ("中", "旁"):
            assert (await scopes.lineage(child)).ancestors == []
        assert [m.text_content for m in await memories.get_messages("中")] == ["中的消息"]
        assert (await scopes.lineage("叶")).ancestors == ["中"]
        assert await scopes.get_inherited("叶") == []
        # A leaf is deleted without force; a new memory of the same id starts with no parent.
        await memories.delete_memory("叶")
        await memories.create_memory("叶")
        assert (await scopes.lineage("叶")).ancestors == []
        assert (await scopes.lineage("中")).child_count == 0


async def test_create_child_copies_the_parents_kind_and_configuration(server) -> None:
    async with AsyncMemoryClient(server.address) as memories, AsyncScopeClient(server.address) as scopes:
        config = AutoContextConfig(msg_threshold=7, last_keep=3)
        await memories.create_memory("主代理", "AUTO_CONTEXT", auto_context_config=config)
        child = await scopes.create_child("主代理", "子代理", labels={"角色": "研究"})
        assert child.kind == "AUTO_CONTEXT"
        assert child.auto_context_config is not None
        assert (child.auto_context_config.msg_threshold, child.auto_context_config.last_keep) == (7, 3)
        assert child.labels == {"角色": "研究"}
        plain = await scopes.create_child("主代理", "普通子", "IN_MEMORY")
        assert plain.kind == "IN_MEMORY"
        with pytest.raises(AlreadyExistsError):
            await scopes.create_child("主代理", "子代理")
        with pytest.raises(NotFoundError, match="parent_memory_id"):
            await scopes.create_child("没有", "孤儿")
        with pytest.raises(NotFoundError):
            await memories.get_memory("孤儿")
        # AUTO_CONTEXT parents share their original (uncompressed) messages.
        await scopes.add_messages("主代理", [Msg.create(MsgRole.USER, "计划")], visibility="SHARED")
        assert [m.message.text_content for m in await scopes.get_inherited("子代理")] == ["计划"]


async def test_tenants_never_see_each_others_scopes(server_factory) -> None:
    server = await server_factory(api_keys=KEYS)
    a_key, b_key = KEYS
    async with AsyncMemoryClient(server.address, api_key=a_key) as a_mem, \
            AsyncScopeClient(server.address, api_key=a_key, timeout=60) as a, \
            AsyncMemoryClient(server.address, api_key=b_key) as b_mem, \
            AsyncScopeClient(server.address, api_key=b_key, timeout=60) as b:
        await a_mem.create_memory("parent")
        await a.create_child("parent", "child")
        await a.add_messages("parent", [Msg.create(MsgRole.USER, "a 的全局")], visibility="GLOBAL")
        await b_mem.create_memory("mine")
        for call in (
            lambda: b.set_parent("mine", "parent"),
            lambda: b.set_parent("child", None),
            lambda: b.create_child("parent", "stolen"),
            lambda: b.lineage("child"),
            lambda: b.get_inherited("child"),
            lambda: b.delete_memory("parent", force=True),
            lambda: b.add_messages("parent", [Msg.create(MsgRole.USER, "x")], visibility="SHARED"),
        ):
            with pytest.raises(NotFoundError):
                await call()
        with pytest.raises(NotFoundError):
            [c async for c in b.iter_children("parent")]
        # GLOBAL means the tenant, not the server.
        assert await b.get_inherited("mine") == []
        assert [m.message.text_content for m in await a.get_inherited("child")] == ["a 的全局"]
        assert (await a.lineage("child")).ancestors == ["parent"]
        # Long-term: the same scope names in two tenants are two scopes.
        parent, child = Scope(agent_name="p", user_id="u"), Scope(agent_name="c", user_id="u")
        await a.set_long_term_parent(child, parent)
        assert (await b.long_term_lineage(child)).ancestors == []
        await a.record(parent, [Msg.create(MsgRole.USER, "租户 a 的共享事实 shared fact")], visibility="GLOBAL")
        await b.record(child, [Msg.create(MsgRole.USER, "租户 b 自己的事实 own fact")])
        assert [m.text for m in await b.search(child, "事实 fact", top_k=10)] == ["租户 b 自己的事实 own fact"]
        assert [m.text for m in await a.search(child, "事实 fact", top_k=10)] == ["租户 a 的共享事实 shared fact"]


async def test_bad_input_names_the_field(server) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        scopes = scope_grpc.ScopeServiceStub(channel)
        memories = pb_grpc.MemoryServiceStub(channel)
        long_term = ltm_grpc.LongTermMemoryServiceStub(channel)
        await memories.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        cases = [
            (scopes.SetParent(scope_pb.SetParentRequest(memory_id="", parent_memory_id="m")), "memory_id"),
            (scopes.SetParent(scope_pb.SetParentRequest(memory_id="m", parent_memory_id="a\x00b")), "parent_memory_id"),
            (scopes.CreateChild(scope_pb.CreateChildRequest(parent_memory_id="m", memory_id="")), "memory_id"),
            (scopes.CreateChild(scope_pb.CreateChildRequest(
                parent_memory_id="m", memory_id="c", auto_context_config=pb.AutoContextConfig(msg_threshold=3))),
             "auto_context_config"),
            (scopes.CreateChild(scope_pb.CreateChildRequest(
                parent_memory_id="m", memory_id="c", kind=pb.MEMORY_KIND_IN_MEMORY,
                auto_context_config=pb.AutoContextConfig(msg_threshold=3))), "auto_context_config"),
            (scopes.CreateChild(scope_pb.CreateChildRequest(parent_memory_id="m", memory_id="c", kind=99)), "kind"),
            (scopes.ListChildren(scope_pb.ListChildrenRequest(memory_id="m", page_token="forged")), "page_token"),
            (scopes.ListChildren(scope_pb.ListChildrenRequest(memory_id="m", page_size=-1)), "page_size"),
            (scopes.ListInheritedMessages(scope_pb.ListInheritedMessagesRequest(memory_id="m", page_token="x")),
             "page_token"),
            (scopes.SetLongTermParent(scope_pb.SetLongTermParentRequest()), "scope"),
            (scopes.SetLongTermParent(scope_pb.SetLongTermParentRequest(
                scope=ltm_pb.Scope(agent_name="a"), parent=ltm_pb.Scope())), "parent"),
            (scopes.GetLongTermLineage(scope_pb.GetLongTermLineageRequest(scope=ltm_pb.Scope(user_id=" "))), "scope"),
            (memories.AddMessages(pb.AddMessagesRequest(
                memory_id="m", messages=[_msg()], visibility=7)), "visibility"),
            (long_term.Record(ltm_pb.RecordRequest(
                scope=ltm_pb.Scope(agent_name="a"), messages=[_msg()], visibility=9)), "visibility"),
            (long_term.Record(ltm_pb.RecordRequest(
                scope=ltm_pb.Scope(), messages=[_msg()], visibility=2)), "scope"),
        ]
        for call, field in cases:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, err.value.details())
            assert field in err.value.details(), (field, err.value.details())
        # Nothing was stored by the failed calls.
        listed = await memories.ListMemories(pb.ListMemoriesRequest())
        assert [m.memory_id for m in listed.memories] == ["m"]
        assert listed.memories[0].message_count == 0


def _msg():
    from agentscope_memory.convert.to_proto import msg_to_proto

    return msg_to_proto(Msg.create(MsgRole.USER, "hi"))


async def test_two_replicas_cannot_close_a_cycle_together(server_factory, postgres_dsn) -> None:
    replicas = [await server_factory(store="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]

    async with AsyncMemoryClient(replicas[0].address) as memories, \
            AsyncScopeClient(replicas[0].address) as one, AsyncScopeClient(replicas[1].address) as two:
        for round_ in range(8):
            a, b = f"甲{round_}", f"乙{round_}"
            await memories.create_memory(a)
            await memories.create_memory(b)
            outcomes = await asyncio.gather(one.set_parent(a, b), two.set_parent(b, a), return_exceptions=True)
            failures = [o for o in outcomes if isinstance(o, Exception)]
            assert len(failures) == 1 and isinstance(failures[0], FailedPreconditionError), outcomes
            lineages = [(await one.lineage(a)).ancestors, (await one.lineage(b)).ancestors]
            # One link won; no cycle was stored.
            assert sorted(map(len, lineages)) == [0, 1], lineages
