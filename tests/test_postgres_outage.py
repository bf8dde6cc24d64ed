"""PostgreSQL restarting or unreachable while a server on it runs: calls fail UNAVAILABLE with a
message naming the database (never INTERNAL, never a hang to the caller's deadline), nothing is
half-written, and the server uses the database again as soon as it is back."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from typing import Any, Iterator

import pytest

from agentscope_memory.agent_state.engine import Slot
from agentscope_memory.client import AsyncAgentStateClient, AsyncMemoryClient, AsyncPoolClient
from agentscope_memory.errors import UnavailableError
from agentscope_memory.message import Msg, MsgRole


@pytest.fixture
def own_postgres() -> Iterator[Any]:
    """A PostgreSQL of this test's own: the test stops and starts it."""
    from conftest import private_postgres

    yield from private_postgres()


async def _texts(client: AsyncMemoryClient, memory_id: str) -> list[str | None]:
    return [m.text_content for m in await client.get_messages(memory_id)]


async def test_a_postgres_restart_while_the_server_idles_costs_no_call(server_factory, own_postgres) -> None:
    server = await server_factory(store="postgres", postgres_dsn=own_postgres.create_database("outage"))
    # No retries: a failed call must show, not be ridden out by the client.
    memory = AsyncMemoryClient(server.address, retries=0)
    state = AsyncAgentStateClient(server.address, retries=0)
    pools = AsyncPoolClient(server.address, retries=0)
    try:
        await memory.create_memory("会话")
        await memory.add_message("会话", Msg.create(MsgRole.USER, "before"))
        # Calls at once, so that the pool holds several connections, all dead after the restart.
        await asyncio.gather(*(memory.get_messages("会话") for _ in range(8)))
        version = (await memory.get_memory("会话")).version

        own_postgres.halt("fast")
        own_postgres.start()

        assert await memory.add_message("会话", Msg.create(MsgRole.USER, "after")) == 2
        assert await _texts(memory, "会话") == ["before", "after"]
        assert (await memory.get_memory("会话")).version == version + 1
        assert await state.put_value(Slot("用户", "s"), "k", '{"n": 1}') == 1
        assert (await pools.write("团队", "k", [1, 2])).sequence == 1
    finally:
        for client in (memory, state, pools):
            await client.close()


@pytest.mark.slow
async def test_postgres_down_answers_unavailable_and_the_server_recovers_when_it_is_back(
        server_factory, own_postgres) -> None:
    server = await server_factory(store="postgres", postgres_dsn=own_postgres.create_database("outage"))
    memory = AsyncMemoryClient(server.address, retries=0)
    state = AsyncAgentStateClient(server.address, retries=0)
    try:
        await memory.create_memory("m")
        await memory.add_message("m", Msg.create(MsgRole.USER, "one"))
        version = (await memory.get_memory("m")).version

        own_postgres.halt("immediate")
        with pytest.raises(UnavailableError, match="PostgreSQL is unavailable"):
            await memory.add_message("m", Msg.create(MsgRole.USER, "lost"))
        with pytest.raises(UnavailableError, match="PostgreSQL is unavailable"):
            await state.get_value(Slot("u", "s"), "k")

        own_postgres.start()
        assert await memory.add_message("m", Msg.create(MsgRole.USER, "two")) == 2
        # The refused write left nothing behind: no message, no version step.
        assert await _texts(memory, "m") == ["one", "two"]
        assert (await memory.get_memory("m")).version == version + 1
        assert await state.put_value(Slot("u", "s"), "k", "1", expected_version=0) == 1
    finally:
        await memory.close()
        await state.close()


@pytest.mark.slow
def test_a_server_started_before_its_database_waits_for_it(tmp_path, own_postgres) -> None:
    from conftest import ServerProcess

    dsn = own_postgres.create_database("late")
    own_postgres.halt("fast")
    config = tmp_path / "replica.toml"
    config.write_text(f'store = "postgres"\npostgres_dsn = "{dsn}"\n')
    (tmp_path / "data").mkdir()
    # Started while the database is down; ServerProcess waits for it to turn healthy.
    starter = threading.Timer(3.0, own_postgres.start)
    starter.start()
    try:
        server = ServerProcess(tmp_path / "data", None, "--config", str(config))
    finally:
        starter.join()
    try:
        assert server.proc.poll() is None
    finally:
        server.close()


@pytest.mark.slow
def test_a_server_whose_database_never_comes_says_so_and_exits(tmp_path) -> None:
    from conftest import VENV_BIN, free_port

    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere"
    done = subprocess.run([str(VENV_BIN / "agentscope-memory"), "serve", "--port", "0", "--data-dir", str(tmp_path),
                           "--store", "postgres", "--postgres-dsn", dsn],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("agentscope-memory: PostgreSQL is unavailable: no database connection within 10 s")
    assert "Traceback" not in done.stderr
