"""`agentscope-memory mcp` over stdio with the `mcp` SDK's stdio client: an embedded store, and
forwarding to a running server (`--target`, update and history included) as the API key's tenant."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import data, error_text

from agentscope_memory.client import AsyncMemoryClient

EXE = str(Path(sys.executable).with_name("agentscope-memory"))
KEY_A = "key-of-tenant-a-0123456789"
KEY_B = "key-of-tenant-b-0123456789"


@contextlib.asynccontextmanager
async def stdio_session(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=EXE, args=["mcp", *args],
                                   env={**os.environ, "MEM0_TELEMETRY": "False", **(env or {})})
    # The server's stderr (its logs) is not part of the test; stdio_client needs a real file.
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def test_embedded_store_keeps_memories_across_processes(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    async with stdio_session("--data-dir", data_dir, "--user-id", "xiaoming") as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        # The user is fixed: the model is not even asked for it.
        assert "user_id" not in tools["add_long_term_memory"].inputSchema["properties"]
        added = data(await s.call_tool("add_long_term_memory", {"texts": ["小明每天早上喝乌龙茶"]}))
        assert added["stored"][0]["scope"] == {"user_id": "xiaoming"}
        data(await s.call_tool("append_working_memory", {"working_memory_id": "chat-1", "messages": [
            {"role": "user", "text": "你好"}]}))
        wrong = error_text(await s.call_tool("search_long_term_memory", {"query": "茶", "user_id": "xiaohong"}))
        assert "user_id" in wrong and "fixed" in wrong
    async with stdio_session("--data-dir", data_dir, "--user-id", "xiaoming") as s:
        found = data(await s.call_tool("search_long_term_memory", {"query": "早上喝什么茶"}))
        assert found["results"][0]["text"] == "小明每天早上喝乌龙茶"
        page = data(await s.call_tool("read_working_memory", {"working_memory_id": "chat-1"}))
        assert [m["text"] for m in page["messages"]] == ["你好"]


async def test_target_forwards_to_the_server_as_the_keys_tenant(server_factory) -> None:
    server = await server_factory(api_keys={KEY_A: "tenant-a", KEY_B: "tenant-b"})
    async with stdio_session("--target", server.address, env={"AGENTSCOPE_MEMORY_API_KEY": KEY_A}) as s:
        added = data(await s.call_tool("add_long_term_memory", {"texts": ["Bob 的生日是三月十二日"], "user_id": "bob"}))
        memory_id = added["stored"][0]["id"]
        found = data(await s.call_tool("search_long_term_memory", {"query": "生日", "user_id": "bob"}))
        assert found["results"][0]["id"] == memory_id
        assert data(await s.call_tool("get_long_term_memory", {"memory_id": memory_id}))["memory"]["text"] == "Bob 的生日是三月十二日"
        data(await s.call_tool("append_working_memory", {"working_memory_id": "chat-9", "messages": [
            {"role": "user", "text": "记住我的生日"}, {"role": "assistant", "text": "好的"}]}))
        page = data(await s.call_tool("read_working_memory", {"working_memory_id": "chat-9", "page_size": 1}))
        assert page["total_size"] == 2 and page["next_page_token"]
        updated = data(await s.call_tool("update_long_term_memory", {"memory_id": memory_id, "text": "Bob 的生日是三月十三日"}))
        assert updated["memory"]["text"] == "Bob 的生日是三月十三日"
        history = data(await s.call_tool("get_long_term_memory_history", {"memory_id": memory_id}))
        assert [(h["event"], h["new_text"]) for h in history["history"] if h["event"] != "ASSESS"] == [
            ("ADD", "Bob 的生日是三月十二日"), ("UPDATE", "Bob 的生日是三月十三日")]
        first = data(await s.call_tool("get_long_term_memory_history", {"memory_id": memory_id, "page_size": 1}))
        assert first["history"] == history["history"][:1] and first["next_page_token"]
        second = data(await s.call_tool("get_long_term_memory_history", {
            "memory_id": memory_id, "page_size": 1, "page_token": first["next_page_token"]}))
        assert second["history"] == history["history"][1:2]
        # `pinned` goes through --target both ways (Record and UpdateLongTermMemory).
        pinned = data(await s.call_tool("add_long_term_memory", {"texts": ["Bob 对海鲜过敏"], "user_id": "bob",
                                                                 "pinned": True}))["stored"][0]
        assert pinned["pinned"] is True
        assert data(await s.call_tool("update_long_term_memory", {"memory_id": pinned["id"], "pinned": False}))[
            "memory"]["pinned"] is False
    # Tenant A's gRPC clients see what the MCP session wrote; tenant B's do not.
    async with AsyncMemoryClient(server.address, api_key=KEY_A) as a, AsyncMemoryClient(server.address, api_key=KEY_B) as b:
        assert [m.text_content for m in await a.get_messages("chat-9")] == ["记住我的生日", "好的"]
        assert [m.memory_id async for m in b.list_memories()] == []
    async with stdio_session("--target", server.address, "--api-key", KEY_B) as s:
        other = error_text(await s.call_tool("get_long_term_memory", {"memory_id": memory_id}))
        assert other.startswith("Not found:")
        assert error_text(await s.call_tool("read_working_memory", {"working_memory_id": "chat-9"})).startswith("Not found:")
    async with stdio_session("--target", server.address, "--api-key", "not-a-key-0123456789") as s:
        refused = error_text(await s.call_tool("search_long_term_memory", {"query": "生日", "user_id": "bob"}))
        assert refused.startswith("Not authenticated:") and "API key" in refused
        # The session survives the refusal.
        assert len((await s.list_tools()).tools) == 9


async def test_embedded_store_is_refused_beside_a_server_on_the_same_data_dir(server_factory, tmp_path) -> None:
    # It used to start: a memory added through it was listed by the server but never found by
    # the server's searches (each process indexes a scope once, from the rows it saw then).
    data_dir = tmp_path / "shared"
    server = await server_factory(data_dir=data_dir)
    done = await asyncio.create_subprocess_exec(EXE, "mcp", "--data-dir", str(data_dir), stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(done.communicate(), 60)
    assert done.returncode == 1 and out == b""
    assert err.decode() == (f"agentscope-memory mcp: data_dir {data_dir} is in use by a running agentscope-memory"
                            f" server (pid {os.getpid()}); use --target HOST:PORT to serve its memories through it\n")
    # Through the server it works, and its searches see what was added.
    async with stdio_session("--target", server.address, "--user-id", "alice") as s:
        data(await s.call_tool("add_long_term_memory", {"texts": ["Alice drives a red Volvo"]}))
        found = data(await s.call_tool("search_long_term_memory", {"query": "which car does Alice drive"}))
        assert found["results"][0]["text"] == "Alice drives a red Volvo"


async def test_a_server_is_refused_on_a_data_dir_the_embedded_store_holds(tmp_path) -> None:
    data_dir = tmp_path / "数据"
    async with stdio_session("--data-dir", str(data_dir)) as s:
        await s.list_tools()
        environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSCOPE_MEMORY_")}
        environ["AGENTSCOPE_MEMORY_LONG_TERM_ENABLED"] = "false"
        done = await asyncio.to_thread(
            subprocess.run, [EXE, "serve", "--port", "0", "--data-dir", str(data_dir)], capture_output=True,
            text=True, env=environ, timeout=60)
        assert done.returncode == 1 and f"data_dir {data_dir} is in use by another" in done.stderr, done


async def test_target_filters_as_an_in_process_server_does(server_factory) -> None:
    # Forwarded, a filtered search took 5 x top_k of Retrieve's results and filtered them with
    # Python's `==`: a match ranked below them was missed, and `true` matched 1.
    from agentscope_memory.client import AsyncLongTermClient
    from agentscope_memory.long_term import Scope
    from agentscope_memory.message import Msg, MsgRole
    from mcp_helpers import http_session

    server = await server_factory(api_keys={KEY_A: "tenant-a"}, mcp_port=0)
    scope = Scope(user_id="茶客")
    async with AsyncLongTermClient(server.address, api_key=KEY_A) as ltm:
        for i in range(14):
            await ltm.record(scope, [Msg.create(MsgRole.USER, f"I drink green tea, cup {i}")], metadata={"topic": "tea"})
        await ltm.record(scope, [Msg.create(MsgRole.USER, "火车九点从里昂出发")], metadata={"topic": "trip", "flag": True})
    train = ["火车九点从里昂出发"]
    searches = [("green tea", {"topic": "trip"}, train), ("火车", {"flag": 1}, []), ("火车", {"flag": True}, train)]
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp", {"x-api-key": KEY_A}) as in_process, \
            stdio_session("--target", server.address, env={"AGENTSCOPE_MEMORY_API_KEY": KEY_A}) as forwarded:
        for query, filters, expected in searches:
            for session in (in_process, forwarded):
                found = data(await session.call_tool("search_long_term_memory", {
                    "query": query, "user_id": "茶客", "top_k": 2, "filters": filters}))
                assert [r["text"] for r in found["results"]] == expected, (filters, session is forwarded)


def test_an_empty_scope_flag_is_refused_not_left_open(tmp_path) -> None:
    # `--user-id "$USER_ID"` with the variable unset: every user's memories were open to the model.
    done = subprocess.run([EXE, "mcp", "--data-dir", str(tmp_path), "--user-id", ""], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60, env={**os.environ, "MEM0_TELEMETRY": "False"})
    assert done.returncode == 2 and "user_id: must not be empty" in done.stderr, done


async def test_target_lists_every_memory_of_a_large_scope(server_factory) -> None:
    # Through --target a listing ended at 1,000 memories (one gRPC page) with no next_page_token,
    # as if the scope held no more.
    from agentscope_memory.client import AsyncLongTermClient
    from agentscope_memory.long_term.engine import Scope
    from agentscope_memory.message import Msg, MsgRole

    server = await server_factory()
    texts = [f"fact {i:04d}" for i in range(1010)]
    async with AsyncLongTermClient(server.address, timeout=300) as client:
        for start in range(0, len(texts), 202):
            await client.record(Scope(user_id="many"), [Msg.create(MsgRole.USER, t) for t in texts[start:start + 202]])
    async with stdio_session("--target", server.address, "--user-id", "many") as s:
        listed, token = [], ""
        while True:
            page = data(await s.call_tool("list_long_term_memories", {"page_size": 100, **({"page_token": token} if token else {})}))
            listed += [m["text"] for m in page["memories"]]
            token = page["next_page_token"]
            if not token:
                break
    assert sorted(listed) == texts
