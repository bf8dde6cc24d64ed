"""Bad input for every argument of every MCP tool: an `isError` result naming the argument and
what to send, the session goes on, and nothing stored changes."""

from __future__ import annotations

import json
from typing import Any

from mcp_helpers import data, error_text, http_session

BIG = "字" * (64 * 1024 + 1)
ID = "00000000-0000-0000-0000-000000000000"

# (tool, arguments, text the error must contain)
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("add_long_term_memory", {"user_id": "u"}, "Invalid argument texts: must be a non-empty array"),
    ("add_long_term_memory", {"texts": [], "user_id": "u"}, "Invalid argument texts"),
    ("add_long_term_memory", {"texts": "just a string", "user_id": "u"}, "Invalid argument texts"),
    ("add_long_term_memory", {"texts": ["ok", 3], "user_id": "u"}, "Invalid argument texts[1]: must be a non-empty string"),
    ("add_long_term_memory", {"texts": ["  "], "user_id": "u"}, "Invalid argument texts[0]"),
    ("add_long_term_memory", {"texts": [BIG], "user_id": "u"}, "Too large: texts[0]: has 65537 characters"),
    ("add_long_term_memory", {"texts": ["x"] * 101, "user_id": "u"}, "Too large: texts: has 101 items; at most 100"),
    ("add_long_term_memory", {"texts": ["x"]}, "Invalid argument user_id: give at least one of user_id, agent_name or run_name"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": ""}, "Invalid argument user_id: must not be empty"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": 7}, "Invalid argument user_id: must be a string, not a number"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": "a\tb"}, "Invalid argument user_id: contains a"),
    ("add_long_term_memory", {"texts": ["x"], "agent_name": "x" * 300}, "agent_name: has 300 characters; at most 256"),
    ("add_long_term_memory", {"texts": ["x"], "run_name": "r\x00"}, "Invalid argument run_name: contains a NUL character"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": "u", "metadata": [1]}, "Invalid argument metadata: must be a JSON object, not an array"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": "u", "metadata": {"k": "v" * 20000}}, "Too large: metadata"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": "u", "importance": 2}, "Invalid argument importance: must be a number from 0 to 1"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": "u", "importance": "high"}, "Invalid argument importance"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": "u", "pinned": 1}, "Invalid argument pinned: must be true or false"),
    ("add_long_term_memory", {"texts": ["x"], "user_id": "u", "userId": "v"}, "Invalid argument userId: is not an argument of add_long_term_memory"),
    ("search_long_term_memory", {"user_id": "u"}, "Invalid argument query: is required"),
    ("search_long_term_memory", {"query": "", "user_id": "u"}, "Invalid argument query: must not be empty"),
    ("search_long_term_memory", {"query": ["a"], "user_id": "u"}, "Invalid argument query: must be a string, not an array"),
    ("search_long_term_memory", {"query": "q", "user_id": "u", "top_k": 0}, "Invalid argument top_k: is 0; must be from 1 to 50"),
    ("search_long_term_memory", {"query": "q", "user_id": "u", "top_k": 51}, "top_k: is 51; must be from 1 to 50"),
    ("search_long_term_memory", {"query": "q", "user_id": "u", "top_k": "5"}, "top_k: must be an integer from 1 to 50, not a string"),
    ("search_long_term_memory", {"query": "q", "user_id": "u", "top_k": 2.5}, "top_k: must be an integer"),
    ("search_long_term_memory", {"query": "q", "user_id": "u", "top_k": True}, "top_k: must be an integer from 1 to 50, not a boolean"),
    ("search_long_term_memory", {"query": "q", "user_id": "u", "filters": "topic"}, "Invalid argument filters: must be a JSON object"),
    ("search_long_term_memory", {"query": "q", "user_id": "u", "filters": {"k": [1]}}, "Invalid argument filters.k: must be a string, number or boolean"),
    ("search_long_term_memory", {"query": "q"}, "give at least one of user_id"),
    ("list_long_term_memories", {"user_id": "u", "page_size": 0}, "Invalid argument page_size: is 0; must be from 1 to 100"),
    ("list_long_term_memories", {"user_id": "u", "page_size": 101}, "page_size: is 101"),
    ("list_long_term_memories", {"user_id": "u", "page_token": "forged"}, "Invalid argument page_token: is not a next_page_token"),
    ("list_long_term_memories", {"user_id": "u", "page_token": 5}, "page_token: must be a string"),
    ("list_long_term_memories", {}, "give at least one of user_id"),
    ("get_long_term_memory", {}, "Invalid argument memory_id: is required"),
    ("get_long_term_memory", {"memory_id": ""}, "Invalid argument memory_id: must not be empty"),
    ("get_long_term_memory", {"memory_id": 12}, "memory_id: must be a string, not a number"),
    ("get_long_term_memory", {"memory_id": ID}, f"Not found: long-term memory '{ID}' does not exist"),
    ("update_long_term_memory", {"memory_id": ID, "text": "x"}, "Not found:"),
    ("update_long_term_memory", {"memory_id": "MEMID"}, "Invalid argument text: give text, metadata, importance or pinned"),
    ("update_long_term_memory", {"memory_id": "MEMID", "pinned": "true"}, "Invalid argument pinned: must be true or false"),
    ("update_long_term_memory", {"memory_id": "MEMID", "text": ""}, "Invalid argument text: must not be empty"),
    ("update_long_term_memory", {"memory_id": "MEMID", "text": BIG}, "Too large: text"),
    ("update_long_term_memory", {"memory_id": "MEMID", "metadata": "x"}, "Invalid argument metadata"),
    ("update_long_term_memory", {"memory_id": "MEMID", "importance": -0.1}, "Invalid argument importance"),
    ("update_long_term_memory", {"memory_id": "MEMID", "text": "x", "scope": {}}, "Invalid argument scope: is not an argument"),
    ("delete_long_term_memory", {}, "Invalid argument memory_id: is required"),
    ("delete_long_term_memory", {"memory_id": ID}, "Not found:"),
    ("get_long_term_memory_history", {"memory_id": None}, "Invalid argument memory_id: is required"),
    ("get_long_term_memory_history", {"memory_id": ID}, "Not found:"),
    ("get_long_term_memory_history", {"memory_id": "MEMID", "page_size": 1000}, "page_size: is 1000; must be from 1 to 100"),
    ("get_long_term_memory_history", {"memory_id": "MEMID", "page_token": "not-a-token"}, "Invalid argument page_token"),
    ("read_working_memory", {}, "Invalid argument working_memory_id: is required"),
    ("read_working_memory", {"working_memory_id": "a\x01"}, "Invalid argument working_memory_id: contains a"),
    ("read_working_memory", {"working_memory_id": "chat"}, "Not found: memory 'chat' does not exist"),
    ("read_working_memory", {"working_memory_id": "WMID", "page_size": 1000}, "page_size: is 1000; must be from 1 to 100"),
    ("read_working_memory", {"working_memory_id": "WMID", "page_token": "not-a-token"}, "Invalid argument page_token"),
    ("append_working_memory", {"working_memory_id": "WMID"}, "Invalid argument messages: must be a non-empty array"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": []}, "Invalid argument messages"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": ["hi"]}, "Invalid argument messages[0]: must be an object"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": [{"role": "bot", "text": "x"}]},
     "Invalid argument messages[0].role: must be one of user, assistant, system"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": [{"role": "user", "text": "ok"}, {"role": "user"}]},
     "Invalid argument messages[1].text: is required"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": [{"role": "user", "text": "x", "content": "y"}]},
     "Invalid argument messages[0].content: is not a message field"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": [{"role": "user", "text": "x", "name": 5}]},
     "Invalid argument messages[0].name"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": [{"role": "user", "text": BIG}]}, "Too large: messages[0].text"),
    ("append_working_memory", {"working_memory_id": "WMID", "messages": [{"role": "user", "text": "x"}] * 101}, "Too large: messages"),
    ("append_working_memory", {"working_memory_id": "a\x1fb", "messages": [{"role": "user", "text": "x"}]}, "working_memory_id: contains a"),
    ("no_such_tool", {}, "Invalid argument name: there is no tool 'no_such_tool'"),
]


async def test_every_bad_argument_is_a_tool_error_and_changes_nothing(server_factory) -> None:
    server = await server_factory(mcp_port=0)
    async with http_session(f"http://127.0.0.1:{server.mcp_port}/mcp") as s:
        memory_id = data(await s.call_tool("add_long_term_memory", {"texts": ["原始文本"], "user_id": "u"}))["stored"][0]["id"]
        data(await s.call_tool("append_working_memory", {"working_memory_id": "WMID", "messages": [{"role": "user", "text": "第一条"}]}))
        failures = []
        for tool, args, expected in CASES:
            args = {k: (memory_id if v == "MEMID" else v) for k, v in args.items()}
            result = await s.call_tool(tool, args)
            text = error_text(result) if result.isError else f"NOT AN ERROR: {result.content}"
            if expected not in text or "Traceback" in text:
                failures.append((tool, args if len(str(args)) < 200 else "<big>", expected, text[:300]))
        assert failures == []
        # Nothing stored changed.
        listed = data(await s.call_tool("list_long_term_memories", {"user_id": "u"}))
        assert [m["text"] for m in listed["memories"]] == ["原始文本"]
        history = data(await s.call_tool("get_long_term_memory_history", {"memory_id": memory_id}))
        # ASSESS entries (background importance scoring) may follow; no change of text did.
        assert [h["event"] for h in history["history"] if h["event"] != "ASSESS"] == ["ADD"]
        page = data(await s.call_tool("read_working_memory", {"working_memory_id": "WMID"}))
        assert [m["text"] for m in page["messages"]] == ["第一条"]
        for other in ("chat", "a\x1fb"):
            assert error_text(await s.call_tool("read_working_memory", {"working_memory_id": other})).startswith(
                ("Not found", "Invalid argument"))


async def test_a_lone_surrogate_in_filters_or_metadata_is_that_arguments_error(server_factory) -> None:
    # `"\ud800"` is a valid JSON escape but no Unicode text (the SDK's own client cannot even
    # send it, so the request is written by hand). A filter holding one was an internal error.
    import httpx

    server = await server_factory(mcp_port=0)
    url = f"http://127.0.0.1:{server.mcp_port}/mcp"
    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            b'"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}')
    cases = [
        (b'"search_long_term_memory","arguments":{"query":"q","user_id":"u","filters":{"k":"\\ud800"}}',
         "Invalid argument filters: contains a lone surrogate"),
        (b'"add_long_term_memory","arguments":{"texts":["x"],"user_id":"u","metadata":{"k":["\\udc00"]}}',
         "Invalid argument metadata: contains a lone surrogate"),
        (b'"update_long_term_memory","arguments":{"memory_id":"m","metadata":{"k":"\\ud800"}}',
         "Invalid argument metadata: contains a lone surrogate"),
    ]
    async with httpx.AsyncClient(timeout=60) as http:
        opened = await http.post(url, content=init, headers=accept)
        headers = {**accept, "mcp-session-id": opened.headers["mcp-session-id"]}
        for n, (call, expected) in enumerate(cases):
            body = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s}}' % (n + 2, call)
            answer = await http.post(url, content=body, headers=headers)
            line = next(x for x in answer.text.splitlines() if x.startswith("data:"))
            result = json.loads(line[5:])["result"]
            assert result["isError"] and result["content"][0]["text"].startswith(expected), result
