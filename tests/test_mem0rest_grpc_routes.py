"""The mem0-compatible REST facade of the real server: the bodies AgentScope's Mem0Client sends
(captured on the wire), mem0's server routes, tenants and keys, and its errors."""

from __future__ import annotations

import asyncio
import datetime as dt

import httpx
import pytest
from scripted_llm import ScriptedLLM, ScriptedReply

KEY_A = "mem0-rest-key-tenant-a-0001"
KEY_B = "mem0-rest-key-tenant-b-0002"

# What AgentScope-Java's Mem0LongTermMemory sends (reference/observed-2026-11-23.md).
JAVA_ADD = {
    "messages": [{"role": "user", "content": "I like green tea"}, {"role": "assistant", "content": "Noted"}],
    "metadata": {"category": "travel"}, "infer": True, "immutable": False, "agent_id": "Friday",
    "user_id": "alice", "output_format": "v1.1", "async_mode": True,
}
JAVA_SEARCH = {
    "query": "what tea do I like", "version": "v2",
    "filters": {"agent_id": "Friday", "user_id": "alice", "category": "travel"}, "top_k": 5, "user_id": "alice",
}


@pytest.fixture
async def rest(server_factory):
    server = await server_factory(mem0_rest_port=0, api_keys={KEY_A: "tenant-a", KEY_B: "tenant-b"})
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"Authorization": f"Token {KEY_A}"}, timeout=60) as client:
        yield client


def _has_utc_offset(stamp: str) -> bool:
    return dt.datetime.fromisoformat(stamp).utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize("add_path, search_path", [("/memories", "/search"), ("/v1/memories/", "/v2/memories/search/")])
async def test_java_client_bodies_record_and_retrieve(rest, add_path, search_path) -> None:
    added = await rest.post(add_path, json=JAVA_ADD)
    assert added.status_code == 200, added.text
    body = added.json()
    assert [r["memory"] for r in body["results"]] == ["I like green tea", "Noted"]
    assert all(r["event"] == "ADD" and r["metadata"] == {"category": "travel"} for r in body["results"])
    assert body["inferred"] is False and "no LLM is configured" in body["message"]

    found = await rest.post(search_path, json=JAVA_SEARCH)
    assert found.status_code == 200, found.text
    hits = found.json() if search_path.startswith("/v2/") else found.json()["results"]
    # /v2/memories/search/ answers a bare array: AgentScope parses every v2 search as one.
    assert isinstance(found.json(), list) == search_path.startswith("/v2/")
    assert hits[0]["memory"] == "I like green tea"
    assert {h["user_id"] for h in hits} == {"alice"} and {h["agent_id"] for h in hits} == {"Friday"}
    assert all(_has_utc_offset(h["created_at"]) and _has_utc_offset(h["updated_at"]) for h in hits)


async def test_other_filter_keys_are_metadata_equality_filters_and_top_k_is_honoured(rest) -> None:
    for category, texts in (("travel", ["我喜欢靠窗的座位", "I fly economy"]), ("food", ["我喜欢绿茶", "I like dumplings"])):
        added = await rest.post("/memories", json={"messages": [{"role": "user", "content": t} for t in texts],
                                                  "user_id": "alice", "metadata": {"category": category}})
        assert added.status_code == 200, added.text
    travel = (await rest.post("/search", json={"query": "座位", "filters": {"category": "travel"}, "user_id": "alice"})).json()
    assert sorted(h["memory"] for h in travel["results"]) == ["I fly economy", "我喜欢靠窗的座位"]
    one = (await rest.post("/search", json={"query": "like", "filters": {"user_id": "alice"}, "top_k": 1})).json()
    assert len(one["results"]) == 1
    nothing = (await rest.post("/search", json={"query": "tea", "filters": {"user_id": "alice", "category": "music"}})).json()
    assert nothing == {"results": []}
    listed = (await rest.get("/memories", params={"user_id": "alice"})).json()["results"]
    assert len(listed) == 4


async def test_metadata_holding_a_list_or_an_object_is_found_by_the_filters_java_sends(rest) -> None:
    # AgentScope-Java sends the metadata it records with as search filters: a list or an object
    # in it was refused as an operator filter, the client swallowed the 400 and recalled nothing.
    metadata = {"tags": ["travel", "旅行"], "profile": {"lang": "zh", "level": 2}}
    for text, meta in (("I like window seats", metadata), ("我喜欢靠过道的座位", {**metadata, "tags": ["travel"]})):
        added = await rest.post("/v1/memories/", json={**JAVA_ADD, "messages": [{"role": "user", "content": text}],
                                                       "metadata": meta})
        assert added.status_code == 200, added.text
    found = await rest.post("/v2/memories/search/", json={**JAVA_SEARCH, "query": "seats",
                                                          "filters": {"agent_id": "Friday", "user_id": "alice", **metadata}})
    assert found.status_code == 200, found.text
    assert [h["memory"] for h in found.json()] == ["I like window seats"]
    # Equal values only: a list is not matched by one of its items, nor an object by part of it.
    for partial in ({"tags": ["travel"]}, {"profile": {"lang": "zh"}}, {"tags": "travel"}):
        hits = (await rest.post("/search", json={"query": "seats", "user_id": "alice", "filters": partial})).json()
        expected = ["我喜欢靠过道的座位"] if partial == {"tags": ["travel"]} else []
        assert [h["memory"] for h in hits["results"]] == expected, partial
    listed = await rest.post("/v3/memories/", json={"filters": {"user_id": "alice", "profile": metadata["profile"]}})
    assert listed.json()["count"] == 2


async def test_nested_and_and_metadata_filters_match(rest) -> None:
    # mem0 nests its logical operators; an AND inside an AND was a metadata key named "AND".
    for text, topic in (("周末去杭州玩", "旅行"), ("周末吃火锅", "饮食")):
        added = await rest.post("/memories", json={"messages": text, "user_id": "小明", "metadata": {"主题": topic}})
        assert added.status_code == 200, added.text
    nested = {"AND": [{"user_id": "小明"}, {"AND": [{"主题": "旅行"}]}]}
    found = await rest.post("/v3/memories/search/", json={"query": "周末", "filters": nested})
    assert [h["memory"] for h in found.json()["results"]] == ["周末去杭州玩"], found.text
    listed = await rest.post("/v3/memories/", json={"filters": nested})
    assert [m["memory"] for m in listed.json()["results"]] == ["周末去杭州玩"], listed.text
    # mem0 platform's `metadata` field: its keys must each equal the memory's (it was matched as
    # a metadata key named "metadata", and found nothing).
    platform = {"AND": [{"user_id": "小明"}, {"metadata": {"主题": "饮食"}}]}
    found = await rest.post("/v3/memories/search/", json={"query": "周末", "filters": platform})
    assert [h["memory"] for h in found.json()["results"]] == ["周末吃火锅"], found.text
    listed = await rest.post("/v3/memories/", json={"filters": {"user_id": "小明", "metadata": {"主题": "饮食"}}})
    assert listed.json()["count"] == 1, listed.text


async def test_app_id_is_kept_as_metadata_and_filters_as_such(rest) -> None:
    # mem0's app_id was dropped from an add, so a filter by it found nothing; AgentScope-Java
    # users whose metadata holds an app_id send it as a filter too, and find it there.
    added = await rest.post("/v3/memories/add/", json={"messages": "手机上提醒我喝水", "filters": {"user_id": "小红"},
                                                       "app_id": "手机", "metadata": {"类别": "健康"}})
    assert added.json()["results"][0]["metadata"] == {"类别": "健康", "app_id": "手机"}, added.text
    await rest.post("/memories", json={"messages": "网页上提醒我休息", "user_id": "小红", "metadata": {"app_id": "网页"}})
    for filters, expected in (({"AND": [{"user_id": "小红"}, {"app_id": "手机"}]}, ["手机上提醒我喝水"]),
                              ({"user_id": "小红", "app_id": "网页"}, ["网页上提醒我休息"])):
        found = await rest.post("/v3/memories/search/", json={"query": "提醒", "filters": filters})
        assert [h["memory"] for h in found.json()["results"]] == expected, found.text


async def test_add_takes_one_message_object(rest) -> None:
    # mem0's add takes a single message as well as a list or a string; a lone object was a 400.
    added = await rest.post("/memories", json={"messages": {"role": "assistant", "content": "好的，已记下您的生日"},
                                               "user_id": "单条"})
    assert added.status_code == 200, added.text
    assert [r["memory"] for r in added.json()["results"]] == ["好的，已记下您的生日"]


async def test_get_update_history_delete_one_memory(rest) -> None:
    added = (await rest.post("/memories", json={"messages": "我住在杭州", "user_id": "bob"})).json()
    memory_id = added["results"][0]["id"]
    got = (await rest.get(f"/memories/{memory_id}")).json()
    assert got["memory"] == "我住在杭州" and got["user_id"] == "bob"
    updated = await rest.put(f"/memories/{memory_id}", json={"text": "我住在上海"})
    assert updated.status_code == 200 and updated.json()["memory"] == "我住在上海"
    history = (await rest.get(f"/memories/{memory_id}/history")).json()
    assert [h["event"] for h in history] == ["ADD", "UPDATE"]
    assert history[1]["old_memory"] == "我住在杭州" and history[1]["new_memory"] == "我住在上海"
    assert (await rest.delete(f"/memories/{memory_id}")).status_code == 200
    missing = await rest.get(f"/memories/{memory_id}")
    assert missing.status_code == 404 and memory_id in missing.json()["detail"]


async def test_delete_all_forgets_a_scope(rest) -> None:
    await rest.post("/memories", json={"messages": "one", "user_id": "carol"})
    await rest.post("/memories", json={"messages": "two", "user_id": "carol"})
    await rest.post("/memories", json={"messages": "dave's", "user_id": "dave"})
    deleted = await rest.delete("/memories", params={"user_id": "carol"})
    assert deleted.status_code == 200 and deleted.json()["deleted"] == 2
    assert (await rest.get("/memories", params={"user_id": "carol"})).json()["results"] == []
    assert len((await rest.get("/memories", params={"user_id": "dave"})).json()["results"]) == 1
    # mem0 2.x names the scope in a `filters` parameter (JSON here; see the MemoryClient tests).
    by_filters = await rest.delete("/v1/memories/", params={"filters": '{"user_id": "dave"}'})
    assert by_filters.status_code == 200 and by_filters.json()["deleted"] == 1, by_filters.text


@pytest.mark.parametrize("path", ["/memories", "/v1/memories/"])
async def test_delete_all_of_a_parent_scope_needs_force_as_over_grpc(server_factory, path) -> None:
    # DeleteScope refuses a scope other scopes inherit from unless `force`, which detaches them;
    # mem0's route forgets the same scope and must not quietly leave the children hanging on it.
    from agentscope_memory.client.scopes import AsyncScopeClient
    from agentscope_memory.long_term import Scope

    server = await server_factory(mem0_rest_port=0, api_keys={KEY_A: "tenant-a"})
    boss, staff = Scope(user_id="老板"), Scope(user_id="员工")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"Authorization": f"Token {KEY_A}"}, timeout=60) as rest, \
            AsyncScopeClient(server.address, api_key=KEY_A) as scopes:
        await scopes.set_long_term_parent(staff, boss)
        await rest.post("/memories", json={"messages": "预算是十万元", "user_id": "老板"})
        await rest.post("/memories", json={"messages": "我负责写测试", "user_id": "员工"})
        refused = await rest.delete(path, params={"user_id": "老板"})
        assert refused.status_code == 409, refused.text
        assert refused.json()["detail"].startswith("force: ") and "1 child scope" in refused.json()["detail"]
        assert len((await rest.get("/memories", params={"user_id": "老板"})).json()["results"]) == 1
        assert (await scopes.long_term_lineage(staff)).ancestors == [boss]
        forced = await rest.delete(path, params={"user_id": "老板", "force": "true"})
        assert forced.status_code == 200 and forced.json()["deleted"] == 1, forced.text
        assert (await rest.get("/memories", params={"user_id": "老板"})).json()["results"] == []
        assert (await scopes.long_term_lineage(staff)).ancestors == []
        assert [m["memory"] for m in (await rest.get("/memories", params={"user_id": "员工"})).json()["results"]] == [
            "我负责写测试"]
        # A scope without children needs no force.
        assert (await rest.delete(path, params={"user_id": "员工"})).json()["deleted"] == 1


async def test_search_touches_only_what_it_returns(server_factory) -> None:
    # A memory's last access and access count drive decay and forgetting. What the metadata
    # filter, the threshold or top_k leave out of the answer was not recalled.
    from agentscope_memory.client import AsyncLongTermClient

    server = await server_factory(mem0_rest_port=0, api_keys={KEY_A: "tenant-a"})
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"Authorization": f"Token {KEY_A}"}, timeout=60) as rest, \
            AsyncLongTermClient(server.address, api_key=KEY_A, timeout=30) as ltm:
        ids = []
        for text, category in (("我喜欢绿茶", "food"), ("I like green tea", "food"), ("绿茶要用八十度的水泡", "tips"),
                               ("Green tea is brewed at 80 degrees", "tips")):
            added = await rest.post("/memories", json={"messages": text, "user_id": "茶友", "metadata": {"c": category}})
            ids.append(added.json()["results"][0]["id"])
        before = {memory_id: await ltm.get(memory_id) for memory_id in ids}
        # Nothing passes this threshold: nothing is recalled.
        none = await rest.post("/search", json={"query": "绿茶 green tea", "user_id": "茶友", "threshold": 100.0})
        assert none.status_code == 200 and none.json()["results"] == []
        found = await rest.post("/search", json={"query": "绿茶 green tea", "user_id": "茶友", "top_k": 1,
                                                 "filters": {"c": "tips"}})
        [hit] = found.json()["results"]
        assert hit["metadata"]["c"] == "tips"
        # Touches land in the background: wait for the hit's, then give any other a moment.
        for _ in range(100):
            if (await ltm.get(hit["id"])).access_count:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        for memory_id in ids:
            after = await ltm.get(memory_id)
            if memory_id == hit["id"]:
                assert after.access_count == 1 and after.last_accessed_at > before[memory_id].last_accessed_at
            else:
                assert (after.access_count, after.last_accessed_at) == (0, before[memory_id].last_accessed_at), after.text


async def test_keys_decide_the_tenant(rest) -> None:
    added = (await rest.post("/memories", json={"messages": "tenant A secret", "user_id": "alice"})).json()
    memory_id = added["results"][0]["id"]
    for header in ({"X-API-Key": KEY_B}, {"Authorization": f"Bearer {KEY_B}"}, {"Authorization": f"Token {KEY_B}"}):
        async with httpx.AsyncClient(base_url=rest.base_url, headers=header, timeout=60) as other_tenant:
            other = await other_tenant.post("/search", json={"query": "secret", "user_id": "alice"})
            assert other.status_code == 200 and other.json() == {"results": []}
            assert (await other_tenant.get(f"/memories/{memory_id}")).status_code == 404
    mine = await rest.post("/search", json={"query": "secret", "user_id": "alice"})
    assert [h["memory"] for h in mine.json()["results"]] == ["tenant A secret"]


ERROR_CASES = [
        ("post", "/memories", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}, 400, "not valid JSON"),
        ("post", "/memories", {"json": {"messages": "hello"}}, 400, "at least one of user_id, agent_id or run_id"),
        ("post", "/memories", {"json": {"user_id": "alice"}}, 400, "messages"),
        ("post", "/memories", {"json": {"messages": [{"role": "robot", "content": "x"}], "user_id": "a"}}, 400, "messages[0].role"),
        ("post", "/memories", {"json": ["not", "an", "object"]}, 400, "JSON object"),
        # Each said what the field takes, not what each branch of its type wanted
        # ("messages.list[Mem0Message]: Input should be a valid list; messages.str: ...").
        ("post", "/memories", {"json": {"messages": 5, "user_id": "a"}}, 400,
         '{"detail":"messages: must be a list of messages, one message or a string"}'),
        ("post", "/memories", {"json": {"messages": [{"role": "user", "content": 5}], "user_id": "a"}}, 400,
         '{"detail":"messages.0.content: must be text or a list of content parts"}'),
        ("post", "/memories", {"json": {"messages": [{"role": "user", "content": ["第一段"]}], "user_id": "a"}}, 400,
         '{"detail":"messages.0.content: part 0 must be an object such as'),
        ("post", "/memories", {"json": {"messages": [{"content": "x"}], "user_id": "a"}}, 400,
         '{"detail":"messages.0.role: Field required"}'),
        # What FastAPI reads but cannot decode used to be "There was an error parsing the body".
        ("post", "/memories", {"content": b'{"messages": "\xff\xfe", "user_id": "a"}',
                               "headers": {"Content-Type": "application/json"}}, 400,
         "the request body is not UTF-8 (byte 0xff at offset 14"),
        ("post", "/memories", {"content": b"[" * 100_000 + b"]" * 100_000, "headers": {"Content-Type": "application/json"}},
         400, "nested too deeply"),
        ("post", "/memories", {"content": b'{"messages": "x", "user_id": "a", "metadata": {"n": ' + b"9" * 5000 + b"}}",
                               "headers": {"Content-Type": "application/json"}}, 400, "4300 digits"),
        ("post", "/search", {"json": {"query": "tea"}}, 400, "at least one of user_id, agent_id or run_id"),
        ("post", "/search", {"json": {"query": "tea", "user_id": "a", "top_k": 0}}, 400, "top_k"),
        ("post", "/search", {"json": {"query": "tea", "user_id": "a", "filters": {"user_id": "b"}}}, 400, "user_id"),
        ("post", "/search", {"json": {"query": "x", "filters": {"user_id": "a", "created_at": {"gte": "2026"}}}}, 400, "operator"),
        ("post", "/search", {"json": {"query": "x", "filters": {"user_id": "a", "n": {"in": [1, 2], "ne": 3}}}}, 400,
         "filters.n: operator"),
        ("post", "/search", {"json": {"query": "x", "user_id": "a\x00b"}}, 400, "NUL"),
        ("post", "/search", {"content": b'{"query": "x", "user_id": "a", "threshold": NaN}',
                             "headers": {"Content-Type": "application/json"}}, 400, "threshold"),
        ("get", "/memories", {}, 400, "at least one of user_id"),
        ("get", "/memories?user_id=alice&top_k=0", {}, 400, "query.top_k: Input should be greater than or equal to 1"),
        ("get", "/memories?user_id=alice&top_k=-5", {}, 400, "query.top_k"),
        ("get", "/memories?user_id=alice&top_k=99999999999999999999", {}, 400, "query.top_k: Input should be less than"),
        ("post", "/search", {"json": {"query": "x", "filters": {"user_id": "a", "k": "\x00"}}}, 400, "filters: contains a NUL"),
        ("post", "/v3/memories/", {"json": {"filters": {"user_id": "a", "k": "\x00"}}}, 400, "filters: contains a NUL"),
        ("post", "/v3/memories/", {"content": b'{"filters": {"user_id": "a", "k": NaN}}',
                                   "headers": {"Content-Type": "application/json"}}, 400, "filters: holds the number nan"),
        ("post", "/v3/memories/?page=0", {"json": {"filters": {"user_id": "a"}}}, 400, "query.page: Input should be greater"),
        ("post", "/v3/memories/?page=99999999999999999999", {"json": {"filters": {"user_id": "a"}}}, 400, "query.page"),
        ("post", "/v3/memories/?page_size=0", {"json": {"filters": {"user_id": "a"}}}, 400, "query.page_size"),
        # An AND of two values for one key matched the last one's memories (another user's, here).
        ("post", "/search", {"json": {"query": "x", "filters": {"AND": [{"user_id": "alice"}, {"user_id": "bob"}]}}}, 400,
         "filters.AND[1].user_id: is 'bob' but filters.AND[0].user_id is 'alice': no memory matches both"),
        ("post", "/v3/memories/", {"json": {"filters": {"user_id": "alice", "AND": [{"主题": "旅行"}, {"主题": "饮食"}]}}},
         400, "filters.AND[1].主题: is '饮食' but filters.AND[0].主题 is '旅行'"),
        # An AND that is not a list, or an OR / NOT inside an AND, was matched as a metadata key
        # named "AND" / "OR" and silently found nothing.
        ("post", "/search", {"json": {"query": "x", "filters": {"user_id": "alice", "AND": {"主题": "旅行"}}}}, 400,
         "filters.AND: must be a list of conditions"),
        ("post", "/v3/memories/search/", {"json": {"query": "x", "filters": {
            "AND": [{"user_id": "alice"}, {"OR": [{"主题": "旅行"}, {"主题": "饮食"}]}]}}}, 400,
         "filters.AND[1].OR: is not supported"),
        ("post", "/v3/memories/", {"json": {"filters": {"AND": [{"user_id": "alice"}, {"AND": [{"NOT": {"主题": "旅行"}}]}]}}},
         400, "filters.AND[1].AND[0].NOT: is not supported"),
        # mem0 platform fields that were matched as metadata of that name and found nothing.
        ("post", "/memories", {"json": {"messages": "x", "user_id": "alice", "app_id": "手机", "metadata": {"app_id": "网页"}}},
         400, "app_id: is '手机' but metadata.app_id is '网页'"),
        ("post", "/v3/memories/", {"json": {"filters": {"AND": [{"user_id": "alice"}, {"memory_ids": ["a", "b"]}]}}}, 400,
         "filters.AND[1].memory_ids: is not supported"),
        ("post", "/v3/memories/", {"json": {"filters": {"user_id": "alice", "metadata": "旅行"}}}, 400,
         "filters.metadata: must be an object of metadata keys and values"),
        ("post", "/v3/memories/", {"json": {"filters": {"user_id": "alice", "metadata": {"user_id": "bob"}}}}, 400,
         "filters.metadata.user_id: is a scope id, not metadata"),
        ("post", "/v3/memories/", {"json": {"filters": {"user_id": "alice", "metadata": {"主题": {"in": ["旅行"]}}}}}, 400,
         "filters.主题: operator filters are not supported"),
        # mem0's platform reads "*" as any id: taken literally it found nothing and deleted nothing.
        ("post", "/v3/memories/search/", {"json": {"query": "x", "filters": {"user_id": "*"}}}, 400,
         "filters.user_id: '*' (mem0's wildcard for any id) is not supported"),
        ("delete", "/v1/memories/?user_id=*", {}, 400, "user_id: '*' (mem0's wildcard"),
        ("post", "/search", {"json": {"query": "x", "user_id": "alice", "filters": {"AND": [{"主题": "*"}]}}}, 400,
         "filters.AND[0].主题: '*' (mem0's wildcard: the key is present) is not supported"),
        ("delete", "/memories", {}, 400, "at least one of user_id"),
        # Ids in `filters` (mem0 2.x's MemoryClient) name whose memories; metadata there does not.
        ("post", "/v3/memories/add/", {"json": {"messages": "x", "filters": {"user_id": "alice", "主题": "旅行"}}}, 400,
         "filters.主题: only user_id, agent_id and run_id may be given here; metadata to store goes in `metadata`"),
        ("post", "/v3/memories/add/", {"json": {"messages": "x", "user_id": "alice", "filters": {"user_id": "bob"}}}, 400,
         "user_id: is 'alice' but filters.user_id is 'bob'"),
        ("post", "/v3/memories/add/", {"json": {"messages": "x", "filters": {"主题": "旅行"}}}, 400,
         "filters: at least one of user_id"),
        ("delete", "/v1/memories/?filters={'user_id': 'alice', '主题': '旅行'}", {}, 400,
         "filters.主题: only user_id, agent_id and run_id may be given here; a scope is forgotten whole"),
        ("delete", "/v1/memories/?filters=user_id=alice", {}, 400, "query.filters: must be a JSON object"),
        ("delete", "/v1/memories/?filters=" + "[" * 5000, {}, 400, "query.filters: must be a JSON object"),
        ("delete", "/v1/memories/?filters=__import__('os')", {}, 400, "query.filters: must be a JSON object"),
        # Nothing here sets a memory's time or expiry: asking to is refused, not ignored.
        ("post", "/memories", {"json": {"messages": "x", "user_id": "alice", "expiration_date": "2030-01-01"}}, 400,
         "expiration_date: is not supported"),
        ("post", "/v3/memories/add/", {"json": {"messages": "x", "user_id": "alice", "timestamp": 1700000000}}, 400,
         "timestamp: is not supported"),
        ("put", "/v1/memories/nope/", {"json": {"text": "y", "timestamp": 1700000000}}, 400, "timestamp: is not supported"),
        ("put", "/memories/nope", {"json": {}}, 400, "text"),
        ("get", "/memories/00000000-0000-0000-0000-000000000000", {}, 404, "does not exist"),
        ("post", "/memories", {"json": JAVA_ADD, "headers": {"Authorization": "Token wrong-key-0000000000"}}, 401, "unknown API key"),
        ("post", "/memories", {"json": JAVA_ADD, "headers": {"Authorization": ""}}, 401, "missing API key"),
]


async def test_client_errors_are_mem0_style_never_500(rest) -> None:
    # One server for every case: each answer names what was wrong, and nothing was stored.
    for method, path, kwargs, status, detail in ERROR_CASES:
        response = await rest.request(method.upper(), path, **kwargs)
        assert response.status_code == status, (method, path, response.text)
        # A detail given as the body's start is the whole beginning of the answer.
        found = response.text.startswith(detail) if detail.startswith('{"detail"') else detail in response.json()["detail"]
        assert found, (method, path, response.text)
    assert (await rest.get("/memories", params={"user_id": "alice"})).json()["results"] == []


async def test_openapi_docs_are_served(rest) -> None:
    spec = (await rest.get("/openapi.json")).json()
    for path in ("/memories", "/search", "/v1/memories/", "/v2/memories/search/", "/memories/{memory_id}/history"):
        assert path in spec["paths"]
    assert (await rest.get("/docs")).status_code == 200


async def test_off_by_default(server) -> None:
    assert server.mem0_rest_port is None


async def test_infer_true_with_an_llm_extracts_the_fact_in_the_background(server_factory) -> None:
    # The add answers at once with what was said; the server's LLM then scores the round and
    # stores an important fact as a memory of its own (memory_type=fact).
    scored = {"importance_score": 0.9, "extracted_fact": "Likes green tea", "domain": "user_preferences"}
    with ScriptedLLM(default=ScriptedReply.json(scored)) as llm:
        server = await server_factory(mem0_rest_port=0, llm_base_url=llm.base_url, llm_api_key="sk-test")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}", timeout=60) as rest:
            body = (await rest.post("/v1/memories/", json=JAVA_ADD)).json()
            assert [r["memory"] for r in body["results"]] == ["I like green tea", "Noted"]
            assert body["inferred"] is False and "background" in body["message"]
            texts: list[str] = []
            for _ in range(300):
                listed = (await rest.get("/memories", params={"user_id": "alice", "agent_id": "Friday"})).json()
                texts = [m["memory"] for m in listed["results"]]
                if "Likes green tea" in texts:
                    break
                await asyncio.sleep(0.1)
            assert "Likes green tea" in texts
        assert len(llm.requests) >= 1
