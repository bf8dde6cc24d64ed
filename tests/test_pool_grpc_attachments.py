"""A memory names shared pools: AUTO_CONTEXT's PrepareReasoningInput and TIERED's projection
include their rendering, a child created from the memory inherits them, the choice goes with the
memory, is tenant-scoped, and bad input names the field."""

from __future__ import annotations

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as mem_grpc
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient, AsyncPoolClient, PoolClient
from agentscope_memory.client.scopes import AsyncScopeClient
from agentscope_memory.client.tiered import AsyncTieredClient
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.tiered import TieredConfig

TEAM = "研发团队"


@pytest.fixture(params=["sqlite", "postgres", "memory"])
async def server(request, server_factory):
    if request.param == "postgres":
        return await server_factory(store="postgres", postgres_dsn=request.getfixturevalue("postgres_dsn"))
    return await server_factory(store=request.param)
ALL = "全公司"


async def _prepare(address: str, memory_id: str) -> list[Msg]:
    async with grpc.aio.insecure_channel(address) as channel:
        out = await mem_grpc.MemoryServiceStub(channel).PrepareReasoningInput(
            mem_pb.PrepareReasoningInputRequest(memory_id=memory_id, system_prompt="You are a coder."))
    return [msg_from_proto(m) for m in out.messages]


async def _one_entry_budget(pools: AsyncPoolClient) -> int:
    """The smallest budget for which the newest entry of TEAM and ALL fits."""
    for budget in range(1, 200):
        if (await pools.render([TEAM, ALL], budget)).entry_count == 1:
            return budget
    raise AssertionError("no budget renders exactly one entry")


async def test_prepare_reasoning_input_includes_the_memorys_pools(server) -> None:
    async with AsyncPoolClient(server.address, timeout=10) as pools, AsyncMemoryClient(server.address) as memories:
        await memories.create_memory("编码代理", "AUTO_CONTEXT", auto_context_config=AutoContextConfig(msg_threshold=100))
        await memories.add_messages("编码代理", [Msg.create(MsgRole.USER, "修复登录页")])
        without = await _prepare(server.address, "编码代理")
        # Without pools the system message is exactly AgentScope's: one text block.
        assert len(without[0].content) == 1 and "[SHARED:" not in without[0].text_content

        await pools.write(TEAM, "发布", "周五冻结代码", writer="planner")
        await pools.write(ALL, "规范", {"lint": "ruff"}, writer="admin")
        await pools.write(TEAM, "负责人", "张三", writer="planner")
        chosen = await pools.set_memory_pools("编码代理", [TEAM, ALL, TEAM], max_tokens=500)
        assert chosen.pool_ids == [TEAM, ALL] and chosen.max_tokens == 500
        assert await pools.get_memory_pools("编码代理") == chosen

        got = await _prepare(server.address, "编码代理")
        system = got[0]
        assert system.role is MsgRole.SYSTEM and len(system.content) == 2
        assert system.content[0].text.startswith("You are a coder.\n\n") and "context_reload" in system.content[0].text
        shared = system.content[1].text.splitlines()
        # Newest first across both pools.
        assert shared == ["[SHARED:负责人] 张三", '[SHARED:规范] {"lint":"ruff"}', "[SHARED:发布] 周五冻结代码"]
        assert got[1].text_content == "修复登录页"

        # A later write shows at the next call; the budget leaves out what does not fit.
        await pools.write(TEAM, "发布", "下周一发布", writer="planner")
        assert (await _prepare(server.address, "编码代理"))[0].content[1].text.splitlines()[0] == "[SHARED:发布] 下周一发布"
        budget = await _one_entry_budget(pools)
        await pools.set_memory_pools("编码代理", [TEAM, ALL], max_tokens=budget)
        tight = (await _prepare(server.address, "编码代理"))[0].content[1].text.splitlines()
        # The same selection RenderPoolContext makes: newest first, skipping what does not fit.
        assert tight == (await pools.render([TEAM, ALL], budget)).text.splitlines() and len(tight) == 1

        # An empty list detaches every pool.
        assert (await pools.set_memory_pools("编码代理", [])).pool_ids == []
        assert len((await _prepare(server.address, "编码代理"))[0].content) == 1


async def test_tiered_projection_uses_the_memorys_pools_unless_the_request_brings_its_own(server) -> None:
    async with AsyncPoolClient(server.address, timeout=10) as pools, \
            AsyncTieredClient(server.address, timeout=10) as tiered:
        await tiered.create_memory("分层", TieredConfig(score_importance=False))
        await tiered.add("分层", [Msg.create(MsgRole.USER, "继续重构数据库层")])
        await pools.write(TEAM, "约定", "所有 SQL 参数化", writer="lead")
        plain = await tiered.project("分层", "继续", 4000)
        assert not any("[SHARED:约定]" in m.text_content for m in plain.messages)
        await pools.set_memory_pools("分层", [TEAM])
        projected = await tiered.project("分层", "继续", 4000)
        assert any("[SHARED:约定] 所有 SQL 参数化" in m.text_content for m in projected.messages)
        own = await tiered.project("分层", "继续", 4000, shared_context=[Msg.create(MsgRole.SYSTEM, "调用方自带的共享")])
        texts = [m.text_content for m in own.messages]
        assert any("调用方自带的共享" in t for t in texts) and not any("[SHARED:约定]" in t for t in texts)


async def test_a_tiered_projection_of_a_large_pool_keeps_its_newest_entries(server) -> None:
    # 1,500 entries fit the memory's pool budget; the projection's shared section has room for a
    # few dozen: it keeps the newest (it used to keep the oldest, and past 1,000 entries
    # ProjectContext failed with INVALID_ARGUMENT naming shared_context, which the caller never sent).
    async with AsyncPoolClient(server.address, timeout=30) as pools, \
            AsyncTieredClient(server.address, timeout=30) as tiered:
        await tiered.create_memory("大池", TieredConfig(score_importance=False))
        await tiered.add("大池", [Msg.create(MsgRole.USER, "继续重构数据库层")])
        for i in range(1500):
            await pools.write(TEAM, f"事实{i:04}", f"第{i}条共享事实")
        await pools.set_memory_pools("大池", [TEAM], max_tokens=200_000)
        projected = await tiered.project("大池", "继续", 2000)
        prefix = "[SHARED:事实"
        shown = sorted(int(m.text_content[len(prefix):len(prefix) + 4]) for m in projected.messages
                       if m.text_content.startswith(prefix))
        assert 0 < len(shown) < 1000
        assert shown == list(range(1500 - len(shown), 1500))


async def test_a_child_inherits_its_parents_pools_and_the_choice_goes_with_the_memory(server) -> None:
    async with AsyncPoolClient(server.address, timeout=10) as pools, AsyncMemoryClient(server.address) as memories, \
            AsyncScopeClient(server.address) as scopes:
        await memories.create_memory("主代理", "AUTO_CONTEXT")
        await pools.write(TEAM, "目标", "上线支付功能", writer="主代理")
        await pools.set_memory_pools("主代理", [TEAM], max_tokens=300)
        await scopes.create_child("主代理", "子代理")
        inherited = await pools.get_memory_pools("子代理")
        assert inherited.pool_ids == [TEAM] and inherited.max_tokens == 300
        assert "[SHARED:目标] 上线支付功能" in (await _prepare(server.address, "子代理"))[0].text_content
        # The child's choice is its own afterwards.
        await pools.set_memory_pools("子代理", [])
        assert (await pools.get_memory_pools("主代理")).pool_ids == [TEAM]
        # Deleting a memory deletes its choice, not the pool; the same id created again reads none.
        await memories.delete_memory("子代理")
        await memories.create_memory("子代理", "AUTO_CONTEXT")
        assert (await pools.get_memory_pools("子代理")).pool_ids == []
        assert (await pools.get(TEAM, "目标")).value == "上线支付功能"


async def test_memory_pools_are_tenant_scoped_and_bad_input_names_the_field(server_factory) -> None:
    server = await server_factory(api_keys={"alice-tenant-key-0001": "tenant-a", "bob-tenant-key-00001": "tenant-b"})
    async with AsyncPoolClient(server.address, api_key="alice-tenant-key-0001", timeout=10) as alice, \
            AsyncPoolClient(server.address, api_key="bob-tenant-key-00001", timeout=10) as bob, \
            AsyncMemoryClient(server.address, api_key="alice-tenant-key-0001") as memories:
        await memories.create_memory("代理", "AUTO_CONTEXT")
        await alice.set_memory_pools("代理", [TEAM])
        with pytest.raises(NotFoundError):
            await bob.get_memory_pools("代理")
        with pytest.raises(NotFoundError):
            await bob.set_memory_pools("代理", [TEAM])
        assert (await alice.get_memory_pools("代理")).pool_ids == [TEAM]
        with pytest.raises(NotFoundError, match="没有"):
            await alice.set_memory_pools("没有", [TEAM])

    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.SharedPoolServiceStub(channel)
        key = (("x-api-key", "alice-tenant-key-0001"),)
        cases = [
            (pb.SetMemoryPoolsRequest(pool_ids=[TEAM]), "memory_id"),
            (pb.SetMemoryPoolsRequest(memory_id="a\x00b", pool_ids=[TEAM]), "memory_id"),
            (pb.SetMemoryPoolsRequest(memory_id="代理", pool_ids=[""]), "pool_ids[0]"),
            (pb.SetMemoryPoolsRequest(memory_id="代理", pool_ids=[TEAM, "p" * 600]), "pool_ids[1]"),
            (pb.SetMemoryPoolsRequest(memory_id="代理", pool_ids=[f"p{i}" for i in range(17)]), "pool_ids"),
            (pb.SetMemoryPoolsRequest(memory_id="代理", pool_ids=[TEAM], max_tokens=-1), "max_tokens"),
            (pb.SetMemoryPoolsRequest(memory_id="代理", pool_ids=[TEAM], max_tokens=10_000_000), "max_tokens"),
        ]
        for request, field in cases:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.SetMemoryPools(request, metadata=key)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (request, caught.value.details())
            assert field in (caught.value.details() or ""), (field, caught.value.details())
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetMemoryPools(pb.GetMemoryPoolsRequest(), metadata=key)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "memory_id" in (caught.value.details() or "")
        # Nothing was changed by the refused requests.
        got = await stub.GetMemoryPools(pb.GetMemoryPoolsRequest(memory_id="代理"), metadata=key)
        assert list(got.pool_ids) == [TEAM] and got.max_tokens == 0


def test_blocking_and_local_clients(threaded_server, tmp_path) -> None:
    from agentscope_memory.client import MemoryClient
    from agentscope_memory.service import ServiceSettings

    with PoolClient(threaded_server.address, timeout=10) as pools, MemoryClient(threaded_server.address) as memories:
        memories.create_memory("同步", "AUTO_CONTEXT")
        assert pools.set_memory_pools("同步", [TEAM], 100).pool_ids == [TEAM]
        assert pools.get_memory_pools("同步").max_tokens == 100
    local = PoolClient.local(ServiceSettings(data_dir=tmp_path / "local"))
    try:
        with pytest.raises(NotFoundError):
            local.set_memory_pools("本地", [TEAM])
        with pytest.raises(InvalidArgumentError, match="max_tokens"):
            local.set_memory_pools("本地", [TEAM], -5)
    finally:
        local.close()
