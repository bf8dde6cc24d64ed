"""Forget (with dry run), RestoreLongTermMemory, PurgeLongTermMemories and the scheduled
forgetting over real gRPC: English and Chinese memories, tenants, bad input, and two replicas
on one PostgreSQL running the scheduler."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from agentscope_memory.client.lifecycle_reflect import AsyncReflectionClient, ReflectionClient
from agentscope_memory.client.long_term import AsyncLongTermClient
from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole

ALICE = Scope(agent_name="助手", user_id="alice")
KEYS = {"tenant-a-key-0000001": "tenant-a", "tenant-b-key-0000001": "tenant-b"}


async def record(address: str, texts: list[str], key: str | None = None) -> dict[str, str]:
    async with AsyncLongTermClient(address, api_key=key) as ltm:
        stored = []
        for text in texts:  # one round each: no lexical neighbours between them
            stored += await ltm.record(ALICE, [Msg.create(MsgRole.USER, text)])
    return {i.text: i.id for i in stored}


async def test_forget_dry_run_restore_and_purge(server) -> None:
    ids = await record(server.address, ["I usually take the 8:15 train.", "我周末常去爬山。"])
    async with AsyncReflectionClient(server.address) as life, AsyncLongTermClient(server.address) as ltm:
        # Fresh memories keep 0.5 + 0.5 * importance of their retention: a high threshold takes them.
        dry = await life.forget(ALICE, dry_run=True, threshold=0.99)
        assert dry.dry_run and dry.scanned == 2
        assert {f.item.text for f in dry.forgotten} == set(ids)
        assert all(0.5 <= f.retention < 0.99 for f in dry.forgotten)
        assert len(await ltm.list(ALICE)) == 2
        assert (await life.forget(ALICE)).forgotten == []  # at the default threshold nothing has faded

        done = await life.forget(ALICE, threshold=0.99, max_results=1)
        assert len(done.forgotten) == 1 and done.total == 2 and not done.dry_run
        assert await ltm.list(ALICE) == []
        climb = ids["我周末常去爬山。"]
        assert (await ltm.history(climb))[-1].event == "FORGET"

        restored = await life.restore(climb)
        assert restored.text == "我周末常去爬山。"
        assert [i.id for i in await ltm.list(ALICE)] == [climb]
        with pytest.raises(FailedPreconditionError, match="not deleted"):
            await life.restore(climb)

        train = ids["I usually take the 8:15 train."]
        assert await life.purge([train, climb]) == [train]  # the restored one is live: left alone
        with pytest.raises(NotFoundError):
            await life.restore(train)
        assert [h.event for h in await ltm.history(train)][-2:] == ["FORGET", "PURGE"]


async def test_forget_answer_fits_a_stock_client(server) -> None:
    # 80 memories with 64 KB of metadata each: the forgotten list (default max_results 100) was
    # 5 MB, so a stock client got RESOURCE_EXHAUSTED after they were forgotten.
    scope = Scope(user_id="big-metadata")
    async with AsyncLongTermClient(server.address) as ltm, AsyncReflectionClient(server.address) as life:
        await ltm.record(scope, [Msg.create(MsgRole.USER, f"note {i} about tomatoes") for i in range(80)],
                         {"blob": "m" * 65_000})
        dry = await life.forget(scope, dry_run=True, threshold=0.99)
        assert dry.total == 80 and 50 < len(dry.forgotten) < 80
        retentions = [f.retention for f in dry.forgotten]
        assert retentions == sorted(retentions)
        done = await life.forget(scope, threshold=0.99)
        assert done.total == 80 and 50 < len(done.forgotten) < 80
        assert await ltm.list(scope) == []


async def test_bad_input_names_the_field(server) -> None:
    async with AsyncReflectionClient(server.address) as life:
        for overrides, field in (({"threshold": 2.0}, "threshold"), ({"base_retention": 1.0}, "base_retention"),
                                 ({"strengthening_factor": 0.5}, "strengthening_factor"),
                                 ({"excluded_types": ["备忘"]}, "excluded_types"), ({"max_results": 5000}, "max_results")):
            with pytest.raises(InvalidArgumentError, match=field):
                await life.forget(ALICE, **overrides)
        with pytest.raises(InvalidArgumentError, match="scope"):
            await life.forget(Scope())
        with pytest.raises(InvalidArgumentError, match="id"):
            await life.restore("")
        with pytest.raises(InvalidArgumentError, match="ids"):
            await life.purge([])
        with pytest.raises(InvalidArgumentError, match=r"ids\[1\]"):
            await life.purge(["ok", "a/../b" * 100])


async def test_tenants_cannot_reach_each_others_memories(server_factory) -> None:
    server = await server_factory(api_keys=KEYS)
    a, b = "tenant-a-key-0000001", "tenant-b-key-0000001"
    ids = await record(server.address, ["tenant a remembers the blue door"], key=a)
    (memory_id,) = ids.values()
    async with AsyncReflectionClient(server.address, api_key=a) as life_a, \
            AsyncReflectionClient(server.address, api_key=b) as life_b:
        assert (await life_b.forget(ALICE, threshold=0.99)).forgotten == []
        await life_a.forget(ALICE, threshold=0.99)
        with pytest.raises(NotFoundError):
            await life_b.restore(memory_id)
        assert await life_b.purge([memory_id]) == []
        assert (await life_a.restore(memory_id)).text == "tenant a remembers the blue door"


def test_blocking_client(threaded_server) -> None:
    asyncio.run(record(threaded_server.address, ["The user collects old maps."]))
    with ReflectionClient(threaded_server.address) as life:
        report = life.forget(ALICE, dry_run=True, threshold=0.99)
        assert [f.item.text for f in report.forgotten] == ["The user collects old maps."]


async def wait_forgotten(address: str, memory_id: str, seconds: float = 30.0) -> list[str]:
    async with AsyncLongTermClient(address) as ltm:
        for _ in range(int(seconds * 10)):
            events = [h.event for h in await ltm.history(memory_id)]
            if "FORGET" in events:
                return events
            await asyncio.sleep(0.1)
    raise AssertionError(f"{memory_id} was not forgotten within {seconds} s")


async def test_the_scheduler_forgets_in_the_background_with_metrics(server_factory) -> None:
    server = await server_factory(lifecycle_forgetting_interval_s=1.0, lifecycle_forgetting_threshold=0.99,
                                  metrics_port=0)
    ids = await record(server.address, ["我把伞忘在了咖啡馆。"])
    events = await wait_forgotten(server.address, ids["我把伞忘在了咖啡馆。"])
    assert events.count("FORGET") == 1
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics")).text
    assert 'agentscope_memory_lifecycle_job_memories_total{job="forgetting"} 1.0' in text


@pytest.mark.slow
async def test_two_replicas_on_postgres_forget_once(server_factory, postgres_dsn) -> None:
    settings = dict(store="postgres", postgres_dsn=postgres_dsn, lifecycle_forgetting_interval_s=1.0,
                    lifecycle_forgetting_threshold=0.99)
    first = await server_factory(**settings)
    second = await server_factory(**settings)
    ids = await record(first.address, ["replica test: the spare key is under the mat", "备用钥匙在门垫下面"])
    for memory_id in ids.values():
        events = await wait_forgotten(second.address, memory_id)
        assert events.count("FORGET") == 1
    await asyncio.sleep(2.5)  # more slots pass on both replicas: still one FORGET each
    async with AsyncLongTermClient(first.address) as ltm:
        for memory_id in ids.values():
            assert [h.event for h in await ltm.history(memory_id)].count("FORGET") == 1
