"""Parent/child scopes in the clients' local mode (no server): asyncio and blocking."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.scopes import AsyncScopeClient, ScopeClient
from agentscope_memory.errors import FailedPreconditionError, NotFoundError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service


async def test_local_mode_inherits_like_the_server(tmp_path: Path) -> None:
    service = build_service(ServiceSettings(data_dir=tmp_path, long_term_preload=False))
    async with service, AsyncMemoryClient.local(service) as memories, AsyncScopeClient.local(service) as scopes:
        await memories.create_memory("父")
        child = await scopes.create_child("父", "子")
        assert child.kind == "IN_MEMORY"
        await scopes.add_messages("父", [Msg.create(MsgRole.USER, "本地")])
        await scopes.add_messages("父", [Msg.create(MsgRole.USER, "共享")], visibility="shared")
        inherited = await scopes.get_inherited("子")
        assert [(m.origin_memory_id, m.message.text_content, m.visibility, m.distance) for m in inherited] == [
            ("父", "共享", "SHARED", 1)]
        assert [c async for c in scopes.iter_children("父")] == ["子"]
        await scopes.add_messages("子", [Msg.create(MsgRole.USER, "子的")])
        assert [m.text_content for m in await scopes.get_context("子")] == ["共享", "子的"]
        with pytest.raises(FailedPreconditionError):
            await scopes.set_parent("父", "子")
        with pytest.raises(FailedPreconditionError, match="force"):
            await scopes.delete_memory("父")
        with pytest.raises(FailedPreconditionError, match="force"):
            await memories.delete_memory("父")
        parent, kid = Scope(agent_name="lead", user_id="u"), Scope(agent_name="helper", user_id="u")
        await scopes.set_long_term_parent(kid, parent)
        await scopes.record(parent, [Msg.create(MsgRole.USER, "The launch date is 12 May")], visibility="SHARED")
        found = await scopes.search(kid, "when is the launch?", top_k=3)
        assert [(m.text, m.inherited, m.scope) for m in found] == [("The launch date is 12 May", True, parent)]
        await scopes.delete_memory("父", force=True)
        assert (await scopes.lineage("子")).ancestors == []


def test_blocking_local_mode(tmp_path: Path) -> None:
    child, parent = Scope(agent_name="子", user_id="u"), Scope(agent_name="父", user_id="u")
    with ScopeClient.local(ServiceSettings(data_dir=tmp_path, long_term_preload=False)) as scopes:
        assert scopes.set_long_term_parent(child, parent) == [parent]
        assert scopes.long_term_lineage(parent).child_count == 1
        with pytest.raises(FailedPreconditionError, match="cycle"):
            scopes.set_long_term_parent(parent, child)
        with pytest.raises(NotFoundError):
            scopes.lineage("nobody")


async def test_child_hooks_run_in_the_creating_transaction(tmp_path: Path) -> None:
    service = build_service(ServiceSettings(data_dir=tmp_path, long_term_preload=False))
    async with service, AsyncMemoryClient.local(service) as memories, AsyncScopeClient.local(service) as scopes:
        assert service.scopes is not None
        await memories.create_memory("parent")
        await memories.add_messages("parent", [Msg.create(MsgRole.USER, "x")])
        seen = []

        def copy_setting(tx, parent, child) -> None:
            # What an engine with per-memory settings does: read the parent's, write the child's.
            tx.kv_put(child.memory_id, "pools", tx.kv_get(parent.memory_id, "pools") or "[]")
            seen.append((parent.memory_id, child.memory_id))

        def refuse(tx, parent, child) -> None:
            if child.memory_id == "refused":
                raise FailedPreconditionError("pools: the parent's pool is gone")

        service.scopes.child_hooks += [copy_setting, refuse]
        await scopes.create_child("parent", "child")
        assert seen == [("parent", "child")]
        with pytest.raises(FailedPreconditionError, match="pools"):
            await scopes.create_child("parent", "refused")
        with pytest.raises(NotFoundError):
            await memories.get_memory("refused")
        assert [c async for c in scopes.iter_children("parent")] == ["child"]
