"""SQLite long-term stores stamp each row change with its scope's generation, as PostgreSQL's
do, so an engine's kept scope index follows what another engine on the same file wrote (another
process: a local-mode program beside a server). A store of the schema before generations gets
them when opened, its memories intact."""

from __future__ import annotations

import sqlite3
import time
import uuid
from pathlib import Path

import pytest

from agentscope_memory.long_term import Scope
from agentscope_memory.long_term.embedder import MiniLMEmbedder
from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine
from agentscope_memory.long_term.hybrid.ranking import RankOptions
from agentscope_memory.long_term.hybrid.records import content_hash, scope_key
from agentscope_memory.long_term.importance import HeuristicScorer
from agentscope_memory.long_term.router import HeuristicRouter
from agentscope_memory.long_term.text import tokenize
from agentscope_memory.store import open_store
from agentscope_memory.store.base import LongTermRow, StoreOpenError

USER = Scope(agent_name="助手", user_id="小明")
FILE = "agentscope-memory.sqlite3"


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


async def _engine(data: Path, embedder: MiniLMEmbedder) -> HybridEngine:
    engine = HybridEngine(open_store("sqlite", data), lambda: embedder, scorer=HeuristicScorer(),
                          router=HeuristicRouter(), settings=EngineSettings(scoring=False))
    await engine.open()
    return engine


async def _close(engine: HybridEngine) -> None:
    await engine.close()
    await engine._store.close()


def _fact(text: str) -> LongTermRow:
    now = time.time()
    return LongTermRow(memory_id=str(uuid.uuid4()), scope_key=scope_key(USER), agent_name=USER.agent_name,
                       user_id=USER.user_id, run_name=USER.run_name, text=text, lex_terms=" ".join(tokenize(text)),
                       memory_type="fact", importance=0.6, importance_method="user", created=now, updated=now,
                       last_accessed=now, content_hash=content_hash(text))


async def _found(engine: HybridEngine, query: str) -> list[str]:
    found, _ = await engine.search_ranked("t", USER, query, touch=False)
    return [i.id for i in found]


def _generation_schema(path: Path) -> tuple[set[str], set[str]]:
    """The generation columns (table names holding one) and the stamping triggers of the file."""
    with sqlite3.connect(path) as conn:
        columns = {t for t in ("ltm", "ltm_scopes")
                   if "generation" in {r[1] for r in conn.execute(f"PRAGMA table_info({t})")}}
        triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    return columns, triggers


def _to_schema_before_generations(path: Path) -> None:
    """The file as a release before SQLite generations left it: no generation columns, no triggers."""
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER IF EXISTS ltm_stamp_insert")
        conn.execute("DROP TRIGGER IF EXISTS ltm_stamp_update")
        conn.execute("DROP INDEX IF EXISTS ltm_by_generation")
        for table in ("ltm", "ltm_scopes"):
            if "generation" in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
                conn.execute(f"ALTER TABLE {table} DROP COLUMN generation")
    assert _generation_schema(path) == (set(), set())


async def test_two_engines_on_one_file_each_see_the_others_changes(tmp_path, embedder) -> None:
    first = await _engine(tmp_path, embedder)
    second = await _engine(tmp_path, embedder)
    try:
        (milk,) = await first.insert("t", USER, [_fact("小明每天早上喝牛奶。")])
        assert await _found(first, "牛奶") == [milk.memory_id]
        assert await _found(second, "牛奶") == [milk.memory_id]
        (peanut,) = await second.insert("t", USER, [_fact("小明对花生过敏。")])
        assert peanut.memory_id in await _found(first, "花生过敏")
        await first.update("t", peanut.memory_id, text="小明对芒果过敏。")
        found, _ = await second.search_ranked("t", USER, "芒果", touch=False)
        assert found[0].id == peanut.memory_id and found[0].text == "小明对芒果过敏。"
        await second.delete("t", milk.memory_id)
        assert milk.memory_id not in await _found(first, "牛奶")
    finally:
        await _close(first)
        await _close(second)


async def test_a_store_from_before_sqlite_generations_gets_them_when_opened(tmp_path, embedder) -> None:
    engine = await _engine(tmp_path, embedder)
    (birthday,) = await engine.insert("t", USER, [_fact("小明的生日是三月五日。")])
    await _close(engine)
    _to_schema_before_generations(tmp_path / FILE)

    reopened = await _engine(tmp_path, embedder)
    other = await _engine(tmp_path, embedder)
    try:
        assert _generation_schema(tmp_path / FILE) == (
            {"ltm", "ltm_scopes"}, {"ltm_stamp_insert", "ltm_stamp_update"})
        # The memories written before are there, found by search, at generation 0.
        assert await _found(reopened, "生日") == [birthday.memory_id]
        got = await reopened.get("t", birthday.memory_id)
        assert got.text == "小明的生日是三月五日。"
        # And the migrated store follows another engine's writes.
        (peanut,) = await other.insert("t", USER, [_fact("小明对花生过敏。")])
        assert peanut.memory_id in await _found(reopened, "花生过敏")
        # The triggers are in the file: a writer that knows nothing of generations (a program
        # of an earlier release, changing a text as its update did) is followed as well.
        text = "小明的生日在国庆节。"
        with sqlite3.connect(tmp_path / FILE) as conn:
            conn.execute("UPDATE ltm SET text = ?, lex_terms = ?, content_hash = ? WHERE memory_id = ?",
                         (text, " ".join(tokenize(text)), content_hash(text), birthday.memory_id))
        lexical = RankOptions(ranking="lexical")
        found, _ = await reopened.search_ranked("t", USER, "国庆", lexical, touch=False)
        assert [(i.id, i.text) for i in found] == [(birthday.memory_id, text)]
        found, _ = await reopened.search_ranked("t", USER, "三月五", lexical, touch=False)
        assert found == []
    finally:
        await _close(reopened)
        await _close(other)
    # Opening it again changes nothing more (the schema is applied at every start).
    again = await _engine(tmp_path, embedder)
    try:
        assert set(await _found(again, "小明")) == {birthday.memory_id, peanut.memory_id}
        assert (await again.get("t", birthday.memory_id)).text == "小明的生日在国庆节。"
    finally:
        await _close(again)


async def test_a_store_of_a_newer_schema_is_left_alone(tmp_path, embedder) -> None:
    engine = await _engine(tmp_path, embedder)
    await engine.insert("t", USER, [_fact("小明的生日是三月五日。")])
    await _close(engine)
    _to_schema_before_generations(tmp_path / FILE)
    with sqlite3.connect(tmp_path / FILE) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreOpenError, match="newer"):
        open_store("sqlite", tmp_path)
    assert _generation_schema(tmp_path / FILE) == (set(), set())
