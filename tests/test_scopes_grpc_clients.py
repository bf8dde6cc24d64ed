"""Parent/child scopes through the blocking client, and after a server restart."""

from __future__ import annotations

from pathlib import Path

from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.client.scopes import AsyncScopeClient, ScopeClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole


def test_blocking_clients(threaded_server) -> None:
    with MemoryClient(threaded_server.address) as memories, ScopeClient(threaded_server.address) as scopes:
        memories.create_memory("root")
        scopes.create_child("root", "leaf")
        scopes.add_messages("root", [Msg.create(MsgRole.USER, "for everyone")], visibility="GLOBAL")
        memories.create_memory("stranger")
        assert [m.message.text_content for m in scopes.get_inherited("stranger")] == ["for everyone"]
        assert [m.distance for m in scopes.get_inherited("leaf")] == [1]
        scopes.add_messages("leaf", [Msg.create(MsgRole.USER, "leaf's own")])
        assert [m.text_content for m in scopes.get_context("leaf")] == ["for everyone", "leaf's own"]
        assert list(scopes.iter_children("root")) == ["leaf"]
        assert scopes.lineage("leaf").ancestors == ["root"]
        assert scopes.set_parent("leaf", None) == []
        scopes.delete_memory("root")


async def test_hierarchy_and_visibility_survive_a_restart(server_factory, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data)
    async with AsyncMemoryClient(server.address) as memories, AsyncScopeClient(server.address) as scopes:
        await memories.create_memory("lead")
        await scopes.create_child("lead", "helper")
        await scopes.add_messages("lead", [Msg.create(MsgRole.USER, "持久 durable")], visibility="SHARED")
        await scopes.set_long_term_parent(Scope(agent_name="helper"), Scope(agent_name="lead"))
    await server.stop(0)
    again = await server_factory(data_dir=data)
    async with AsyncScopeClient(again.address) as scopes:
        assert (await scopes.lineage("helper")).ancestors == ["lead"]
        assert [m.message.text_content for m in await scopes.get_inherited("helper")] == ["持久 durable"]
        assert (await scopes.long_term_lineage(Scope(agent_name="helper"))).ancestors == [Scope(agent_name="lead")]
