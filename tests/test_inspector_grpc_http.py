"""The web inspector over plain HTTP (no browser): what a careless or hostile client sends in a
URL gets an error page with a 4xx status, and every link a page draws leads where it says."""

from __future__ import annotations


import re

import httpx
import pytest

from agentscope_memory.client import AsyncMemoryClient, AsyncPoolClient
from agentscope_memory.client.scopes import AsyncScopeClient
from agentscope_memory.errors import NotFoundError
from agentscope_memory.message import Msg, MsgRole

KEY = "inspector-http-key-0001"


@pytest.fixture
async def inspector(server_factory):
    server = await server_factory(inspector_port=0, api_keys={KEY: "tenant-a"})
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.inspector_port}",
                                 headers={"X-API-Key": KEY}, timeout=60) as client:
        yield server, client


async def test_bad_positions_in_the_query_string_are_client_errors(inspector) -> None:
    server, http = inspector
    async with AsyncMemoryClient(server.address, api_key=KEY) as memories:
        await memories.create_memory("chat")
        await memories.add_messages("chat", [Msg.create(MsgRole.USER, "hello")])
    async with AsyncPoolClient(server.address, api_key=KEY) as pools:
        await pools.write("team", "k", {"v": 1}, writer="w")
    for path in ("/memories/chat?start=abc", "/memories/chat?start=-1", "/memories/chat?start=1e3",
                 "/pools/team?after=abc", "/pools?pool_id=team&after=-5", "/pools/team?after=９"):
        response = await http.get(path)
        assert response.status_code == 400, (path, response.text)
        assert "must be a whole number" in response.text, path
    assert (await http.get("/memories/chat?start=7")).status_code == 200
    # Where the list of offloaded contexts starts: an id, like the offloads' own uuids.
    async with AsyncMemoryClient(server.address, api_key=KEY) as memories:
        await memories.create_memory("压缩", "AUTO_CONTEXT")
    for after in ("%00", "%1B%5B31m", "x" * 3000):
        response = await http.get(f"/memories/%E5%8E%8B%E7%BC%A9?offloads_after={after}")
        assert response.status_code == 400 and "after_uuid" in response.text, (after, response.text)
    response = await http.get("/memories/%E5%8E%8B%E7%BC%A9?offloads_after=%E5%8D%B8%E8%BD%BD-9")
    assert response.status_code == 200 and "No offloaded context after" in response.text
    assert (await http.get("/pools/team?after=0")).status_code == 200


def _link(page: httpx.Response, link_id: str) -> str:
    found = re.search(rf'<a id="{link_id}" href="([^"]*)"', page.text)
    assert found, f"no #{link_id} link on {page.url}"
    return str(page.url.join(found.group(1).replace("&amp;", "&")))


def _entries(page: httpx.Response) -> str:
    found = re.search(r'<table id="entries">.*?</table>', page.text, re.S)
    return found.group(0) if found else ""


async def test_a_pool_opened_from_the_form_pages_through_its_entries_and_events(inspector) -> None:
    # The pool form opens /pools?pool_id=...; its "next" links must stay on that pool.
    server, http = inspector
    async with AsyncPoolClient(server.address, api_key=KEY) as pools:
        for i in range(60):
            await pools.write("team", f"k{i:03d}", {"v": i}, writer="w")
    first = await http.get("/pools", params={"pool_id": "team"})
    assert first.status_code == 200 and "k000" in _entries(first) and "k055" not in _entries(first)
    entries = await http.get(_link(first, "next"))
    assert entries.status_code == 200 and "k055" in _entries(entries), entries.url
    events = await http.get(_link(first, "next-events"))
    assert events.status_code == 200 and re.search(r'<td class="num">5[1-9]</td><td>', events.text), events.url


async def test_links_to_ids_holding_slashes_and_dot_segments_lead_to_them(inspector) -> None:
    # A browser (and httpx) resolves "/../" and "/./" in a link before sending it, so an id
    # such as "team/../chat" must travel as one escaped path segment.
    server, http = inspector
    ids = ["team/../chat", "a/./b", "alice/team/chat", "会话/😀"]
    async with AsyncMemoryClient(server.address, api_key=KEY) as memories:
        for memory_id in ids:
            await memories.create_memory(memory_id)
            await memories.add_messages(memory_id, [Msg.create(MsgRole.USER, f"in {memory_id}")])
    async with AsyncPoolClient(server.address, api_key=KEY) as pools:
        await pools.write("org/../team", "k", {"v": 1}, writer="w")
    index = await http.get("/")
    for memory_id in ids:
        href = re.search(rf'<a href="([^"]*)">{re.escape(memory_id)}</a>', index.text)
        assert href, memory_id
        page = await http.get(str(index.url.join(href.group(1))))
        assert page.status_code == 200, (memory_id, page.url)
        assert f"in {memory_id}" in page.text, (memory_id, page.url)
    pool = await http.get("/pools", params={"pool_id": "org/../team"})
    action = re.search(r'<form method="get" action="(/pools/[^"]*)"', pool.text)
    assert action
    filtered = await http.get(str(pool.url.join(action.group(1))))
    assert filtered.status_code == 200 and "<code>k</code>" in _entries(filtered), filtered.url


async def test_an_admin_deleting_a_parent_memory_needs_force_as_over_grpc(server_factory) -> None:
    # DeleteMemory refuses a memory with children unless `force` (which detaches them); the
    # inspector's delete button must apply the same rule, not detach them silently.
    admin = "inspector-admin-key-0001"
    server = await server_factory(inspector_port=0, api_keys={admin: "tenant-a"}, inspector_admin_keys=[admin])
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.inspector_port}",
                                 headers={"X-API-Key": admin}, timeout=60) as http, \
            AsyncMemoryClient(server.address, api_key=admin) as memories, \
            AsyncScopeClient(server.address, api_key=admin) as scopes:
        await memories.create_memory("主管")
        await scopes.create_child("主管", "助手")
        page = (await http.get("/memories/%E4%B8%BB%E7%AE%A1")).text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
        assert csrf is not None and 'name="force"' in page
        refused = await http.post("/memories/%E4%B8%BB%E7%AE%A1/delete", data={"csrf": csrf.group(1)})
        assert refused.status_code == 409 and "force" in refused.text and "1 child" in refused.text
        assert (await memories.get_memory("主管")).memory_id == "主管"
        assert (await scopes.lineage("助手")).ancestors == ["主管"]
        forced = await http.post("/memories/%E4%B8%BB%E7%AE%A1/delete", data={"csrf": csrf.group(1), "force": "on"})
        assert forced.status_code == 303
        with pytest.raises(NotFoundError):
            await memories.get_memory("主管")
        assert (await scopes.lineage("助手")).ancestors == []


async def test_searching_long_term_memory_in_the_inspector_is_not_a_recall(inspector) -> None:
    # The inspector is read-only for a reader key: an operator looking at a scope must not
    # change what decay and forgetting read (last access, access count) of what they looked at.
    import asyncio

    from agentscope_memory.client import AsyncLongTermClient
    from agentscope_memory.long_term import Scope

    server, http = inspector
    async with AsyncLongTermClient(server.address, api_key=KEY, timeout=30) as ltm:
        [before] = await ltm.record(Scope(user_id="检查员"), [Msg.create(MsgRole.USER, "我对花生过敏")])
        page = await http.get("/long-term", params={"user_id": "检查员", "query": "花生"})
        assert page.status_code == 200 and "我对花生过敏" in page.text
        await asyncio.sleep(0.5)  # a touch lands in the background, within milliseconds
        after = await ltm.get(before.id)
        assert (after.access_count, after.last_accessed_at) == (0, before.last_accessed_at)
