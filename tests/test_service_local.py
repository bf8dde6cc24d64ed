"""The service without gRPC: `build_service` from settings, and the clients' local mode, which
must behave like the same clients talking to a server over the same kind of data directory."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agentscope_memory.client import AsyncLongTermClient, AsyncMemoryClient, LongTermClient, MemoryClient
from agentscope_memory.errors import AbortedError, InvalidArgumentError, NotFoundError, UnimplementedError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from test_auto_context_grpc_end_to_end import D3_CONFIG, d3_messages

ALICE = Scope(agent_name="Assistant", user_id="alice")


def settings(data_dir: Path, **overrides: object) -> ServiceSettings:
    return ServiceSettings(data_dir=data_dir, long_term_preload=False, **overrides)


async def _conversation(client) -> dict:  # remote and local clients alike
    """One sequence of calls; returns what a caller observes, minus times."""
    created = await client.create_memory(
        "session-1", "AUTO_CONTEXT", labels={"user": "alice"},
        auto_context_config=AutoContextConfig(msg_threshold=7, profile="improved"),
    )
    await client.create_memory("plain")
    counts = [await client.add_message("plain", Msg.create(MsgRole.USER, text)) for text in ("你好", "hello", "bye")]
    deleted = await client.delete_message("plain", 1)
    out_of_range = await client.delete_message("plain", 10)
    entries, version = await client.save_state("plain")
    await client.load_state("plain", entries, expected_version=version)
    errors = []
    for call in (lambda: client.get_memory("missing"), lambda: client.add_messages("plain", []),
                 lambda: client.delete_message("plain", 99, expected_id="消息")):
        with pytest.raises((NotFoundError, InvalidArgumentError, AbortedError)) as err:
            await call()
        errors.append((type(err.value).__name__, str(err.value)))
    listed = [m async for m in client.list_memories(page_size=1)]
    return {
        "created": dataclasses.replace(created, create_time=0, update_time=0),
        "counts": counts,
        "deleted": (deleted, out_of_range),
        "texts": [m.text_content for m in await client.get_messages("plain")],
        "paged": [m.text_content async for m in client.iter_messages("plain", page_size=1)],
        "state": [(e.key, len(e.items or [])) for e in entries],
        "errors": errors,
        "listed": [(m.memory_id, m.kind, m.message_count) for m in listed],
    }


async def test_local_mode_behaves_like_the_server(server_factory, tmp_path: Path) -> None:
    server = await server_factory(data_dir=tmp_path / "remote")
    async with AsyncMemoryClient(server.address) as remote:
        over_grpc = await _conversation(remote)
    async with AsyncMemoryClient.local(settings(tmp_path / "local")) as local:
        in_process = await _conversation(local)
    assert in_process == over_grpc
    assert over_grpc["texts"] == ["你好", "bye"] and over_grpc["deleted"] == (True, False)
    config = over_grpc["created"].auto_context_config
    assert (config.msg_threshold, config.profile, config.max_token) == (7, "improved", 128 * 1024)


async def test_a_local_data_directory_is_a_server_data_directory(server_factory, tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with AsyncMemoryClient.local(settings(data)) as local:
        await local.create_memory("chat")
        await local.add_message("chat", Msg.create(MsgRole.USER, "written in-process"))
    server = await server_factory(data_dir=data)
    async with AsyncMemoryClient(server.address) as remote:
        assert [m.text_content for m in await remote.get_messages("chat")] == ["written in-process"]


def test_blocking_local_mode(tmp_path: Path) -> None:
    with MemoryClient.local(settings(tmp_path)) as memory:
        memory.create_memory("chat")
        assert memory.add_messages("chat", [Msg.create(MsgRole.USER, "a"), Msg.create(MsgRole.ASSISTANT, "b")]) == 2
        assert [m.text_content for m in memory.iter_messages("chat", page_size=1)] == ["a", "b"]
        assert [d.memory_id for d in memory.list_memories()] == ["chat"]
        with pytest.raises(NotFoundError):
            memory.get_messages("nope")


async def test_service_without_grpc_runs_every_engine(tmp_path: Path) -> None:
    service = build_service(settings(tmp_path))
    async with service:
        await service.memories.create_memory("default", "chat", "AUTO_CONTEXT", D3_CONFIG.to_json())
        await service.memories.add_messages("default", "chat", d3_messages())
        outcome = await service.auto_context.compress_if_needed("default", "chat")
        assert outcome.compressed  # the offline extractive summariser, no LLM configured
        assert service.long_term is not None and service.turns is not None
        await service.turns.begin_turn("default", "chat", ALICE, _mode("BOTH"), [Msg.create(MsgRole.USER, "I live in Tartu")])
        assert await service.turns.end_turn("default", "chat", ALICE, _mode("BOTH"), background=True)
        assert await service.jobs.wait_idle(60)
        found = await service.long_term.search("default", ALICE, "where do I live")
        assert "I live in Tartu" in [i.text for i in found]
        directory, keys = await service.sessions.export("default", "s-1", ["chat"])
        assert (directory / "autoContextMemory_workingMessages.jsonl").exists()


async def test_long_term_switched_off_locally(tmp_path: Path) -> None:
    async with AsyncLongTermClient.local(settings(tmp_path, long_term_enabled=False)) as ltm:
        with pytest.raises(UnimplementedError):
            await ltm.list(ALICE)


async def test_long_term_local_mode_matches_the_server(server_factory, tmp_path: Path) -> None:
    async def session(ltm) -> list:
        stored = await ltm.record(ALICE, [Msg.create(MsgRole.USER, "我喜欢绿茶"), Msg.create(MsgRole.USER, "I cycle to work")])
        got = await ltm.get(stored[0].id)
        text = await ltm.retrieve(ALICE, Msg.create(MsgRole.USER, "绿茶"), limit=1)
        tool = await ltm.record_to_memory(ALICE, "worth keeping", ["Allergic to nuts"])
        found = await ltm.retrieve_from_memory(ALICE, ["nuts"])
        listed = sorted(i.text for i in await ltm.list(ALICE))
        await ltm.delete(stored[1].id)
        forgotten = await ltm.forget(ALICE)
        return [got.text, text, tool, "Allergic to nuts" in found, listed, forgotten, await ltm.list(ALICE)]

    server = await server_factory(data_dir=tmp_path / "remote")
    async with AsyncLongTermClient(server.address) as remote:
        over_grpc = await session(remote)
    async with AsyncLongTermClient.local(settings(tmp_path / "local")) as local:
        in_process = await session(local)
    assert in_process == over_grpc
    assert over_grpc[0] == "我喜欢绿茶" and over_grpc[1] == "我喜欢绿茶" and over_grpc[3] is True


async def test_long_term_local_search_takes_the_remote_options_and_errors(server_factory, tmp_path: Path) -> None:
    async def searches(ltm) -> list:
        await ltm.record(ALICE, [Msg.create(MsgRole.USER, "我喜欢绿茶 🍵")])
        out: list = []
        for query, options in (("绿茶", {"ranking": "rrf"}), ("绿茶", {"ranking": "lexical", "top_k": 1}),
                               ("", {}), ("绿茶", {"top_k": -1}), ("绿茶", {"ranking": "nope"})):
            try:
                out.append([i.text for i in await ltm.search(ALICE, query, **options)])
            except ValueError as exc:  # InvalidArgumentError is one
                out.append((type(exc).__name__, str(exc)))
        return out

    server = await server_factory(data_dir=tmp_path / "remote")
    async with AsyncLongTermClient(server.address) as remote:
        over_grpc = await searches(remote)
    async with AsyncLongTermClient.local(settings(tmp_path / "local")) as local:
        in_process = await searches(local)
    assert in_process == over_grpc
    assert over_grpc[0] == ["我喜欢绿茶 🍵"] and over_grpc[2] == ("InvalidArgumentError", "query: is required")


def test_blocking_long_term_client(threaded_server, tmp_path: Path) -> None:
    with MemoryClient(threaded_server.address) as memory, LongTermClient(threaded_server.address) as ltm:
        memory.create_memory("chat")
        turn = ltm.begin_turn("chat", ALICE, "AGENT_CONTROL", [Msg.create(MsgRole.USER, "My cat is Mochi")])
        assert set(turn.tools) == {"recordToMemory", "retrieveFromMemory"}
        assert ltm.end_turn("chat", ALICE, "AGENT_CONTROL") is False
        assert ltm.record_to_memory(ALICE, "", ["Cat: Mochi"]) == "Successfully recorded to long-term memory"
        [item] = ltm.list(ALICE)
        assert ltm.get(item.id).text == "Cat: Mochi"
        assert "Cat: Mochi" in ltm.retrieve(ALICE, Msg.create(MsgRole.USER, "cat name"))
        with pytest.raises(InvalidArgumentError) as err:
            ltm.list(Scope())
        assert err.value.field == "scope"
        assert ltm.forget(ALICE) == 1
        with pytest.raises(NotFoundError):
            ltm.get(item.id)


def _mode(name: str):
    from agentscope_memory.long_term.modes import Mode

    return Mode(name)
