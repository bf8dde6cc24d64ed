"""Ids in any language: Chinese, Japanese, emoji, spaces, dots and `..` work as memory, session,
user, agent and run ids through every RPC, JsonSession export/import and the Python clients,
compare exactly as given (no NFC), and stay inside their tenant."""

from __future__ import annotations

import base64
import unicodedata

import grpc
import pytest

from agentscope_memory import errors
from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2 as lpb,
)
from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2_grpc as lpb_grpc,
)
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    memory_service_pb2_grpc as pb_grpc,
)
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb
from agentscope_memory._proto.agentscope.memory.v1 import (
    state_service_pb2_grpc as spb_grpc,
)
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.long_term.engine import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.session.json_session import JsonSession

CAFE_NFC = unicodedata.normalize("NFC", "café")
CAFE_NFD = unicodedata.normalize("NFD", "café")
IDS = [
    "会话-42", "助手", "用户-1", "セッション・テスト", "🤖 bot 🎉", "with spaces", "a.b.c", ".", "..",
    "../etc", "a/b\\c", CAFE_NFC, CAFE_NFD, "x" * 256, "会" * 85, " leading", "ג׳ וְ", "\u200bzero-width",
]
STATIC = lpb.LONG_TERM_MEMORY_MODE_STATIC_CONTROL


def msg(text: str, role: MsgRole = MsgRole.USER) -> Msg:
    return Msg.create(role, text)


def test_nfc_and_nfd_are_two_ids() -> None:
    assert CAFE_NFC != CAFE_NFD and len(set(IDS)) == len(IDS)


async def test_every_memory_rpc_takes_unicode_ids(server) -> None:
    async with AsyncMemoryClient(server.address, timeout=30) as client, grpc.aio.insecure_channel(server.address) as ch:
        memory = pb_grpc.MemoryServiceStub(ch)
        state = spb_grpc.StateServiceStub(ch)
        for memory_id in IDS:
            await client.create_memory(memory_id, labels={"标签": memory_id[:20] or "x"})
            assert (await client.get_memory(memory_id)).memory_id == memory_id
            await client.add_messages(memory_id, [msg(f"你好 {memory_id}"), msg("おはよう", MsgRole.ASSISTANT)])
            assert [m.text_content for m in await client.get_messages(memory_id)] == [f"你好 {memory_id}", "おはよう"]
            assert await client.delete_message(memory_id, 1)
            entries, _ = await client.save_state(memory_id)
            await client.clear(memory_id)
            await client.load_state(memory_id, entries)
            assert [m.text_content for m in await client.get_messages(memory_id)] == [f"你好 {memory_id}"]

            ac_id = memory_id[:250] + "-ac" if len(memory_id.encode()) < 250 else memory_id[:80] + "ac"
            await memory.CreateMemory(pb.CreateMemoryRequest(memory_id=ac_id, kind=pb.MEMORY_KIND_AUTO_CONTEXT))
            await memory.AddMessages(pb.AddMessagesRequest(memory_id=ac_id, messages=[msg_to_proto(msg("长文本"))]))
            await memory.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id=ac_id))
            prepared = await memory.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id=ac_id, system_prompt="系统"))
            assert prepared.messages[-1].content[0].text.text == "长文本"
            assert len((await memory.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id=ac_id))).messages) == 1
            assert len((await memory.GetInteractionMessages(pb.GetInteractionMessagesRequest(memory_id=ac_id))).messages) == 1
            reloaded = await memory.ReloadContext(pb.ReloadContextRequest(memory_id=ac_id, working_context_offload_uuid="不存在"))
            assert not reloaded.found
            await memory.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id=ac_id))
            await memory.AttachPlanNote(pb.AttachPlanNoteRequest(memory_id=ac_id, plan=pb.PlanNote(description="计划")))
            saved = await state.SaveState(spb.SaveStateRequest(memory_id=ac_id))
            await state.LoadState(spb.LoadStateRequest(memory_id=ac_id, entries=saved.entries))
            await memory.DeleteMemory(pb.DeleteMemoryRequest(memory_id=ac_id))
        listed = [m.memory_id async for m in client.list_memories()]
        assert sorted(listed) == sorted(IDS)
        # No normalisation: the NFD id holds its own messages.
        assert (await client.get_messages(CAFE_NFD))[0].text_content == f"你好 {CAFE_NFD}"
        for memory_id in IDS:
            await client.delete_memory(memory_id)
        with pytest.raises(errors.NotFoundError):
            await client.get_memory("助手")


async def test_sessions_with_unicode_ids_export_and_import_as_jsonsession(server) -> None:
    async with AsyncMemoryClient(server.address, timeout=30) as client, grpc.aio.insecure_channel(server.address) as ch:
        state = spb_grpc.StateServiceStub(ch)
        root = server.settings.sessions_root() / "default"
        for session_id in ["会话 42", "セッション", "🤖", ".", "..", "../escape", "plain-id.v2", "会" * 63]:
            await client.create_memory(f"mem {session_id}")
            await client.add_messages(f"mem {session_id}", [msg(f"内容 {session_id}")])
            exported = await state.ExportSession(spb.ExportSessionRequest(
                session_id=session_id, memory_ids=[f"mem {session_id}"]))
            safe = all(c.isascii() and (c.isalnum() or c in "_-.") for c in session_id) and session_id not in (".", "..")
            name = session_id if safe else base64.urlsafe_b64encode(session_id.encode()).decode().rstrip("=")
            assert exported.directory == str(root / name)
            assert (root / name).parent == root, "an id never leaves the tenant's session root"
            items = JsonSession(root).get_list(session_id, "memory_messages")
            assert items[0]["content"][0]["text"] == f"内容 {session_id}"
            await client.create_memory(f"copy {session_id}")
            imported = await state.ImportSession(spb.ImportSessionRequest(
                session_id=session_id, memory_id=f"copy {session_id}"))
            assert list(imported.keys) == ["memory_messages"]
            assert (await client.get_messages(f"copy {session_id}"))[0].text_content == f"内容 {session_id}"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await state.ExportSession(spb.ExportSessionRequest(session_id="会" * 64, memory_ids=["mem 🤖"]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "session_id" in err.value.details()


async def test_long_term_scopes_take_unicode_ids(server) -> None:
    async with AsyncMemoryClient(server.address, timeout=60) as client, grpc.aio.insecure_channel(server.address) as ch:
        ltm = lpb_grpc.LongTermMemoryServiceStub(ch)
        scopes = [lpb.Scope(agent_name="助手", user_id="用户-1"), lpb.Scope(agent_name="🤖 bot", user_id=".."),
                  lpb.Scope(user_id="ユーザー", run_name="run 1.2"), lpb.Scope(user_id=CAFE_NFD)]
        for i, scope in enumerate(scopes):
            await ltm.Record(lpb.RecordRequest(scope=scope, messages=[msg_to_proto(msg(f"喜欢绿茶 {i}"))]))
            listed = await ltm.ListLongTermMemories(lpb.ListLongTermMemoriesRequest(scope=scope))
            assert [m.memory for m in listed.memories] == [f"喜欢绿茶 {i}"]
            assert listed.memories[0].scope.user_id == scope.user_id
            item = await ltm.GetLongTermMemory(lpb.GetLongTermMemoryRequest(id=listed.memories[0].id))
            assert item.memory.scope.agent_name == scope.agent_name
            found = await ltm.Retrieve(lpb.RetrieveRequest(scope=scope, message=msg_to_proto(msg("绿茶"))))
            assert f"喜欢绿茶 {i}" in found.text
            await ltm.RecordToMemory(lpb.RecordToMemoryRequest(scope=scope, thinking="记住", content=[f"住在东京 {i}"]))
            tool = await ltm.RetrieveFromMemory(lpb.RetrieveFromMemoryRequest(scope=scope, keywords=["东京"]))
            assert f"住在东京 {i}" in tool.text
            await client.create_memory(f"对话 {i}")
            await ltm.BeginTurn(lpb.BeginTurnRequest(memory_id=f"对话 {i}", scope=scope, mode=STATIC,
                                                     input=[msg_to_proto(msg("我喜欢什么？"))]))
            await ltm.EndTurn(lpb.EndTurnRequest(memory_id=f"对话 {i}", scope=scope, mode=STATIC))
        # NFC and NFD user ids are two users.
        nfc = await ltm.ListLongTermMemories(lpb.ListLongTermMemoriesRequest(scope=lpb.Scope(user_id=CAFE_NFC)))
        assert not nfc.memories
        for scope in scopes:
            deleted = await ltm.DeleteScope(lpb.DeleteScopeRequest(scope=scope))
            assert deleted.deleted_count >= 2


KEYS = {"tenant-a-key-000001": "tenant-a", "tenant-b-key-000001": "tenant-b"}


async def test_unicode_ids_stay_inside_their_tenant(server_factory) -> None:
    server = await server_factory(api_keys=KEYS)
    a = AsyncMemoryClient(server.address, api_key="tenant-a-key-000001", timeout=30)
    b = AsyncMemoryClient(server.address, api_key="tenant-b-key-000001", timeout=30)
    try:
        for memory_id in ("助手", "..", "🤖 bot"):
            await a.create_memory(memory_id)
            await a.add_messages(memory_id, [msg("秘密 A")])
            with pytest.raises(errors.NotFoundError):
                await b.get_messages(memory_id)
            await b.create_memory(memory_id)
            await b.add_messages(memory_id, [msg("B 的消息")])
            assert [m.text_content for m in await a.get_messages(memory_id)] == ["秘密 A"]
            assert [m.text_content for m in await b.get_messages(memory_id)] == ["B 的消息"]
        async with grpc.aio.insecure_channel(server.address) as ch:
            state = spb_grpc.StateServiceStub(ch)
            for key, text in (("tenant-a-key-000001", "秘密 A"), ("tenant-b-key-000001", "B 的消息")):
                await state.ExportSession(spb.ExportSessionRequest(session_id="会话", memory_ids=["助手"]),
                                          metadata=[("x-api-key", key)])
                tenant = KEYS[key]
                items = JsonSession(server.settings.sessions_root() / tenant).get_list("会话", "memory_messages")
                assert items[0]["content"][0]["text"] == text
    finally:
        await a.close()
        await b.close()


async def test_python_clients_refuse_bad_ids_with_the_servers_message(server) -> None:
    async with AsyncMemoryClient(server.address, timeout=10) as client, grpc.aio.insecure_channel(server.address) as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        for bad in ["a\x00b", "", "   ", "会" * 86, "x\x1b[31m"]:
            with pytest.raises(grpc.aio.AioRpcError) as server_err:
                await stub.GetMessages(pb.GetMessagesRequest(memory_id=bad))
            with pytest.raises(errors.InvalidArgumentError) as client_err:
                await client.get_messages(bad)
            assert str(client_err.value) == server_err.value.details()
    with pytest.raises(errors.InvalidArgumentError, match="scope.user_id"):
        Scope(user_id="a\x00").validate()
