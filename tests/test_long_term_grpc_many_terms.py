"""A recorded text of very many distinct terms (a long Chinese document: each character pair is a
term) is stored and found alike on sqlite and PostgreSQL, also where PostgreSQL searches a large
scope itself: its tsvector holds at most 1 MiB of distinct terms, and such a text's parts, each
indexed with the two before it, went beyond that (INTERNAL on PostgreSQL, stored on sqlite)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory_server.cli import main

SCOPE = Scope("助手", "用户")


def _document() -> str:
    """Three parts of at most 65,536 random common characters (cut at sentence ends)."""
    rnd = random.Random(7)
    common = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
    return "".join("".join(rnd.choice(common) for _ in range(99)) + "。" for _ in range(1900))


@pytest.fixture(params=["sqlite", "postgres"])
def store_settings(request: pytest.FixtureRequest) -> dict[str, object]:
    if request.param == "postgres":
        # One vector over the index budget: the scope is searched by PostgreSQL (its tsvector).
        return {"store": "postgres", "postgres_dsn": request.getfixturevalue("postgres_dsn"),
                "long_term_index_max_vectors": 1}
    return {}


async def test_a_document_of_many_distinct_terms_is_stored_and_found(server_factory, store_settings) -> None:
    document = _document()
    server = await server_factory(long_term_scoring=False, lifecycle_reflection_enabled=False, **store_settings)
    async with AsyncLongTermClient(server.address, timeout=120) as memories:
        recorded = await memories.record(SCOPE, [Msg.create(MsgRole.USER, document)])
        assert len(recorded) == 3 and "".join(i.text for i in recorded) == document
        assert sorted(i.text for i in await memories.list(SCOPE)) == sorted(i.text for i in recorded)
        # Each part is indexed with the parts before it: the first part's words also find the
        # second, the last part's only the last.
        first = await memories.search(SCOPE, recorded[0].text[-40:-1], ranking="lexical", top_k=3)
        assert recorded[0].id in [r.id for r in first]
        last = await memories.search(SCOPE, recorded[-1].text[-40:-1], ranking="lexical", top_k=1)
        assert [r.id for r in last] == [recorded[-1].id]


async def test_such_a_document_moves_from_sqlite_to_postgres(server_factory, postgres_dsn, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = await server_factory(data_dir=data, long_term_scoring=False, lifecycle_reflection_enabled=False)
    async with AsyncLongTermClient(server.address, timeout=120) as memories:
        recorded = await memories.record(SCOPE, [Msg.create(MsgRole.USER, _document())])
    await server.stop(0)
    assert await asyncio.to_thread(main, ["migrate", "store", "--from", str(data), "--to", postgres_dsn]) == 0
    moved = await server_factory(store="postgres", postgres_dsn=postgres_dsn, data_dir=tmp_path / "pg",
                                 long_term_index_max_vectors=1)
    async with AsyncLongTermClient(moved.address, timeout=120) as memories:
        last = await memories.search(SCOPE, recorded[-1].text[-40:-1], ranking="lexical", top_k=1)
        assert [r.id for r in last] == [recorded[-1].id]
