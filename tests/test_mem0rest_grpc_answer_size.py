"""No mem0 REST answer outgrows a stock client's 4 MiB: add, search and the unpaged list answer
what fits (best or oldest first), and a `get_all` page cut short leads on with `next`."""

from __future__ import annotations

import httpx
import pytest

from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, GRPC_DEFAULT_RECEIVE

KEY = "mem0-answer-size-key-0001"
# Every memory of one add carries its metadata: 60 KB each makes 80 of them about 4.8 MB.
BIG_METADATA = {"附件": "长" * 20_000}
TEXTS = [f"第{i}条记录：编号{i}的会议纪要" for i in range(80)]


@pytest.fixture
async def rest(server_factory):
    server = await server_factory(mem0_rest_port=0, api_keys={KEY: "tenant"})
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"Authorization": f"Token {KEY}"}, timeout=120) as client:
        yield client


async def test_answers_stay_under_4_mib_at_the_default_budget(rest) -> None:
    body = {"messages": [{"role": "user", "content": t} for t in TEXTS], "user_id": "档案", "metadata": BIG_METADATA}
    added = await rest.post("/v1/memories/", json=body)
    assert added.status_code == 200, added.text[:300]
    # Before, this answer listed all 80 memories: about 4.8 MB, which a stock client refuses.
    assert len(added.content) <= GRPC_DEFAULT_RECEIVE
    shown = added.json()
    assert 0 < len(shown["results"]) < len(TEXTS)
    assert f"more of the {len(TEXTS)} memories stored are not listed" in shown["message"]
    assert [r["memory"] for r in shown["results"]] == TEXTS[:len(shown["results"])]

    listed = await rest.get("/memories", params={"user_id": "档案", "top_k": 1000})
    assert listed.status_code == 200 and len(listed.content) <= GRPC_DEFAULT_RECEIVE
    oldest = [m["memory"] for m in listed.json()["results"]]
    # One add stores its memories at one time: which of them come first is the id's order.
    assert 0 < len(oldest) < len(TEXTS) and set(oldest) < set(TEXTS)

    for path in ("/search", "/v2/memories/search/", "/v3/memories/search/"):
        found = await rest.post(path, json={"query": "会议纪要", "filters": {"user_id": "档案"}, "top_k": 100})
        assert found.status_code == 200 and len(found.content) <= GRPC_DEFAULT_RECEIVE, path
        hits = found.json() if path.startswith("/v2/") else found.json()["results"]
        assert 0 < len(hits) < len(TEXTS), path
        assert len(found.content) > DEFAULT_PAGE_BYTES - 100_000, "the answer holds what fits, not a few"

    page = await rest.post("/v3/memories/", json={"filters": {"user_id": "档案"}})
    assert page.status_code == 200 and len(page.content) <= GRPC_DEFAULT_RECEIVE
    assert page.json()["count"] == len(TEXTS)


async def test_get_all_follows_next_past_pages_cut_short(server_factory) -> None:
    # A small budget: four memories of about 9 KB fit in one answer, not the ten a page asks.
    budget = 40_000
    server = await server_factory(mem0_rest_port=0, api_keys={KEY: "tenant"}, max_page_bytes=budget)
    texts = [f"第{i}段：" + "会议纪要的正文。" * 375 for i in range(23)]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"Authorization": f"Token {KEY}"}, timeout=120) as rest:
        for text in texts:
            assert (await rest.post("/memories", json={"messages": text, "user_id": "纪要"})).status_code == 200
        body = {"filters": {"user_id": "纪要"}}
        url: str | None = "/v3/memories/?page=1&page_size=10"
        seen: list[str] = []
        previous: list[str | None] = []
        while url is not None:
            answer = await rest.post(url, json=body)
            assert answer.status_code == 200, answer.text[:300]
            assert len(answer.content) <= budget + 1_000
            page = answer.json()
            assert page["count"] == len(texts) and 0 < len(page["results"]) <= 4
            seen += [m["memory"] for m in page["results"]]
            previous.append(page["previous"])
            url = page["next"]
        # Every memory exactly once, oldest first, and each page links back.
        assert seen == texts
        assert previous[0] is None and all(p is not None and "offset=" in p for p in previous[1:])
        # `previous` steps back a page size from where the page started (the fourth page, at 12).
        back = (await rest.post(previous[3], json=body)).json()
        assert [m["memory"] for m in back["results"]] == texts[2:6]

        # A page that fits keeps mem0's page numbers.
        small = (await rest.post("/v3/memories/?page=2&page_size=3", json=body)).json()
        assert [m["memory"] for m in small["results"]] == texts[3:6]
        assert "page=3" in small["next"] and "page=1" in small["previous"] and "offset" not in small["next"]

        # The unpaged list and a search answer what fits, oldest and best first.
        listed = await rest.get("/memories", params={"user_id": "纪要"})
        assert [m["memory"] for m in listed.json()["results"]] == texts[:4]
        found = await rest.post("/search", json={"query": "第7段", "user_id": "纪要", "top_k": 20})
        assert len(found.content) <= budget + 1_000 and len(found.json()["results"]) == 4


@pytest.mark.parametrize("query, detail", [
    ("offset=-1", "query.offset"),
    ("offset=abc", "query.offset"),
    ("offset=99999999999999999999", "query.offset"),
])
async def test_bad_offset_is_refused(rest, query: str, detail: str) -> None:
    answer = await rest.post(f"/v3/memories/?{query}", json={"filters": {"user_id": "纪要"}})
    assert answer.status_code == 400 and detail in answer.json()["detail"], answer.text
