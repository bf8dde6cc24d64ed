"""DeleteMessages and UpdateMessageMarks (AgentScope-Python's delete, delete_by_mark and
update_messages_mark on the server): the same answers and stored results from the blocking,
asyncio and local clients; the marks edited where the AgentScope-Python adapter keeps them, the
rest of each message untouched; unknown ids refused unless allowed; and a copy read before a
mark change is never brought up to date by a delta that would leave its marks stale."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from agentscope_memory.client import AsyncMemoryClient, MemoryClient
from agentscope_memory.errors import NotFoundError
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolUseBlock
from agentscope_memory.service import ServiceSettings

KEY = "agentscope_python"


def _conversation() -> list[Msg]:
    def python(i: int, text: str, marks: list[str]) -> Msg:
        return Msg.create(MsgRole.USER, text, id=f"消息-{i}", metadata={
            KEY: {"msg": {"id": f"消息-{i}", "name": "用户", "content": text, "role": "user"}, "marks": marks},
            "来源": "测试"})

    # A message another client wrote (a Java agent's tool call): no AgentScope-Python JSON.
    java = Msg.create(MsgRole.ASSISTANT, content=[TextBlock("查一下"), ToolUseBlock(id="call-1", name="search",
                                                                                    input={"q": "杭州"})], id="消息-4")
    return [python(0, "你好", []), python(1, "第二条", ["旧"]), python(2, "第三条", ["旧", "临时"]),
            python(3, "第四条", []), java, python(5, "第六条", ["临时"])]


def _view(msgs: list[Msg]) -> list[Any]:
    return [(m.id, m.metadata.get(KEY, {}).get("marks"), m.metadata.get(KEY, {}).get("msg", {}).get("content"),
             m.metadata.get("来源"), [type(b).__name__ for b in m.content]) for m in msgs]


async def _scenario(call: Callable[..., Any]) -> list[Any]:
    """The same calls through any client; `call(name, *args, **kwargs)` runs one and returns
    its answer (awaiting it for the asyncio clients)."""
    memory_id = "标记-对话"
    await call("create_memory", memory_id)
    await call("add_messages", memory_id, _conversation())
    out: list[Any] = []

    async def step(name: str, *args: Any, **kwargs: Any) -> None:
        try:
            answer = await call(name, memory_id, *args, **kwargs)
        except NotFoundError as exc:
            out.append(("NotFoundError", str(exc)))
        else:
            out.append({k: v for k, v in vars(answer).items() if "etag" not in k})
        out.append(_view(await call("get_messages", memory_id)))

    await step("update_message_marks", "已读", message_ids=["消息-1", "消息-4", "消息-1"])
    await step("update_message_marks", "重要", old_mark="已读")  # every message
    await step("update_message_marks", "临时", old_mark="旧", message_ids=["消息-2", "没有这条"], allow_missing=True)
    await step("update_message_marks", None, old_mark="临时", message_ids=["没有这条"])
    await step("delete_messages", marks=["重要", "没有的标记"])
    await step("delete_messages", ["消息-0", "没有这条"], allow_missing=True)
    await step("delete_messages", ["消息-3", "没有这条"])
    return out


async def test_the_blocking_asyncio_and_local_clients_delete_and_mark_alike(server, threaded_server,
                                                                            tmp_path: Path) -> None:
    async with AsyncMemoryClient(server.address, timeout=10) as aio:
        async def on_aio(name: str, *args: Any, **kwargs: Any) -> Any:
            return await getattr(aio, name)(*args, **kwargs)
        remote = await _scenario(on_aio)
    with MemoryClient(threaded_server.address, timeout=10) as blocking:
        async def on_blocking(name: str, *args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(getattr(blocking, name), *args, **kwargs)
        in_thread = await _scenario(on_blocking)
    async with AsyncMemoryClient.local(ServiceSettings(data_dir=tmp_path / "local")) as local:
        async def on_local(name: str, *args: Any, **kwargs: Any) -> Any:
            return await getattr(local, name)(*args, **kwargs)
        in_process = await _scenario(on_local)
    assert remote == in_thread == in_process

    marked, all_marked, replaced, unknown, by_mark, by_ids, refused = remote[0::2]
    after_marked, after_all, after_replaced, after_unknown, after_by_mark, after_by_ids, after_refused = remote[1::2]
    # A mark on the other client's message is written beside its blocks, which stay whole.
    assert marked == {"updated_count": 2, "changed_count": 2, "message_count": 6}
    assert after_marked[1][1] == ["旧", "已读"] and after_marked[4] == ("消息-4", ["已读"], None, None,
                                                                       ["TextBlock", "ToolUseBlock"])
    assert all_marked["updated_count"] == 2 and after_all[1][1] == ["旧", "重要"]
    # AgentScope's count: 消息-2 had 临时 already, so 旧 goes and nothing is counted.
    assert replaced == {"updated_count": 0, "changed_count": 1, "message_count": 6}
    assert after_replaced[2] == ("消息-2", ["临时"], "第三条", "测试", ["TextBlock"])
    assert unknown[0] == "NotFoundError" and "message_ids[0]" in unknown[1] and after_unknown == after_replaced
    assert by_mark == {"deleted_count": 2, "deleted_ids": ["消息-1", "消息-4"], "message_count": 4}
    assert [v[0] for v in after_by_mark] == ["消息-0", "消息-2", "消息-3", "消息-5"]
    assert by_ids == {"deleted_count": 1, "deleted_ids": ["消息-0"], "message_count": 3}
    # Without allow_missing an unknown id deletes nothing, not even the known ones.
    assert refused[0] == "NotFoundError" and "message_ids[1]" in refused[1] and "没有这条" in refused[1]
    assert after_refused == after_by_ids == [
        ("消息-2", ["临时"], "第三条", "测试", ["TextBlock"]), ("消息-3", [], "第四条", "测试", ["TextBlock"]),
        ("消息-5", ["临时"], "第六条", "测试", ["TextBlock"])]


async def test_a_copy_read_before_a_mark_change_is_read_again_not_extended(aclient: AsyncMemoryClient) -> None:
    """A mark change edits stored messages in place: a copy read before it, then extended with
    what was added since (a delta), would keep the old marks. The read after it sends the whole
    list, with the new marks; a copy read after it is extended again."""
    await aclient.create_memory("增量")
    await aclient.add_messages("增量", _conversation())
    before = await aclient.read_messages("增量")
    await aclient.update_message_marks("增量", "已读", message_ids=["消息-0"])
    await aclient.add_messages("增量", [Msg.create(MsgRole.USER, "后来的", id="消息-6")])
    read = await aclient.read_messages("增量", if_none_match=before.etag, accept_delta=True)
    assert not read.delta and len(read.messages) == 7
    assert read.messages[0].metadata[KEY]["marks"] == ["已读"]
    # After the change, additions are deltas again.
    await aclient.add_messages("增量", [Msg.create(MsgRole.USER, "再后来的", id="消息-7")])
    again = await aclient.read_messages("增量", if_none_match=read.etag, accept_delta=True)
    assert again.delta and [m.id for m in again.messages] == ["消息-7"]


async def test_postgres_deletes_and_marks_as_sqlite_does(server, server_factory, postgres_dsn) -> None:
    """The same calls against a PostgreSQL store (items edited in place with its own columns)."""
    answers = []
    for running in (server, await server_factory(store="postgres", postgres_dsn=postgres_dsn)):
        async with AsyncMemoryClient(running.address, timeout=10) as client:
            async def call(name: str, *args: Any, _client: AsyncMemoryClient = client, **kwargs: Any) -> Any:
                return await getattr(_client, name)(*args, **kwargs)
            answers.append(await _scenario(call))
    assert answers[0] == answers[1]
