"""Lists keyed by text come back in code point order (UTF-8 byte order) on PostgreSQL whatever
the database's collation, as on SQLite: a database created with `en_US.UTF-8` (the default of
many PostgreSQL installations) sorts `a`, `A`, `_x`, `-y` by its language rules instead.

The machine's PostgreSQL has no ICU and the machine no `en_US` locale, so the test compiles one
with glibc's `localedef` into a directory of its own and points the server at it (`LOCPATH`)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from agentscope_memory.client import AsyncMemoryClient, AsyncPoolClient
from agentscope_memory.client.scopes import AsyncScopeClient

# Mixed case, punctuation a language collation weighs differently, Latin-1, Chinese.
KEYS = ["b", "A", "a", "B", "Z", "_x", "-y", "a-b", "ab", "a b", "ä", "会话", "中文", "z1", "Z0"]


@pytest.fixture(scope="module")
def en_us_dsn() -> Iterator[str]:
    from conftest import missing_dependency, private_postgres

    if shutil.which("localedef") is None or not Path("/usr/share/i18n/locales/en_US").exists():
        missing_dependency("glibc's localedef and its en_US source compile the test's en_US.UTF-8 locale")
    # Readable by the server's own user (pytest's temporary directories are not).
    locales = Path(tempfile.mkdtemp(prefix="asm-locales-"))
    locales.chmod(0o755)
    subprocess.run(["localedef", "-i", "en_US", "-f", "UTF-8", str(locales / "en_US.UTF-8")], check=True,
                   capture_output=True, timeout=120)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LOCPATH", str(locales))  # inherited by pg_ctl, so by the server
        servers = private_postgres()
        server: Any = next(servers)
    try:
        import psycopg

        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE en_us TEMPLATE template0 LOCALE 'en_US.UTF-8'")
        with psycopg.connect(server.dsn("en_us")) as conn:
            # The premise: this database's own order is not code point order.
            rows = conn.execute("SELECT x FROM unnest(%s::text[]) AS t(x) ORDER BY x", (KEYS,)).fetchall()
            assert [r[0] for r in rows] != sorted(KEYS)
        yield server.dsn("en_us")
    finally:
        next(servers, None)
        shutil.rmtree(locales, ignore_errors=True)


async def test_lists_page_in_code_point_order_under_a_language_collation(server_factory, en_us_dsn) -> None:
    await _lists_in_code_point_order(await server_factory(store="postgres", postgres_dsn=en_us_dsn,
                                                          long_term_enabled=False))


async def test_sqlite_gives_the_same_order(server_factory) -> None:
    await _lists_in_code_point_order(await server_factory(long_term_enabled=False))


async def _lists_in_code_point_order(server: Any) -> None:
    async with AsyncMemoryClient(server.address) as memories, AsyncPoolClient(server.address) as pools, \
            AsyncScopeClient(server.address) as scopes:
        await memories.create_memory("父")
        for key in KEYS:
            await scopes.create_child("父", key)
            await pools.write("池", key, {"k": key})
        # Pages of two: each page resumes after the last id of the one before.
        assert [m.memory_id async for m in memories.list_memories(page_size=2)] == sorted(KEYS + ["父"])
        assert [e.key async for e in pools.iter_entries("池", page_size=2)] == sorted(KEYS)
        assert [c async for c in scopes.iter_children("父", page_size=2)] == sorted(KEYS)
