"""DeleteMessages and UpdateMessageMarks under hostile use over real gRPC: marks of any text
(control characters, NUL, bidi overrides, emoji, "") are stored and matched exactly; another
tenant's memory of the same id is never touched; a TIERED memory refuses them as AUTO_CONTEXT
does; and deletes and mark changes racing another client's adds lose or keep nothing they
should not."""

from __future__ import annotations

import asyncio

import pytest

from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import FailedPreconditionError, NotFoundError
from agentscope_memory.message import Msg, MsgRole

KEY = "agentscope_python"
ODD_MARKS = ["a\x00b", "\x1b[31m红\x1b[0m", "\u202e反转\u202c", "🙂标记", "", " ", "a"]


def _marked(message_id: str, marks: list[str]) -> Msg:
    return Msg.create(MsgRole.USER, f"内容 {message_id}", id=message_id, metadata={KEY: {"marks": marks}})


async def _marks(client: AsyncMemoryClient, memory_id: str) -> dict[str, list[str]]:
    return {m.id or "": m.metadata[KEY]["marks"] for m in await client.get_messages(memory_id)}


async def test_marks_of_any_text_are_stored_and_matched_exactly(server) -> None:
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("怪标记")
        await client.add_messages("怪标记", [_marked(f"消息-{i}", []) for i in range(len(ODD_MARKS))])
        for i, mark in enumerate(ODD_MARKS):
            updated = await client.update_message_marks("怪标记", mark, message_ids=[f"消息-{i}"])
            assert (updated.updated_count, updated.changed_count) == (1, 1)
        assert await _marks(client, "怪标记") == {f"消息-{i}": [mark] for i, mark in enumerate(ODD_MARKS)}
        # "a" is no prefix match of "a\x00b", nor "" of anything.
        deleted = await client.delete_messages("怪标记", marks=["a", ""])
        assert deleted.deleted_ids == [f"消息-{ODD_MARKS.index('')}", f"消息-{ODD_MARKS.index('a')}"]
        renamed = await client.update_message_marks("怪标记", "普通", old_mark="a\x00b")
        assert renamed.changed_count == 1
        assert (await _marks(client, "怪标记"))["消息-0"] == ["普通"]


async def test_another_tenants_memory_of_the_same_id_is_never_touched(server_factory) -> None:
    keys = {"key-for-alice-000001": "alice", "key-for-bob-00000001": "bob"}
    server = await server_factory(api_keys=keys)
    async with AsyncMemoryClient(server.address, api_key="key-for-alice-000001") as alice, \
            AsyncMemoryClient(server.address, api_key="key-for-bob-00000001") as bob:
        await alice.create_memory("同一个")
        await alice.add_messages("同一个", [_marked("甲", ["临时"]), _marked("乙", [])])
        with pytest.raises(NotFoundError, match="同一个"):
            await bob.delete_messages("同一个", marks=["临时"])
        with pytest.raises(NotFoundError, match="同一个"):
            await bob.update_message_marks("同一个", "坏", message_ids=["乙"], allow_missing=True)
        await bob.create_memory("同一个")
        await bob.add_messages("同一个", [_marked("丙", ["临时"])])
        assert (await bob.delete_messages("同一个", ["甲", "乙"], allow_missing=True)).deleted_count == 0
        with pytest.raises(NotFoundError, match="甲"):
            await bob.update_message_marks("同一个", "坏", message_ids=["甲"])
        assert (await bob.delete_messages("同一个", marks=["临时"])).deleted_ids == ["丙"]
        assert await _marks(alice, "同一个") == {"甲": ["临时"], "乙": []}


async def test_a_tiered_memory_refuses_them_and_keeps_its_messages(server) -> None:
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("分层", kind="TIERED")
        await client.add_messages("分层", [_marked("甲", ["临时"])])
        with pytest.raises(FailedPreconditionError, match="IN_MEMORY"):
            await client.delete_messages("分层", marks=["临时"])
        with pytest.raises(FailedPreconditionError, match="IN_MEMORY"):
            await client.update_message_marks("分层", "新", message_ids=["甲"])
        assert [m.id for m in await client.get_messages("分层")] == ["甲"]


async def test_deletes_and_mark_changes_racing_another_clients_adds_keep_what_they_should(server) -> None:
    rounds = 30
    async with AsyncMemoryClient(server.address) as writer, AsyncMemoryClient(server.address) as editor:
        await writer.create_memory("竞争")

        async def add() -> None:
            for i in range(rounds):
                await writer.add_messages("竞争", [_marked(f"留-{i}", ["保留"]), _marked(f"删-{i}", ["临时"])])
                await asyncio.sleep(0)

        async def edit() -> list[str]:
            gone: list[str] = []
            for _ in range(rounds):
                # Renaming 临时 to 作废 then deleting 作废: never a 保留 message.
                await editor.update_message_marks("竞争", "作废", old_mark="临时")
                gone += (await editor.delete_messages("竞争", marks=["作废"])).deleted_ids or []
                await asyncio.sleep(0)
            return gone

        _, gone = await asyncio.gather(add(), edit())
        await editor.update_message_marks("竞争", "作废", old_mark="临时")
        gone += (await editor.delete_messages("竞争", marks=["作废"])).deleted_ids or []
        assert sorted(gone) == sorted(f"删-{i}" for i in range(rounds))
        assert await _marks(writer, "竞争") == {f"留-{i}": ["保留"] for i in range(rounds)}
        assert [m.id for m in await writer.get_messages("竞争")] == [f"留-{i}" for i in range(rounds)]


async def test_ids_of_another_memory_are_unknown_here(server) -> None:
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("甲记忆")
        await client.create_memory("乙记忆")
        await client.add_messages("甲记忆", [_marked("甲-1", [])])
        await client.add_messages("乙记忆", [_marked("乙-1", ["临时"])])
        with pytest.raises(NotFoundError, match="乙-1"):
            await client.delete_messages("甲记忆", ["甲-1", "乙-1"])
        with pytest.raises(NotFoundError, match="乙-1"):
            await client.update_message_marks("甲记忆", "坏", message_ids=["乙-1"])
        assert (await client.delete_messages("甲记忆", ["乙-1"], allow_missing=True)).deleted_count == 0
        assert await _marks(client, "甲记忆") == {"甲-1": []}
        assert await _marks(client, "乙记忆") == {"乙-1": ["临时"]}


async def test_a_delete_of_more_ids_than_an_answer_holds_answers_within_grpcs_limit(server) -> None:
    # 1500 messages with ids of 999 bytes: their ids alone are over a MiB.
    long_id = "长" * 330
    async with AsyncMemoryClient(server.address) as client:
        await client.create_memory("长编号")
        for start in (0, 750):
            await client.add_messages("长编号", [_marked(f"{long_id}{i:04d}", ["临时"]) for i in range(start, start + 750)])
        await client.add_messages("长编号", [_marked("留下", [])])
        deleted = await client.delete_messages("长编号", marks=["临时"])
        assert (deleted.deleted_count, deleted.deleted_ids, deleted.message_count) == (1500, None, 1)
        updated = await client.update_message_marks("长编号", "看过")
        assert (updated.updated_count, updated.changed_count) == (1, 1)
        assert await _marks(client, "长编号") == {"留下": ["看过"]}
