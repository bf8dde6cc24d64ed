"""The Python clients of AUTO_CONTEXT memories (`client/auto_context.py`): asyncio, blocking and
local mode on one scenario (a tool conversation that compresses, read back across small pages,
an offloaded Chinese text reloaded), their typed errors, the restart of a read the memory
changed under, and which calls are retried. Real servers, real gRPC; the LLM is the scripted one."""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentscope_memory.client import AsyncAutoContextClient, AsyncMemoryClient, AutoContextClient
from agentscope_memory.errors import (
    AbortedError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from agentscope_memory.message import Msg, MsgRole, TextBlock, ToolResultBlock
from agentscope_memory.service import ServiceSettings
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import PlanNote, PlanSubtask
from auto_context_helpers import A, TR, TU, U
from conftest import ServerThread, free_port, make_settings
from scripted_llm import ScriptedLLM, ScriptedReply

CONFIG = AutoContextConfig(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3,
                           min_compression_token_threshold=0)
CHINESE = "部署窗口是周二上午十点，回滚负责人是李雷"
SUMMARY = "摘要：五次查询都确认了部署窗口"
PLAN = PlanNote("上线新版本", "零停机", [PlanSubtask("部署", "in_progress"), PlanSubtask("验证")])
UUID = re.compile(r"CONTEXT_OFFLOAD: uuid=([0-9a-f-]{36})")


def conversation() -> list[Msg]:
    msgs = [U("帮我检查部署计划")]
    for i in range(5):
        msgs += [TU("查询工具", f"call_{i}", {"问题": f"第{i}项"}), TR("查询工具", f"call_{i}", f"结果{i}：{CHINESE}")]
    return msgs + [A("检查完毕")] + [U(f"消息 {i}") for i in range(10)]


async def ask(value: Any) -> Any:
    """An asyncio client's answer awaited, a blocking one's as it is."""
    return await value if inspect.isawaitable(value) else value


async def collect(items: Any) -> list[Any]:
    return [item async for item in items] if hasattr(items, "__aiter__") else list(items)


def tool_output(msg: Msg) -> str:
    return "".join(b.text for block in msg.content if isinstance(block, ToolResultBlock)
                   for b in block.output if isinstance(b, TextBlock))


async def scenario(client: Any, msgs: list[Msg]) -> dict[str, Any]:
    """The whole client surface on one memory; what it saw, with generated ids taken out."""
    made = await ask(client.create_memory("代理-一", CONFIG, labels={"用途": "测试"}))
    assert (made.kind, made.auto_context_config, made.labels) == ("AUTO_CONTEXT", CONFIG, {"用途": "测试"})
    assert await ask(client.add_messages("代理-一", msgs)) == 22
    await ask(client.attach_plan_note("代理-一", PLAN))

    # The first page compresses; 14 messages in pages of 3 come back whole.
    prepared = await ask(client.prepare_reasoning_input("代理-一", "你是运维助手。", page_size=3))
    assert prepared.compressed
    assert [(s, e.event_type, e.compressed_message_count) for s, e in prepared.events] == [
        (1, "TOOL_INVOCATION_COMPRESS", 10)]
    assert prepared.system.role is MsgRole.SYSTEM
    assert prepared.system.text_content.startswith("你是运维助手。\n\n") and "context_reload" in prepared.system.text_content
    working = await ask(client.get_messages("代理-一"))
    assert prepared.working == working and len(working) == 13
    assert working[0] == msgs[0] and working[2:] == msgs[11:]
    assert working[1].text_content.startswith(SUMMARY)

    # The offloaded tool run comes back whole, Chinese included, across pages of 3.
    uuid = UUID.search(working[1].text_content).group(1)  # type: ignore[union-attr]
    reloaded = await ask(client.reload_context("代理-一", uuid, page_size=3))
    assert reloaded.found and reloaded.messages == msgs[1:11]
    assert tool_output(reloaded.messages[1]) == f"结果0：{CHINESE}"
    blank = await ask(client.reload_context("代理-一", "  "))
    assert not blank.found and [m.text_content for m in blank.messages] == ["Error: UUID cannot be null or empty."]
    missing = await ask(client.reload_context("代理-一", "不存在"))
    assert not missing.found and missing.messages[0].text_content.startswith("No messages found for UUID: 不存在")

    events = await ask(client.get_events("代理-一"))
    assert events == prepared.events
    assert await collect(client.iter_events("代理-一", page_size=1)) == events
    assert await ask(client.get_events("代理-一", after_sequence=1)) == []
    assert await ask(client.get_original_messages("代理-一")) == msgs
    assert await collect(client.iter_original_messages("代理-一", page_size=5)) == msgs
    interaction = await ask(client.get_interaction_messages("代理-一"))
    assert [m.text_content for m in interaction] == ["帮我检查部署计划", "检查完毕", *(f"消息 {i}" for i in range(10))]
    assert await collect(client.iter_interaction_messages("代理-一", page_size=4)) == interaction

    outcome = await ask(client.compress_if_needed("代理-一"))
    after = await ask(client.get_events("代理-一"))
    assert after[:1] == events and after[1:] == outcome.events
    assert outcome.message_count == len(await ask(client.get_messages("代理-一")))
    return {
        "system": prepared.system.text_content,
        "working": [UUID.sub("uuid", m.text_content) for m in prepared.working],
        "events": [(s, e.event_type, e.compressed_message_count, e.previous_message_id, e.next_message_id)
                   for s, e in after],
        "outcome": (outcome.compressed, outcome.tokens_before, outcome.tokens_after, outcome.message_count),
    }


@pytest.fixture
def llm():
    stub = ScriptedLLM(default=ScriptedReply.text(SUMMARY))
    yield stub
    stub.close()


async def test_every_client_gives_the_same_answers(server_factory, llm, tmp_path: Path) -> None:
    msgs = conversation()
    server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0)
    async with AsyncAutoContextClient(server.address, timeout=20) as remote:
        expected = await scenario(remote, msgs)
    assert expected["events"][0][3:] == (msgs[0].id, msgs[11].id)
    # The plan note reached the summariser's prompt.
    assert "Goal: 上线新版本" in llm.requests[0].body["messages"][-1]["content"]

    settings = ServiceSettings(data_dir=tmp_path / "local", llm_base_url=llm.base_url, llm_max_retries=0,
                               long_term_enabled=False)
    async with AsyncAutoContextClient.local(settings) as local:
        assert await scenario(local, msgs) == expected

    threaded = ServerThread(make_settings(tmp_path / "threaded", llm_base_url=llm.base_url, llm_max_retries=0))
    try:
        with AutoContextClient(threaded.address, timeout=20) as blocking:
            assert await scenario(blocking, msgs) == expected
    finally:
        threaded.stop()

    with AutoContextClient.local(settings.model_copy(update={"data_dir": tmp_path / "blocking-local"})) as local:
        assert await scenario(local, msgs) == expected
    assert all("Goal: 上线新版本" in r.body["messages"][-1]["content"] for r in llm.requests)


def errors_client(kind: str, address: str, tmp_path: Path) -> Any:
    if kind == "remote":
        return AsyncAutoContextClient(address, timeout=10)
    return AsyncAutoContextClient.local(ServiceSettings(data_dir=tmp_path / "local", long_term_enabled=False))


@pytest.mark.parametrize("kind", ["remote", "local"])
async def test_errors_are_the_librarys_naming_the_field(server, tmp_path: Path, kind: str) -> None:
    async with errors_client(kind, server.address, tmp_path) as client:
        await client.create_memory("上下文", CONFIG)
        plain = AsyncMemoryClient(server.address) if kind == "remote" else AsyncMemoryClient.local(client._handle._service)
        async with plain:
            await plain.create_memory("普通")
            await plain.add_messages("普通", [U("你好")])
        calls = {
            "compress_if_needed": lambda m: client.compress_if_needed(m),
            "prepare_reasoning_input": lambda m: client.prepare_reasoning_input(m),
            "get_original_messages": lambda m: client.get_original_messages(m),
            "get_interaction_messages": lambda m: client.get_interaction_messages(m),
            "reload_context": lambda m: client.reload_context(m, "abc"),
            "get_events": lambda m: client.get_events(m),
            "attach_plan_note": lambda m: client.attach_plan_note(m, PLAN),
        }
        for name, call in calls.items():
            with pytest.raises(FailedPreconditionError, match="not AUTO_CONTEXT"):
                await call("普通")
            with pytest.raises(NotFoundError, match="没有"):
                await call("没有")
            with pytest.raises(InvalidArgumentError) as bad:
                await call("")
            assert bad.value.field == "memory_id", name
        with pytest.raises(FailedPreconditionError, match="not AUTO_CONTEXT"):
            await collect(client.watch_events("普通"))

        for uuid in ("长" * 100, "a\x00b", "a\ud800b"):
            with pytest.raises(InvalidArgumentError) as bad:
                await client.reload_context("上下文", uuid)
            assert bad.value.field == "working_context_offload_uuid", repr(uuid)
        with pytest.raises(InvalidArgumentError) as bad:
            await client.create_memory("新的", profile="fastest")
        assert bad.value.field == "auto_context_config.profile"
        with pytest.raises(InvalidArgumentError) as bad:
            await client.create_memory("新的", token_counter="cl100k")  # parity counts as Java does
        assert bad.value.field == "auto_context_config.token_counter"
        with pytest.raises(InvalidArgumentError) as bad:
            await client.prepare_reasoning_input("上下文", system_message=U("不是系统消息"))
        assert bad.value.field == "system_message.role"
        system = Msg.create(MsgRole.SYSTEM, "系统")
        with pytest.raises(InvalidArgumentError) as bad:
            await client.prepare_reasoning_input("上下文", "提示", system_message=system)
        assert bad.value.field == "system_message"
        with pytest.raises(InvalidArgumentError) as bad:
            await client.prepare_reasoning_input("上下文", page_size=-1)
        assert bad.value.field == "page_size"
        with pytest.raises(InvalidArgumentError) as bad:
            await client.get_events("上下文", after_sequence=-1)
        assert bad.value.field == "after_sequence"
        # The agent's own system message keeps its name, with the offload instruction appended.
        own = await client.prepare_reasoning_input("上下文", system_message=Msg.create(MsgRole.SYSTEM, "系统", name="助手"))
        assert own.system.name == "助手" and own.system.text_content.startswith("系统\n\n")
        assert not own.compressed and own.events == [] and own.working == []


class AddsOnce:
    """The real stub's method, adding a message through another client right after its first
    page: the memory changes between two pages of one read, as another agent's add would."""

    def __init__(self, method: Any, add: Any) -> None:
        self.method, self.add, self.pages = method, add, 0

    async def __call__(self, request: Any, **kwargs: Any) -> Any:
        response = await self.method(request, **kwargs)
        self.pages += 1
        if self.pages == 1:
            await self.add()
        return response


async def test_reads_start_again_when_the_memory_changes_between_pages(server_factory) -> None:
    # Pages of a few messages, by count (prepare_reasoning_input's page_size) or by bytes.
    server = await server_factory(max_page_bytes=2_000)
    msgs = [U(f"第{i}条" + "长" * 300) for i in range(6)]
    late = U("另一个代理刚加的")
    async with AsyncAutoContextClient(server.address, timeout=10) as client, \
            AsyncAutoContextClient(server.address, timeout=10) as other:
        await client.create_memory("改动", AutoContextConfig(msg_threshold=100))
        await client.add_messages("改动", msgs)
        stub = client._stub
        stub.PrepareReasoningInput = AddsOnce(stub.PrepareReasoningInput, lambda: other.add_messages("改动", [late]))
        prepared = await client.prepare_reasoning_input("改动", page_size=2)
        assert prepared.working == [*msgs, late] and stub.PrepareReasoningInput.pages > 4
        stub.GetOriginalMessages = AddsOnce(stub.GetOriginalMessages, lambda: other.add_messages("改动", [late]))
        assert await client.get_original_messages("改动") == [*msgs, late, late]

        # A memory that changes at every page is given up on, with the library's error.
        async def add() -> None:
            await other.add_messages("改动", [late])

        class AddsAlways(AddsOnce):
            async def __call__(self, request: Any, **kwargs: Any) -> Any:
                response = await self.method(request, **kwargs)
                await self.add()
                return response

        stub.PrepareReasoningInput = AddsAlways(stub.PrepareReasoningInput.method, add)
        with pytest.raises(AbortedError):
            await client.prepare_reasoning_input("改动", page_size=2)


def test_blocking_reads_start_again_too(tmp_path: Path) -> None:
    server = ServerThread(make_settings(tmp_path / "data", max_page_bytes=2_000))
    msgs = [U(f"第{i}条" + "长" * 300) for i in range(6)]
    late = U("另一个代理刚加的")
    try:
        with AutoContextClient(server.address, timeout=10) as client, \
                AutoContextClient(server.address, timeout=10) as other:
            client.create_memory("改动", AutoContextConfig(msg_threshold=100))
            client.add_messages("改动", msgs)
            stub = client._stub
            for name in ("PrepareReasoningInput", "GetInteractionMessages"):
                method, pages = getattr(stub, name), []

                def once(request: Any, _method: Any = method, _pages: list[int] = pages, **kwargs: Any) -> Any:
                    response = _method(request, **kwargs)
                    _pages.append(1)
                    if len(_pages) == 1:
                        other.add_messages("改动", [late])
                    return response

                setattr(stub, name, once)
            assert client.prepare_reasoning_input("改动", page_size=2).working == [*msgs, late]
            assert client.get_interaction_messages("改动") == [*msgs, late, late]
    finally:
        server.stop()


async def test_compressions_are_not_retried_reads_are(server_factory, tmp_path: Path) -> None:
    port = free_port()
    async with AsyncAutoContextClient(f"127.0.0.1:{port}", timeout=5) as client:
        async def start_later():
            await asyncio.sleep(0.5)
            return await server_factory(port=port, data_dir=tmp_path / "data")

        starting = asyncio.create_task(start_later())
        await client.create_memory("上下文", allow_existing=True)  # retried until the server is up
        server = await starting
        await client.attach_plan_note("上下文", PLAN)
        assert await client.get_events("上下文") == []

        # A compression is not retried (it may have run), but it waits for a server that cannot be
        # reached yet, restarting, and is sent once it can be: the restart is ridden out.
        await server.stop(0)
        for call in (lambda: client.compress_if_needed("上下文"), lambda: client.prepare_reasoning_input("上下文")):
            starting = asyncio.create_task(start_later())
            answer = await call()
            assert answer.events == [], answer
            await (await starting).stop(0)
        # Nothing listening for the whole deadline: the deadline's error, after it.
        began = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            await client.compress_if_needed("上下文")
        assert time.monotonic() - began > 4


def test_blocking_compressions_ride_out_a_restart_too(tmp_path: Path) -> None:
    port = free_port()
    server = ServerThread(make_settings(tmp_path / "data", port=port))
    try:
        with AutoContextClient(f"127.0.0.1:{port}", timeout=10) as client:
            client.create_memory("上下文")
            server.stop()
            restarted: list[ServerThread] = []
            later = threading.Timer(0.5, lambda: restarted.append(
                ServerThread(make_settings(tmp_path / "data", port=port))))
            later.start()
            assert not client.compress_if_needed("上下文").compressed
            later.join()
            server = restarted[0]
            assert client.prepare_reasoning_input("上下文", "你是助手。").system.text_content.startswith("你是助手。")
    finally:
        server.stop()


async def test_watch_sees_a_compression_made_by_another_client(server_factory, llm) -> None:
    server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0)
    async with AsyncAutoContextClient(server.address, timeout=10) as client, \
            AsyncAutoContextClient(server.address, timeout=10) as other:
        await client.create_memory("观察", CONFIG, profile="improved")
        watch = client.watch_events("观察")
        first = asyncio.ensure_future(watch.__anext__())
        await other.add_messages("观察", conversation())
        outcome = await other.compress_if_needed("观察")
        assert outcome.compressed and outcome.events
        assert await asyncio.wait_for(first, 10) == outcome.events[0]
        await watch.aclose()


async def test_a_closed_client_refuses_its_message_calls_too(server) -> None:
    client = AsyncAutoContextClient(server.address, timeout=10)
    await client.create_memory("关闭")
    assert await client.add_messages("关闭", [U("你好")]) == 1
    await client.close()
    for call in (lambda: client.get_messages("关闭"), lambda: client.add_messages("关闭", [U("再见")]),
                 lambda: client.prepare_reasoning_input("关闭")):
        with pytest.raises(FailedPreconditionError, match="client is closed"):
            await call()  # the message calls' inner client is on this client's channel


async def test_a_blocking_client_inside_the_servers_event_loop_says_why_it_timed_out(server) -> None:
    """The blocking client, called from a coroutine of the loop the server runs in, blocks that
    loop: the server cannot answer. The deadline's error says so, and what to use instead."""
    with AutoContextClient(server.address, timeout=1) as client:
        began = time.monotonic()
        with pytest.raises(DeadlineExceededError, match="inside a running asyncio event loop.*use the asyncio client"):
            client.create_memory("阻塞的循环")
        assert time.monotonic() - began < 5
    async with AsyncAutoContextClient(server.address, timeout=10) as client:
        await client.create_memory("阻塞的循环", allow_existing=True)  # the server was fine all along
