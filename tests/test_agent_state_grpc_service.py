"""AgentStateService over real gRPC on sqlite and PostgreSQL: what AgentScope-Java 2.x's
`AgentStateStore` needs, compare-and-set, paging, limits, bad input, tenants, 1.x resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import agent_state_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    agent_state_service_pb2_grpc as pb_grpc,
)
from agentscope_memory.agent_state import Slot, StateConflictError
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.agent_state.json_files import slot_dir
from agentscope_memory.client.agent_state import (
    AgentStateClient,
    AsyncAgentStateClient,
    local_agent_state_client,
)
from agentscope_memory.errors import InvalidArgumentError, ResourceExhaustedError
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings
from agentscope_memory.short_term.manager import DEFAULT_TENANT
from agentscope_memory_server.cli import main

STATE = '{"session_id":"会话/一","user_id":null,"summary":"","context":[{"id":"m1","text":"你好 \\"x\\"\\n"}],"cur_iter":0,"ratio":0.50}'


@pytest.fixture(params=["sqlite", "postgres"])
async def server(request, server_factory):
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        return await server_factory(store="postgres", postgres_dsn=dsn)
    return await server_factory()


@pytest.fixture
async def state(server):
    async with AsyncAgentStateClient(server.address, timeout=10) as client:
        yield client


async def test_a_value_round_trips_byte_for_byte_with_versions(state) -> None:
    slot = Slot("", "会话/一")
    assert (await state.get_value(slot, "agent_state")).found is False
    assert await state.put_value(slot, "agent_state", STATE) == 1
    value = await state.get_value(slot, "agent_state")
    assert (value.found, value.json, value.version) == (True, STATE, 1)
    assert await state.put_value(slot, "agent_state", "{}") == 2
    # Another user's slot with the same session id is another slot.
    assert (await state.get_value(Slot("爱丽丝", "会话/一"), "agent_state")).found is False
    # A blank user id is the anonymous user, as in AgentScope's own stores.
    assert (await state.get_value(Slot("  ", "会话/一"), "agent_state")).json == "{}"


async def test_a_value_and_a_list_under_one_key_are_separate(state) -> None:
    slot = Slot("alice", "s1")
    await state.put_value(slot, "k", '{"v":1}')
    await state.put_list(slot, "k", ["1", "2"])
    assert (await state.get_value(slot, "k")).json == '{"v":1}'
    assert (await state.get_list(slot, "k")).items == ["1", "2"]
    # delete(u, s, key) deletes the single value, as JsonFileAgentStateStore does.
    assert await state.delete_key(slot, "k") is True
    assert (await state.get_value(slot, "k")).found is False
    assert (await state.get_list(slot, "k")).items == ["1", "2"]
    assert await state.delete_key(slot, "k", list_=True) is True
    assert await state.session_exists(slot) is False


async def test_lists_replace_and_append_without_resending(state) -> None:
    slot = Slot("bob", "chat")
    written = await state.put_list(slot, "memory_messages", ['{"id":"a"}', '{"id":"b"}'])
    assert (written.version, written.length) == (1, 2)
    written = await state.append_list(slot, "memory_messages", ['{"id":"c"}'], expected_length=2)
    assert (written.version, written.length) == (2, 3)
    # An append against a stale length changes nothing and names what is stored.
    with pytest.raises(StateConflictError) as conflict:
        await state.append_list(slot, "memory_messages", ['{"id":"x"}'], expected_length=2)
    assert (conflict.value.current_version, conflict.value.current_length) == (2, 3)
    page = await state.get_list(slot, "memory_messages")
    assert (page.items, page.version, page.length) == (['{"id":"a"}', '{"id":"b"}', '{"id":"c"}'], 2, 3)
    await state.put_list(slot, "memory_messages", [])
    empty = await state.get_list(slot, "memory_messages")
    assert (empty.found, empty.items, empty.length) == (True, [], 0)


async def test_compare_and_set(state, server) -> None:
    slot = Slot("alice", "cas")
    assert await state.put_value(slot, "agent_state", '{"n":0}', expected_version=0) == 1
    # 0 means create only.
    with pytest.raises(StateConflictError) as conflict:
        await state.put_value(slot, "agent_state", '{"n":9}', expected_version=0)
    assert conflict.value.current_version == 1
    assert await state.put_value(slot, "agent_state", '{"n":1}', expected_version=1) == 2
    with pytest.raises(StateConflictError) as conflict:
        await state.put_value(slot, "agent_state", '{"n":9}', expected_version=1)
    assert conflict.value.current_version == 2
    assert (await state.get_value(slot, "agent_state")).json == '{"n":1}'
    # The raw status: ABORTED, the current version in the message and in trailing metadata.
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.AgentStateServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await stub.PutValue(pb.PutValueRequest(
                slot=pb.StateSlot(user_id="alice", session_id="cas"), key="agent_state", json="{}",
                condition=pb.WriteCondition(expected_version=1)))
        assert raw.value.code() == grpc.StatusCode.ABORTED
        assert raw.value.details().endswith("current version 2")
        assert ("agentscope-memory-current-version", "2") in tuple(raw.value.trailing_metadata())
    # Lists have versions too.
    await state.put_list(slot, "l", ["1"], expected_version=0)
    with pytest.raises(StateConflictError):
        await state.put_list(slot, "l", ["2"], expected_version=5)


async def test_a_stale_compare_and_set_cannot_land_on_a_session_deleted_and_saved_again(state, server) -> None:
    """ABA: versions restarted at 1 after a delete, so a writer holding version 1 of a deleted
    session compared-and-set over a brand-new session saved under the same ids."""
    slot = Slot("用户甲", "会话/旧")
    assert await state.put_value(slot, "agent_state", '{"context":["旧"]}', expected_version=0) == 1
    read = await state.get_value(slot, "agent_state")
    assert await state.delete_session(slot) == 1
    # Deleted, it reads as absent (version 0, as in AgentScope's stores) and 0 creates it again.
    assert (await state.get_value(slot, "agent_state")).version == 0
    fresh = await state.put_value(slot, "agent_state", '{"context":["新"]}', expected_version=0)
    assert fresh > read.version
    with pytest.raises(StateConflictError) as conflict:
        await state.put_value(slot, "agent_state", '{"context":["旧","过期"]}', expected_version=read.version)
    assert conflict.value.current_version == fresh
    async with grpc.aio.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await pb_grpc.AgentStateServiceStub(channel).PutValue(pb.PutValueRequest(
                slot=pb.StateSlot(user_id="用户甲", session_id="会话/旧"), key="agent_state", json="{}",
                condition=pb.WriteCondition(expected_version=read.version)))
        assert raw.value.code() == grpc.StatusCode.ABORTED
        assert ("agentscope-memory-current-version", str(fresh)) in tuple(raw.value.trailing_metadata())
    assert (await state.get_value(slot, "agent_state")).json == '{"context":["新"]}'

    # One key's value deleted (`delete(u, s, key)`) and saved again: the same.
    before = await state.get_value(slot, "agent_state")
    assert await state.delete_key(slot, "agent_state") is True
    again = await state.put_value(slot, "agent_state", '{"context":[]}')
    assert again > before.version
    with pytest.raises(StateConflictError):
        await state.put_value(slot, "agent_state", "{}", expected_version=before.version)

    # Lists: a rewrite, an append and a page token of the deleted list miss the new one.
    old = await state.put_list(slot, "memory_messages", ['{"id":"一"}', '{"id":"二"}'])
    token = (await state.get_list_page(slot, "memory_messages", page_size=1)).next_page_token
    assert await state.delete_session(slot) == 2
    new = await state.put_list(slot, "memory_messages", ['{"id":"甲"}', '{"id":"乙"}'])
    assert new.version > old.version
    with pytest.raises(StateConflictError):
        await state.put_list(slot, "memory_messages", ["1"], expected_version=old.version)
    with pytest.raises(StateConflictError):
        await state.append_list(slot, "memory_messages", ['{"id":"三"}'], expected_length=2,
                                expected_version=old.version)
    with pytest.raises(StateConflictError):
        await state.get_list_page(slot, "memory_messages", page_size=1, page_token=token)
    assert (await state.get_list(slot, "memory_messages")).items == ['{"id":"甲"}', '{"id":"乙"}']

    # Deleted and saved again over and over: no version of a key repeats.
    versions = [read.version, fresh, again]
    for i in range(3):
        await state.delete_session(slot)
        versions.append(await state.put_value(slot, "agent_state", json.dumps({"第": i}), expected_version=0))
    assert versions == sorted(set(versions))

    # What remembers the deleted versions is not state: nothing lists, counts or finds it.
    await state.put_list(slot, "memory_messages", [])
    assert await state.delete_session(slot) == 2
    assert await state.delete_session(slot) == 0
    assert await state.session_exists(slot) is False
    assert await state.keys(slot) == []
    assert "会话/旧" not in [s async for s in state.iter_session_ids("用户甲")]
    assert (await state.get_list(slot, "memory_messages")).found is False
    # Another slot's versions are its own: a first save there is still version 1.
    assert await state.put_value(Slot("用户甲", "会话/新"), "agent_state", "{}") == 1


async def test_deletes_and_saves_racing_on_two_postgres_replicas_never_repeat_a_version(server_factory,
                                                                                     postgres_dsn) -> None:
    """Deletes and unconditional saves of one key on two replicas at once. A save read the row,
    found none, and lost its insert to another replica's create twice in a row when a delete
    came between: it answered ABORTED (an unconditional write!) or INTERNAL. Now every save lands,
    and goes on from the deleted version (it waits for the delete's lock on the row)."""
    replicas = [await server_factory(store="postgres", postgres_dsn=postgres_dsn) for _ in range(2)]
    slot = Slot("并发", "会话")
    versions: list[int] = []

    async def writer(client: AsyncAgentStateClient, i: int) -> None:
        for j in range(30):
            if (i + j) % 3 == 0:
                await client.delete_session(slot)
            else:
                versions.append(await client.put_value(slot, "agent_state", json.dumps({"写者": i, "次": j})))

    async with AsyncAgentStateClient(replicas[0].address, timeout=30) as first, \
            AsyncAgentStateClient(replicas[1].address, timeout=30) as second:
        await asyncio.gather(*(writer(first if i % 2 else second, i) for i in range(6)))
        last = await first.put_value(slot, "agent_state", "{}")
    assert len(versions) == 120 and len(set(versions)) == len(versions)
    assert last > max(versions)


def test_agent_state_cli_round_trips_a_slot_with_deleted_keys(threaded_server, tmp_path: Path) -> None:
    """What remembers deleted keys' versions is not exported, and a slot imported over its deleted
    self goes on from its versions: a writer holding the state from before cannot save over it."""
    slot = Slot("用户乙", "会话 二")
    messages = ['{"id":"一","text":"你好"}', '{"id":"二","text":"再见"}']
    with AgentStateClient(threaded_server.address) as client:
        client.put_value(slot, "agent_state", STATE)
        client.put_value(slot, "旧值", '"删"')
        client.put_list(slot, "旧列表", ['"删"'])
        assert client.delete_key(slot, "旧值") and client.delete_key(slot, "旧列表", list_=True)
        client.put_list(slot, "memory_messages", messages)
        stale = client.get_value(slot, "agent_state").version
    common = ["--target", threaded_server.address, "--user-id", "用户乙", "--session-id", "会话 二"]
    assert main(["agent-state", "export", "--dir", str(tmp_path / "a"), *common]) == 0
    exported = slot_dir(tmp_path / "a", "用户乙", "会话 二")
    names = ["agent_state.json", "memory_messages.hash", "memory_messages.jsonl"]
    assert sorted(p.name for p in exported.iterdir()) == names
    with AgentStateClient(threaded_server.address) as client:
        assert client.delete_session(slot) == 2
    assert main(["agent-state", "import", "--dir", str(tmp_path / "a"), *common]) == 0
    with AgentStateClient(threaded_server.address) as client:
        assert client.get_value(slot, "agent_state").json == STATE
        assert client.get_list(slot, "memory_messages").items == messages
        assert client.keys(slot) == [("value", "agent_state"), ("list", "memory_messages")]
        with pytest.raises(StateConflictError):
            client.put_value(slot, "agent_state", "{}", expected_version=stale)
    assert main(["agent-state", "export", "--dir", str(tmp_path / "b"), *common]) == 0
    again = slot_dir(tmp_path / "b", "用户乙", "会话 二")
    assert {n: (again / n).read_bytes() for n in names} == {n: (exported / n).read_bytes() for n in names}


async def test_the_empty_key_is_a_key_as_in_agentscopes_own_stores(state) -> None:
    """JsonFileAgentStateStore and InMemoryAgentStateStore (and Redis, OSS, COS) take any key,
    the empty one too (`<session>/.json`); we answered INVALID_ARGUMENT `key`."""
    slot = Slot("爱丽丝", "空键")
    assert (await state.get_value(slot, "")).found is False
    assert await state.put_value(slot, "", STATE) == 1
    assert await state.put_value(slot, " ", '"空格"') == 1
    await state.put_list(slot, "", ['{"id":"一"}'])
    await state.append_list(slot, "", ['{"id":"二"}'], expected_length=1)
    assert (await state.put_value(slot, "", "{}", expected_version=1, streamed=True)) == 2
    value = await state.get_value(slot, "", streamed=True)
    assert (value.found, value.json, value.version) == (True, "{}", 2)
    assert (await state.get_value(slot, " ")).json == '"空格"'
    assert (await state.get_list(slot, "")).items == ['{"id":"一"}', '{"id":"二"}']
    assert (await state.get_value(slot, "agent_state")).found is False
    # Listed (first: "" sorts first), and a keys page token after the empty key resumes.
    assert await state.keys(slot) == [("list", ""), ("value", ""), ("value", " ")]
    first = await state.keys_page(slot, page_size=1)
    second = await state.keys_page(slot, page_size=1, page_token=first.next_page_token)
    assert (first.keys, second.keys) == ([("list", "")], [("value", "")])
    assert await state.delete_key(slot, "")
    assert (await state.get_value(slot, "")).found is False
    assert await state.keys(slot) == [("list", ""), ("value", " ")]


async def test_concurrent_compare_and_set_loses_no_update(state) -> None:
    slot = Slot("", "counter")

    async def increment() -> None:
        while True:
            current = await state.get_value(slot, "n")
            n = json.loads(current.json)["n"] if current.found else 0
            try:
                await state.put_value(slot, "n", json.dumps({"n": n + 1}), expected_version=current.version)
                return
            except StateConflictError:
                continue

    await asyncio.gather(*(increment() for _ in range(20)))
    value = await state.get_value(slot, "n")
    assert (json.loads(value.json)["n"], value.version) == (20, 20)


async def test_sessions_are_listed_decoded_and_paged(state) -> None:
    ids = ["a", "b/c", "s 2/x", "会话", "cyAyL3g", "😀"]
    for session_id in ids:
        await state.put_value(Slot("用户", session_id), "agent_state", "{}")
    await state.put_value(Slot("other", "zzz"), "agent_state", "{}")
    listed = [s async for s in state.iter_session_ids("用户", page_size=2)]
    assert listed == sorted(ids)  # code point order, as given (never an encoding)
    first = await state.list_session_ids_page("用户", page_size=4)
    assert len(first.session_ids) == 4 and first.next_page_token
    assert await state.delete_session(Slot("用户", "b/c")) == 1
    assert "b/c" not in [s async for s in state.iter_session_ids("用户")]
    assert [s async for s in state.iter_session_ids("")] == []


async def test_list_pages_stay_under_the_byte_budget_and_notice_changes(state) -> None:
    slot = Slot("", "big")
    item = json.dumps("x" * (900 * 1024))  # ~0.9 MiB each: four per 4 MiB response at most
    await state.put_list(slot, "l", [item] * 6)
    page = await state.get_list_page(slot, "l")
    assert 1 <= len(page.items) <= 4 and page.length == 6 and page.next_page_token
    assert (await state.get_list(slot, "l")).items == [item] * 6
    small = await state.get_list_page(slot, "l", page_size=2)
    await state.append_list(slot, "l", ["1"], expected_length=6)
    with pytest.raises(StateConflictError):
        await state.get_list_page(slot, "l", page_size=2, page_token=small.next_page_token)
    with pytest.raises(InvalidArgumentError, match="page_token"):
        await state.get_list_page(slot, "other", page_token=small.next_page_token)


async def test_bad_input_names_the_field_and_changes_nothing(state) -> None:
    slot = Slot("u", "s")
    await state.put_value(slot, "k", '{"ok":true}')
    cases = [
        (Slot("u", ""), "k", "{}", "slot.session_id"),
        (Slot("u", "  "), "k", "{}", "slot.session_id"),
        (Slot("u\x00", "s"), "k", "{}", "slot.user_id"),
        (Slot("u", "s\n"), "k", "{}", "slot.session_id"),
        (Slot("u", "会" * 200), "k", "{}", "slot.session_id"),
        (slot, "k\x01", "{}", "key"),
        (slot, "键" * 86, "{}", "key"),
        (slot, "k", "{not json", "json"),
        (slot, "k", "", "json"),
        (slot, "k", "NaN", "json"),
        # The service's one JSON rule (README Limits), as for every other state entry: no
        # INTERNAL from a recursion, no lone surrogate, no number Java would turn into a string.
        (slot, "k", "[" * 5000, "json"),
        (slot, "k", '{"a":' + "[" * 300 + "]" * 300 + "}", "json"),
        (slot, "k", '{"a":"\\ud800"}', "json"),
        (slot, "k", '{"a":1e999}', "json"),
        (slot, "k", "1" * 1001, "json"),
    ]
    for bad_slot, key, text, field in cases:
        with pytest.raises(InvalidArgumentError) as error:
            await state.put_value(bad_slot, key, text)
        assert error.value.field == field, (bad_slot, key, text)
    with pytest.raises(InvalidArgumentError, match="expected_version"):
        await state.put_value(slot, "k", "{}", expected_version=-1)
    with pytest.raises(InvalidArgumentError, match=r"items\[1\]"):
        await state.put_list(slot, "l", ["1", "[", "3"])
    with pytest.raises(InvalidArgumentError, match=r"items\[1\]"):
        await state.append_list(slot, "l", ["1", "[" * 5000], expected_length=0)
    with pytest.raises(ResourceExhaustedError) as error:
        await state.put_value(slot, "k", json.dumps("x" * (4 * 1024 * 1024)), streamed=False)
    assert error.value.field == "json"
    # The same value in pieces is checked as a whole one is.
    with pytest.raises(InvalidArgumentError) as error:
        await state.put_value(slot, "k", "[" * 5000, streamed=True)
    assert error.value.field == "json"
    assert (await state.get_value(slot, "k")).json == '{"ok":true}'
    assert (await state.get_list(slot, "l")).found is False


async def test_list_limits(server_factory) -> None:
    server = await server_factory(max_state_list_items=3, max_state_list_bytes=100)
    async with AsyncAgentStateClient(server.address) as state:
        slot = Slot("", "s")
        with pytest.raises(ResourceExhaustedError, match="items"):
            await state.put_list(slot, "l", ["1"] * 4)
        await state.put_list(slot, "l", ["1"] * 3)
        with pytest.raises(ResourceExhaustedError, match="items"):
            await state.append_list(slot, "l", ["1"], expected_length=3)
        with pytest.raises(ResourceExhaustedError, match="bytes"):
            await state.put_list(slot, "m", [json.dumps("y" * 120)])
        assert (await state.get_list(slot, "l")).length == 3


async def test_tenants_are_isolated(server_factory) -> None:
    keys = {"key-for-alice-000001": "alice", "key-for-bob-00000001": "bob"}
    server = await server_factory(api_keys=keys)
    async with AsyncAgentStateClient(server.address, api_key="key-for-alice-000001") as alice, \
            AsyncAgentStateClient(server.address, api_key="key-for-bob-00000001") as bob:
        slot = Slot("u", "same")
        await alice.put_value(slot, "agent_state", '{"owner":"alice"}')
        assert (await bob.get_value(slot, "agent_state")).found is False
        assert await bob.session_exists(slot) is False
        assert [s async for s in bob.iter_session_ids("u")] == []
        assert await bob.delete_session(slot) == 0
        assert (await alice.get_value(slot, "agent_state")).json == '{"owner":"alice"}'
        # Streamed values (StreamPutValue / StreamGetValue) are the tenant's own too.
        large = '{"owner":"alice","context":"' + "长" * (2 * 1024 * 1024) + '"}'
        assert await alice.put_value(slot, "large", large, streamed=True) == 1
        assert (await bob.get_value(slot, "large", streamed=True)).found is False
        assert await bob.put_value(slot, "large", '{"owner":"bob"}', expected_version=0, streamed=True) == 1
        assert (await alice.get_value(slot, "large", streamed=True)).json == large
        assert (await bob.get_value(slot, "large", streamed=True)).json == '{"owner":"bob"}'


async def test_a_1x_memory_resumes_as_the_slots_memory_messages(server, state) -> None:
    async with AsyncMemoryClient(server.address) as memory:
        await memory.create_memory("chat-42")
        await memory.add_messages("chat-42", [Msg.create(MsgRole.USER, "我喜欢茶"), Msg.create(MsgRole.ASSISTANT, "好的")])
        await memory.create_memory("bobs-chat", labels={"user_id": "bob"})
        await memory.add_message("bobs-chat", Msg.create(MsgRole.USER, "hi"))
    slot = Slot("", "chat-42")
    assert await state.session_exists(slot) is True
    legacy = await state.get_list(slot, "memory_messages")
    texts = [json.loads(i)["content"][0]["text"] for i in legacy.items]
    assert (legacy.found, legacy.version, texts) == (True, 0, ["我喜欢茶", "好的"])
    assert json.loads(legacy.items[0])["role"] == "USER"
    # A memory labelled with another user is not this user's.
    assert (await state.get_list(Slot("alice", "bobs-chat"), "memory_messages")).found is False
    assert len((await state.get_list(Slot("bob", "bobs-chat"), "memory_messages")).items) == 1
    # The slot's own list, once written, is authoritative.
    await state.put_list(slot, "memory_messages", ['{"id":"new"}'])
    assert (await state.get_list(slot, "memory_messages")).items == ['{"id":"new"}']


async def test_a_deleted_slot_no_longer_resumes_its_1x_memory(server, state) -> None:
    async with AsyncMemoryClient(server.address) as memory:
        await memory.create_memory("forget-me")
        await memory.add_message("forget-me", Msg.create(MsgRole.USER, "我的密码是 1234"))
        await memory.create_memory("keep-list")
        await memory.add_message("keep-list", Msg.create(MsgRole.USER, "old"))
    slot = Slot("", "forget-me")
    await state.put_value(slot, "agent_state", '{"context":[]}')
    assert (await state.get_list(slot, "memory_messages")).found is True
    assert (await state.delete_session(slot)) == 1
    # Neither AgentScope's legacy loader nor exists() brings the deleted conversation back.
    assert await state.session_exists(slot) is False
    assert (await state.get_list(slot, "memory_messages")).found is False
    assert slot.session_id not in [s async for s in state.iter_session_ids("")]
    # The slot lives on as a new one; the 1.x memory itself is untouched.
    await state.put_value(slot, "agent_state", '{"context":[]}')
    assert await state.keys(slot) == [("value", "agent_state")]
    assert (await state.delete_session(slot)) == 1
    async with AsyncMemoryClient(server.address) as memory:
        assert len(await memory.get_messages("forget-me")) == 1
    # Deleting just the list detaches it as well.
    other = Slot("", "keep-list")
    assert (await state.delete_key(other, "memory_messages", list_=True)) is True
    assert (await state.get_list(other, "memory_messages")).found is False


def test_local_mode_has_the_same_methods(tmp_path) -> None:
    with local_agent_state_client(ServiceSettings(data_dir=tmp_path, long_term_enabled=False)) as state:
        slot = Slot("", "本地")
        assert state.put_value(slot, "agent_state", STATE, expected_version=0) == 1
        assert state.get_value(slot, "agent_state").json == STATE
        with pytest.raises(StateConflictError):
            state.put_value(slot, "agent_state", "{}", expected_version=0)
        state.put_list(slot, "l", ["1"])
        assert state.append_list(slot, "l", ["2"], 1).length == 2
        assert state.get_list(slot, "l").items == ["1", "2"]
        assert list(state.iter_session_ids("")) == ["本地"]
        first = state.keys_page(slot, page_size=1)
        assert first.keys == [("value", "agent_state")]
        assert state.keys_page(slot, 1, first.next_page_token).keys == [("list", "l")]


async def test_keys_are_listed_by_key_list_before_value_and_paged(state) -> None:
    slot = Slot("", "keys")
    await state.put_list(slot, "memory_messages", [])
    await state.put_value(slot, "agent_state", "{}")
    await state.put_list(slot, "agent_state", ["1"])
    await state.put_value(slot, "键", "1")
    assert await state.keys(slot) == [("list", "agent_state"), ("value", "agent_state"), ("list", "memory_messages"), ("value", "键")]
    first = await state.keys_page(slot, page_size=3)
    rest = await state.keys_page(slot, page_size=3, page_token=first.next_page_token)
    assert first.keys + rest.keys == await state.keys(slot) and rest.next_page_token == ""


async def test_page_tokens_are_signed_and_bound_to_tenant_slot_and_key(server_factory) -> None:
    """Tokens used to be base64 JSON: a forged offset (10**30) or a forged last key holding a
    lone surrogate reached the store and answered INTERNAL, and a token moved to another tenant's
    slot of the same name was accepted. Now each is `page_token: invalid or expired`."""
    import base64

    keys = {"key-for-alice-000001": "alice", "key-for-bob-00000001": "bob"}
    server = await server_factory(api_keys=keys)
    async with AsyncAgentStateClient(server.address, api_key="key-for-alice-000001") as alice, \
            AsyncAgentStateClient(server.address, api_key="key-for-bob-00000001") as bob:
        slot = Slot("u", "s")
        for client in (alice, bob):
            await client.put_list(slot, "l", ["1", "2", "3"])
            await client.put_value(slot, "a", "1")
            await client.put_value(Slot("u", "s2"), "a", "1")
        list_token = (await alice.get_list_page(slot, "l", page_size=1)).next_page_token
        keys_token = (await alice.keys_page(slot, page_size=1)).next_page_token
        ids_token = (await alice.list_session_ids_page("u", page_size=1)).next_page_token
        assert list_token and keys_token and ids_token
        # Each follows on in its own tenant, slot and key.
        assert (await alice.get_list_page(slot, "l", page_size=1, page_token=list_token)).items == ["2"]
        assert (await alice.keys_page(slot, page_size=1, page_token=keys_token)).keys
        assert (await alice.list_session_ids_page("u", page_size=1, page_token=ids_token)).session_ids == ["s2"]

        def forged(text: str) -> str:
            return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

        refused = [
            (bob.get_list_page(slot, "l", page_size=1, page_token=list_token)),
            (alice.get_list_page(Slot("u", "s2"), "l", page_size=1, page_token=list_token)),
            (alice.get_list_page(slot, "a", page_size=1, page_token=list_token)),
            (alice.keys_page(slot, page_size=1, page_token=list_token)),
            (bob.keys_page(slot, page_size=1, page_token=keys_token)),
            (bob.list_session_ids_page("u", page_size=1, page_token=ids_token)),
            (alice.list_session_ids_page("v", page_size=1, page_token=ids_token)),
            (alice.get_list_page(slot, "l", page_size=1, page_token=forged('{"o": 1000000000000000000000000000000, "v": 1}'))),
            (alice.get_list_page(slot, "l", page_size=1, page_token=forged("[" * 100000))),
            (alice.keys_page(slot, page_size=1, page_token=forged('{"k": "list", "a": "\\ud800"}'))),
            (alice.list_session_ids_page("u", page_size=1, page_token=forged('{"u": "u", "a": "\\udc00"}'))),
            (alice.list_session_ids_page("u", page_size=1, page_token="%%%")),
        ]
        for call in refused:
            with pytest.raises(InvalidArgumentError, match="invalid or expired") as error:
                await call
            assert error.value.field == "page_token"


async def test_a_deleted_1x_memory_takes_its_detachments_and_one_made_anew_resumes(server, state) -> None:
    # A slot deleted while it resumed a 1.x memory leaves a marker so the memory does not bring
    # it back. Once that memory is deleted too, the marker goes with it (one row per deleted
    # session otherwise, for ever), and a new 1.x conversation under the same id resumes.
    async with AsyncMemoryClient(server.address) as memory:
        await memory.create_memory("会话-旧")
        await memory.add_message("会话-旧", Msg.create(MsgRole.USER, "旧的对话"))
        await memory.create_memory("other")
        await memory.add_message("other", Msg.create(MsgRole.USER, "stays detached"))
    for slot in (Slot("", "会话-旧"), Slot("张三", "会话-旧"), Slot("", "other")):
        assert (await state.get_list(slot, "memory_messages")).found is True
        assert await state.delete_session(slot) == 0
        assert (await state.get_list(slot, "memory_messages")).found is False
    assert await _detached_rows(server) == {("", "会话-旧"), ("张三", "会话-旧"), ("", "other")}

    async with AsyncMemoryClient(server.address) as memory:
        await memory.delete_memory("会话-旧")
        assert await _detached_rows(server) == {("", "other")}
        await memory.create_memory("会话-旧")
        await memory.add_message("会话-旧", Msg.create(MsgRole.USER, "新的对话"))
    for slot in (Slot("", "会话-旧"), Slot("张三", "会话-旧")):
        resumed = await state.get_list(slot, "memory_messages")
        assert [json.loads(i)["content"][0]["text"] for i in resumed.items] == ["新的对话"]
        assert await state.session_exists(slot) is True
    # The other memory's slot is still detached from it.
    assert (await state.get_list(Slot("", "other"), "memory_messages")).found is False


async def _detached_rows(server) -> set[tuple[str, str]]:
    """The detached markers stored (bookkeeping no RPC shows), read through the server's store."""
    def read(tx) -> list[tuple[str, str]]:
        return tx._all("SELECT user_id, session_id FROM {agent_states} WHERE tenant = ? AND kind = 'detached'",
                       (DEFAULT_TENANT,))

    return {(r[0], r[1]) for r in await server.service.store.run(DEFAULT_TENANT, read, write=False)}
