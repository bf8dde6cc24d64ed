"""MCP over streamable HTTP with the `mcp` SDK's own client: every tool, English and Chinese."""

from __future__ import annotations

from mcp_helpers import data, error_text, http_session

from agentscope_memory.client import AsyncLongTermClient


async def test_tools_listed_with_schemas_a_model_can_fill(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
        assert list(tools) == [
            "add_long_term_memory", "search_long_term_memory", "list_long_term_memories",
            "get_long_term_memory", "update_long_term_memory", "delete_long_term_memory",
            "get_long_term_memory_history", "read_working_memory", "append_working_memory",
        ]
        for tool in tools.values():
            assert tool.description and len(tool.description) > 20
            schema = tool.inputSchema
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            for name, prop in schema["properties"].items():
                assert prop.get("description"), (tool.name, name)
        add = tools["add_long_term_memory"].inputSchema
        assert add["required"] == ["texts"]
        assert set(add["properties"]) == {"texts", "user_id", "agent_name", "run_name", "metadata", "importance",
                                          "pinned"}
        assert add["properties"]["pinned"]["type"] == "boolean"
        assert tools["update_long_term_memory"].inputSchema["properties"]["pinned"]["type"] == "boolean"
        assert add["properties"]["importance"]["maximum"] == 1
        search = tools["search_long_term_memory"].inputSchema
        assert search["properties"]["top_k"]["maximum"] == 50 and search["required"] == ["query"]
        assert tools["delete_long_term_memory"].annotations.destructiveHint is True
        assert tools["search_long_term_memory"].annotations.readOnlyHint is True


async def test_long_term_tools_round_trip_in_chinese_and_english(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        added = data(await s.call_tool("add_long_term_memory", {
            "texts": ["用户对花生过敏"], "user_id": "alice", "metadata": {"topic": "health"}, "importance": 0.9,
        }))
        assert added["stored_count"] == 1
        peanut = added["stored"][0]
        assert data(await s.call_tool("add_long_term_memory", {
            "texts": ["Alice prefers window seats on flights"], "user_id": "alice", "metadata": {"topic": "travel"},
        }))["stored_count"] == 1
        assert peanut["text"] == "用户对花生过敏" and peanut["scope"] == {"user_id": "alice"}

        found = data(await s.call_tool("search_long_term_memory", {"query": "花生过敏", "user_id": "alice", "top_k": 1}))
        assert [r["text"] for r in found["results"]] == ["用户对花生过敏"]
        assert isinstance(found["results"][0]["score"], float)
        seats = data(await s.call_tool("search_long_term_memory", {"query": "seat on a plane", "user_id": "alice", "top_k": 1}))
        assert seats["results"][0]["text"] == "Alice prefers window seats on flights"
        # Filters keep only memories whose metadata matches (ranking has no relevance floor: the
        # one travel memory is the best travel match even for an unrelated query).
        for topic, expected in (("health", ["用户对花生过敏"]), ("travel", ["Alice prefers window seats on flights"]),
                                ("food", [])):
            filtered = data(await s.call_tool("search_long_term_memory", {
                "query": "花生过敏", "user_id": "alice", "filters": {"topic": topic}}))
            assert [r["text"] for r in filtered["results"]] == expected
        # Another user's scope holds nothing.
        assert data(await s.call_tool("search_long_term_memory", {"query": "花生", "user_id": "bob"}))["results"] == []

        again = data(await s.call_tool("add_long_term_memory", {"texts": ["用户对花生过敏"], "user_id": "alice"}))
        assert again["stored_count"] == 0 and "not stored again" in again["note"]

        got = data(await s.call_tool("get_long_term_memory", {"memory_id": peanut["id"]}))
        assert got["memory"]["text"] == "用户对花生过敏"
        assert got["memory"]["metadata"] == {"topic": "health", "importance": 0.9}
        updated = data(await s.call_tool("update_long_term_memory", {
            "memory_id": peanut["id"], "text": "用户对花生和腰果过敏", "importance": 1}))
        assert updated["memory"]["text"] == "用户对花生和腰果过敏"
        history = data(await s.call_tool("get_long_term_memory_history", {"memory_id": peanut["id"]}))
        # (the importance given to add_long_term_memory is set right after the ADD)
        assert [(h["event"], h["old_text"], h["new_text"]) for h in history["history"] if h["event"] != "ASSESS"] == [
            ("ADD", None, "用户对花生过敏"), ("UPDATE", "用户对花生过敏", "用户对花生过敏"),
            ("UPDATE", "用户对花生过敏", "用户对花生和腰果过敏")]
        # A page at a time: the token leads to the next change.
        paged, token = [], ""
        while True:
            page = data(await s.call_tool("get_long_term_memory_history",
                                          {"memory_id": peanut["id"], "page_size": 1, "page_token": token}))
            assert len(page["history"]) == 1
            paged += page["history"]
            token = page["next_page_token"]
            if not token:
                break
        # (background scoring may have added an ASSESS since)
        assert paged[:len(history["history"])] == history["history"] and history["next_page_token"] == ""

        listed = data(await s.call_tool("list_long_term_memories", {"user_id": "alice"}))
        assert len(listed["memories"]) == 2 and listed["next_page_token"] == ""

        assert data(await s.call_tool("delete_long_term_memory", {"memory_id": peanut["id"]})) == {"deleted": peanut["id"]}
        gone = error_text(await s.call_tool("get_long_term_memory", {"memory_id": peanut["id"]}))
        assert gone.startswith("Not found:") and peanut["id"] in gone


async def test_the_importance_a_model_gives_is_the_one_ranking_uses(server_factory) -> None:
    # `importance` used to go into the metadata only: the memory kept the default 0.5 (shown
    # beside the metadata's 0.9), search ranked by 0.5, and background scoring replaced it.
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        added = data(await s.call_tool("add_long_term_memory", {
            "texts": ["用户对花生过敏", "Alice 的护照号码以 E12 开头"], "user_id": "alice", "importance": 0.9}))
        assert [m["importance"] for m in added["stored"]] == [0.9, 0.9]
        peanut = added["stored"][0]["id"]
        found = data(await s.call_tool("search_long_term_memory", {"query": "花生过敏", "user_id": "alice", "top_k": 1}))
        assert found["results"][0]["id"] == peanut
        assert found["results"][0]["importance"] == 0.9 and found["results"][0]["score_components"]["importance"] == 0.9
        updated = data(await s.call_tool("update_long_term_memory", {"memory_id": peanut, "importance": 0.2}))
        assert updated["memory"]["importance"] == 0.2
        got = data(await s.call_tool("get_long_term_memory", {"memory_id": peanut}))
        assert got["memory"]["importance"] == 0.2


async def test_a_model_pins_and_unpins_memories(server_factory) -> None:
    """The add and update tools take `pinned` and every memory's JSON shows it: a model could not
    pin what a user asks it to always remember, nor see which memories are pinned."""
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        added = data(await s.call_tool("add_long_term_memory", {
            "texts": ["用户对青霉素过敏"], "user_id": "alice", "pinned": True, "importance": 1}))
        allergy = added["stored"][0]
        assert allergy["pinned"] is True and allergy["importance"] == 1
        plain = data(await s.call_tool("add_long_term_memory", {"texts": ["Alice likes jazz"], "user_id": "alice"}))
        assert plain["stored"][0]["pinned"] is False
        async with AsyncLongTermClient(server.address) as grpc_client:  # what gRPC readers see
            assert (await grpc_client.get(allergy["id"])).pinned is True
            listed = data(await s.call_tool("list_long_term_memories", {"user_id": "alice"}))
            assert {m["text"]: m["pinned"] for m in listed["memories"]} == {"用户对青霉素过敏": True, "Alice likes jazz": False}
            # `pinned` alone is a change: no text, metadata or importance needed.
            unpinned = data(await s.call_tool("update_long_term_memory", {"memory_id": allergy["id"], "pinned": False}))
            assert unpinned["memory"]["pinned"] is False and unpinned["memory"]["text"] == "用户对青霉素过敏"
            assert (await grpc_client.get(allergy["id"])).pinned is False
            # Added again pinned ("always remember my allergy"): the memory holding it is pinned.
            again = data(await s.call_tool("add_long_term_memory", {
                "texts": ["用户对青霉素过敏"], "user_id": "alice", "pinned": True}))
            assert [(m["id"], m["pinned"]) for m in again["stored"]] == [(allergy["id"], True)]
            assert (await grpc_client.get(allergy["id"])).pinned is True
            assert len(data(await s.call_tool("list_long_term_memories", {"user_id": "alice"}))["memories"]) == 2
            # Updating the text leaves the pin as it is.
            data(await s.call_tool("update_long_term_memory", {"memory_id": plain["stored"][0]["id"], "pinned": True}))
            kept = data(await s.call_tool("update_long_term_memory", {
                "memory_id": plain["stored"][0]["id"], "text": "Alice 喜欢爵士乐"}))
            assert kept["memory"]["pinned"] is True
            assert (await grpc_client.get(plain["stored"][0]["id"])).pinned is True
        for tool, args in (("add_long_term_memory", {"texts": ["x"], "user_id": "alice", "pinned": "yes"}),
                           ("update_long_term_memory", {"memory_id": allergy["id"], "pinned": 1})):
            result = await s.call_tool(tool, args)
            assert result.isError and "pinned" in error_text(result)


async def test_working_memory_append_and_read_pages_newest_last(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        missing = error_text(await s.call_tool("read_working_memory", {"working_memory_id": "chat-1"}))
        assert missing.startswith("Not found:") and "chat-1" in missing
        appended = data(await s.call_tool("append_working_memory", {"working_memory_id": "chat-1", "messages": [
            {"role": "user", "text": f"第{i}条消息"} for i in range(5)]}))
        assert appended == {"working_memory_id": "chat-1", "appended": 5, "total_size": 5}
        data(await s.call_tool("append_working_memory", {"working_memory_id": "chat-1", "messages": [
            {"role": "assistant", "text": "好的", "name": "助手"}]}))
        texts: list[str] = []
        token = ""
        pages = 0
        while True:
            args = {"working_memory_id": "chat-1", "page_size": 4}
            if token:
                args["page_token"] = token
            page = data(await s.call_tool("read_working_memory", args))
            assert page["total_size"] == 6
            texts += [m["text"] for m in page["messages"]]
            pages += 1
            token = page["next_page_token"]
            if not token:
                break
        assert pages == 2
        assert texts == [f"第{i}条消息" for i in range(5)] + ["好的"]
        last = page["messages"][-1]
        assert last["role"] == "assistant" and last["name"] == "助手"
    # The same messages are there for gRPC clients of the same tenant.
    from agentscope_memory.client import AsyncMemoryClient

    async with AsyncMemoryClient(server.address) as client:
        assert [m.text_content for m in await client.get_messages("chat-1")][-1] == "好的"
