"""mem0's own Python `MemoryClient` (mem0ai, unchanged) against the server's mem0 REST facade."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ServerThread, make_settings

KEY = "mem0-python-client-key-0001"


@pytest.fixture
def mem0_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerThread]:
    # mem0 reads its telemetry switch once, at import, and its client checks the flag per call:
    # both off, whoever imported mem0 first.
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    import mem0.memory.telemetry

    monkeypatch.setattr(mem0.memory.telemetry, "MEM0_TELEMETRY", False)
    server = ServerThread(make_settings(tmp_path / "data", mem0_rest_port=0, api_keys={KEY: "py-tenant"}))
    yield server
    server.stop()


def test_memory_client_adds_searches_lists_updates_and_deletes(mem0_server: ServerThread) -> None:
    from mem0 import MemoryClient

    assert os.environ["MEM0_TELEMETRY"] == "False"
    client = MemoryClient(api_key=KEY, host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")
    added = client.add([{"role": "user", "content": "我最喜欢的茶是龙井"}, {"role": "user", "content": "I walk to work"}],
                       user_id="alice", metadata={"topic": "habits"})
    assert [r["memory"] for r in added["results"]] == ["我最喜欢的茶是龙井", "I walk to work"]

    found = client.search("龙井", filters={"user_id": "alice"}, top_k=1)
    assert [r["memory"] for r in found["results"]] == ["我最喜欢的茶是龙井"]
    listed = client.get_all(filters={"AND": [{"user_id": "alice"}, {"topic": "habits"}]})
    assert listed["count"] == 2

    memory_id = found["results"][0]["id"]
    assert client.get(memory_id)["memory"] == "我最喜欢的茶是龙井"
    client.update(memory_id, text="我最喜欢的茶是碧螺春")
    assert [h["event"] for h in client.history(memory_id)] == ["ADD", "UPDATE"]
    client.delete(memory_id)
    assert client.get_all(filters={"user_id": "alice"})["count"] == 1
    client.delete_all(user_id="alice")
    assert client.get_all(filters={"user_id": "alice"})["count"] == 0


def test_memory_client_refuses_a_wrong_key(mem0_server: ServerThread) -> None:
    from mem0 import MemoryClient

    with pytest.raises(ValueError, match="unknown API key"):
        MemoryClient(api_key="wrong-key-000000000000", host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")


def test_memory_client_pages_through_get_all(mem0_server: ServerThread) -> None:
    # mem0's MemoryClient sends `page` and `page_size` as query parameters and reads mem0's
    # envelope: `count` (all that match), `next` / `previous` (the neighbouring pages' URLs).
    from mem0 import MemoryClient

    client = MemoryClient(api_key=KEY, host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")
    texts = [f"第{i}条笔记 note {i}" for i in range(7)]
    for i, text in enumerate(texts):
        client.add([{"role": "user", "content": text}], user_id="翻页", metadata={"kept": i % 2 == 0})
    kept = [t for i, t in enumerate(texts) if i % 2 == 0]

    seen: list[str] = []
    page = 1
    while True:
        answer = client.get_all(filters={"AND": [{"user_id": "翻页"}, {"kept": True}]}, page=page, page_size=3)
        assert answer["count"] == len(kept)
        assert len(answer["results"]) <= 3
        assert (answer["previous"] is None) == (page == 1)
        seen += [r["memory"] for r in answer["results"]]
        if answer["next"] is None:
            break
        assert f"page={page + 1}" in answer["next"] and "page_size=3" in answer["next"]
        page += 1
    assert (seen, page) == (kept, 2)
    everything = client.get_all(filters={"user_id": "翻页"}, page=3, page_size=3)
    assert ([r["memory"] for r in everything["results"]], everything["count"]) == ([texts[6]], 7)
    assert client.get_all(filters={"user_id": "翻页"}, page=4, page_size=3)["results"] == []


def test_memory_client_gives_ids_in_filters_as_its_options_ask(mem0_server: ServerThread) -> None:
    # mem0ai 2.x's typed options put the ids in `filters` for add and delete_all, and
    # delete_all sends them as a query parameter written with str() (`{'user_id': '王五'}`):
    # both were refused as if no id had been given.
    from mem0 import MemoryClient
    from mem0.client.types import AddMemoryOptions, DeleteAllMemoryOptions

    client = MemoryClient(api_key=KEY, host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")
    added = client.add("我每天早上喝一杯豆浆", AddMemoryOptions(filters={"user_id": "王五"}, metadata={"类别": "饮食"}))
    assert [(r["memory"], r["user_id"]) for r in added["results"]] == [("我每天早上喝一杯豆浆", "王五")]
    client.add("I run on Sundays", filters={"user_id": "王五", "agent_id": "教练"})
    client.add("赵六喜欢下棋", user_id="赵六")
    assert client.get_all(filters={"user_id": "王五"})["count"] == 2
    assert client.get_all(filters={"AND": [{"user_id": "王五"}, {"agent_id": "教练"}]})["count"] == 1

    forgotten = client.delete_all(DeleteAllMemoryOptions(filters={"user_id": "王五", "agent_id": "教练"}))
    assert forgotten["deleted"] == 1
    assert [m["memory"] for m in client.get_all(filters={"user_id": "王五"})["results"]] == ["我每天早上喝一杯豆浆"]
    assert client.delete_all(filters={"user_id": "王五"})["deleted"] == 1
    assert client.get_all(filters={"user_id": "王五"})["count"] == 0
    assert client.get_all(filters={"user_id": "赵六"})["count"] == 1


def test_memory_client_update_of_time_or_expiry(mem0_server: ServerThread) -> None:
    # The server keeps the time a memory was stored and expires nothing: setting either was
    # answered "text is required", clearing an expiry (there is none) was refused the same way.
    from mem0 import MemoryClient
    from mem0.exceptions import ValidationError

    client = MemoryClient(api_key=KEY, host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")
    memory_id = client.add("周五下午开周会", user_id="钱七")["results"][0]["id"]
    with pytest.raises(ValidationError, match="timestamp: is not supported"):
        client.update(memory_id, text="周四下午开周会", timestamp=1_700_000_000)
    with pytest.raises(ValidationError, match="expiration_date: is not supported"):
        client.update(memory_id, expiration_date="2030-01-01")
    with pytest.raises(ValidationError, match="expiration_date: is not supported"):
        client.add("明天有雨", user_id="钱七", expiration_date="2030-01-01")
    assert client.update(memory_id, expiration_date=None)["memory"] == "周五下午开周会"
    assert [m["memory"] for m in client.get_all(filters={"user_id": "钱七"})["results"]] == ["周五下午开周会"]
    assert [h["event"] for h in client.history(memory_id)] == ["ADD"]


def test_async_memory_client_round_trip(mem0_server: ServerThread) -> None:
    from mem0 import AsyncMemoryClient

    async def run() -> None:
        client = AsyncMemoryClient(api_key=KEY, host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")
        await client.add([{"role": "user", "content": "我对花生过敏"}], filters={"user_id": "孙八"}, metadata={"健康": True})
        found = await client.search("过敏", filters={"AND": [{"user_id": "孙八"}, {"健康": True}]}, top_k=3)
        assert [r["memory"] for r in found["results"]] == ["我对花生过敏"]
        memory_id = found["results"][0]["id"]
        assert (await client.update(memory_id, text="我对花生和芝麻过敏"))["memory"] == "我对花生和芝麻过敏"
        assert [h["event"] for h in await client.history(memory_id)] == ["ADD", "UPDATE"]
        assert (await client.delete_all(filters={"user_id": "孙八"}))["deleted"] == 1
        assert (await client.get_all(filters={"user_id": "孙八"}))["count"] == 0
        await client.async_client.aclose()

    asyncio.run(run())


def test_memory_client_narrowing_options_the_server_cannot_apply_are_refused(mem0_server: ServerThread) -> None:
    # get_all's start_date / end_date and categories were ignored: the answer held memories
    # the caller had excluded, with nothing saying so.
    from mem0 import MemoryClient
    from mem0.exceptions import ValidationError

    client = MemoryClient(api_key=KEY, host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")
    client.add("去年的旅行计划", user_id="吴十")
    for options, field in (({"start_date": "2030-01-01"}, "start_date"), ({"end_date": "2000-01-01"}, "end_date"),
                           ({"categories": ["travel"]}, "categories")):
        with pytest.raises(ValidationError, match=f"{field}: is not supported"):
            client.get_all(filters={"user_id": "吴十"}, **options)
    with pytest.raises(ValidationError, match="categories: is not supported"):
        client.search("旅行", filters={"user_id": "吴十"}, categories=["travel"])
    assert client.get_all(filters={"user_id": "吴十"})["count"] == 1


def test_memory_client_delete_linked_forgets_the_chain(mem0_server: ServerThread) -> None:
    # delete(id, delete_linked=True) was taken as a plain delete: the older memories the current
    # one superseded stayed, and resurfaced in searches once it was gone.
    from mem0 import MemoryClient

    client = MemoryClient(api_key=KEY, host=f"http://127.0.0.1:{mem0_server.running.mem0_rest_port}")

    def add(text: str, linked: list[str]) -> str:
        return str(client.add(text, user_id="郑十一", metadata={"linked_memory_ids": linked})["results"][0]["id"])

    oldest = add("我住在北京", [])
    older = add("我搬到了上海", [oldest, "00000000-0000-0000-0000-000000000000"])
    current = add("我现在住在深圳", [older, oldest])
    other = add("我喜欢爬山", [])
    keeps = add("我养了一只猫", [other])

    assert client.delete(keeps) == {"message": "Memory deleted successfully!"}
    assert client.get(other)["memory"] == "我喜欢爬山"
    answer = client.delete(current, delete_linked=True)
    assert [m["memory"] for m in client.get_all(filters={"user_id": "郑十一"})["results"]] == ["我喜欢爬山"]
    assert answer == {"message": "Memory deleted successfully!", "deleted": 3}
