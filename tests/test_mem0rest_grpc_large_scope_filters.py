"""mem0 REST metadata filters in a scope larger than any candidate cut: the memories that match
rank below a thousand others, and search and list still find every one of them, on sqlite and on
PostgreSQL (the scope in a replica's index, or searched in the database itself)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import grpc
import httpx
import numpy as np
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.hybrid import HybridEngine
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store.base import LongTermRow

KEY = "mem0-large-scope-key-0001"
FILLERS = 1100
MATCHING = ["The train to Lyon leaves at nine", "火车九点从里昂出发", "Bring the blue suitcase to the station"]
# Of the same topic, another day: a second filter key leaves it out.
OTHER_DAY = "The train back leaves on Sunday"


@pytest.fixture(params=["sqlite", "postgres-indexed", "postgres-in-database"])
def store_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "sqlite":
        return {}
    settings: dict[str, Any] = {"store": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn")}
    if request.param == "postgres-in-database":
        # A scope over the index budget is searched by PostgreSQL (pgvector, tsvector).
        settings["long_term_index_max_vectors"] = 100
    return settings


def _row(scope: Scope, text: str, vector: np.ndarray, metadata: dict[str, Any], created: float, model: str) -> LongTermRow:
    return LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(scope), agent_name=scope.agent_name,
                       user_id=scope.user_id, run_name=scope.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                       metadata=metadata, created=created, updated=created, last_accessed=created,
                       content_hash=content_hash(text), embedding=vector.astype(np.float32).tobytes(),
                       embedding_model=model)


async def _fill(engine: HybridEngine, scope: Scope) -> None:
    """A thousand-odd memories about green tea (what the query asks), then the few that match
    the filter, about something else and stored last (what a list reaches last)."""
    await engine.open()
    tea, *other = await engine.embed(["I like green tea", *MATCHING, OTHER_DAY])
    start = time.time() - 10_000
    rows = [_row(scope, f"I like green tea, cup {i}", tea, {"topic": "tea"}, start + i, engine.embedding_model)
            for i in range(FILLERS)]
    rows += [_row(scope, text, vector, {"topic": "trip", "day": 3 if text in MATCHING else 7, "stops": ["里昂", "Lyon"]},
                  start + FILLERS + i, engine.embedding_model)
             for i, (text, vector) in enumerate(zip([*MATCHING, OTHER_DAY], other, strict=True))]

    def write(tx: Any) -> None:
        tx.ltm_register_scope(scope_key(scope), scope.agent_name, scope.user_id, scope.run_name, time.time())
        tx.ltm_insert(rows)

    await engine._store.run("t-large", write)


async def test_filters_find_the_matching_memories_of_a_large_scope(server_factory, store_settings) -> None:
    server = await server_factory(mem0_rest_port=0, api_keys={KEY: "t-large"}, **store_settings)
    engine = server.service.long_term
    assert isinstance(engine, HybridEngine)
    await _fill(engine, Scope(user_id="旅行者"))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"Authorization": f"Token {KEY}"}, timeout=120) as rest:
        for path in ("/search", "/v2/memories/search/", "/v3/memories/search/"):
            found = await rest.post(path, json={"query": "green tea", "user_id": "旅行者",
                                                "filters": {"topic": "trip"}, "top_k": 5})
            assert found.status_code == 200, found.text
            hits = found.json() if path.startswith("/v2/") else found.json()["results"]
            assert sorted(h["memory"] for h in hits) == sorted([*MATCHING, OTHER_DAY]), path
        # Two filter keys, one of them a number: both must hold.
        both = await rest.post("/search", json={"query": "green tea", "filters": {"user_id": "旅行者", "topic": "trip",
                                                                                   "day": 3}, "top_k": 5})
        assert sorted(h["memory"] for h in both.json()["results"]) == sorted(MATCHING)
        # The unfiltered search of the same scope is still led by what it asks for.
        plain = await rest.post("/search", json={"query": "green tea", "user_id": "旅行者", "top_k": 3})
        assert all(h["metadata"]["topic"] == "tea" for h in plain.json()["results"])

        listed = await rest.post("/v3/memories/", json={"filters": {"AND": [{"user_id": "旅行者"}, {"topic": "trip"},
                                                                            {"day": 3}]}})
        assert listed.status_code == 200, listed.text
        assert [m["memory"] for m in listed.json()["results"]] == MATCHING
        assert listed.json()["count"] == len(MATCHING)
        # mem0's numbered pages (query parameters) of the filtered list, and of the whole scope.
        second = (await rest.post("/v3/memories/", params={"page": 2, "page_size": 2},
                                  json={"filters": {"user_id": "旅行者", "topic": "trip", "day": 3}})).json()
        assert ([m["memory"] for m in second["results"]], second["count"], second["next"]) == (MATCHING[2:], 3, None)
        last = (await rest.post("/v3/memories/", params={"page": 12, "page_size": 100},
                                json={"filters": {"user_id": "旅行者"}})).json()
        assert [m["memory"] for m in last["results"]] == [*MATCHING, OTHER_DAY]
        assert (last["count"], last["next"]) == (FILLERS + len(MATCHING) + 1, None) and "page=11" in last["previous"]
        # A list value (as AgentScope-Java sends its metadata) is matched whole, in order.
        for stops, expected in ((["里昂", "Lyon"], 4), (["Lyon", "里昂"], 0), (["Lyon"], 0)):
            filters = {"user_id": "旅行者", "stops": stops}
            listed = (await rest.post("/v3/memories/", json={"filters": filters})).json()
            found = (await rest.post("/search", json={"query": "green tea", "filters": filters, "top_k": 5})).json()
            assert (listed["count"], len(listed["results"]), len(found["results"])) == (expected,) * 3, stops


async def test_a_top_k_above_the_candidate_default_is_served_whole(server_factory, store_settings) -> None:
    # Each leg keeps 50 candidates by default: a larger top_k was cut to 50 results.
    server = await server_factory(mem0_rest_port=0, api_keys={KEY: "t-large"}, **store_settings)
    engine = server.service.long_term
    assert isinstance(engine, HybridEngine)
    await _fill(engine, Scope(user_id="旅行者"))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.mem0_rest_port}",
                                 headers={"Authorization": f"Token {KEY}"}, timeout=120) as rest, \
            AsyncLongTermClient(server.address, api_key=KEY, timeout=120) as ltm:
        found = await rest.post("/search", json={"query": "green tea", "user_id": "旅行者", "top_k": 120})
        assert found.status_code == 200, found.text
        assert len(found.json()["results"]) == 120
        assert len(await ltm.search(Scope(user_id="旅行者"), "green tea", top_k=120)) == 120
        # An explicit candidate count is the caller's choice, and still honoured.
        explicit = pb.SearchLongTermMemoriesRequest(scope=pb.Scope(user_id="旅行者"), query="green tea", top_k=120,
                                                    top_k_semantic=30)
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.LongTermMemoryServiceStub(channel)
            answer = await stub.SearchLongTermMemories(explicit, metadata=(("x-api-key", KEY),))
        assert len(answer.results) == 30
