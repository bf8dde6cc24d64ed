"""Two processes on one SQLite data directory (a server and a local-mode program beside it, as
the README allows): each one's long-term searches see what the other recorded, updated and
deleted in a scope it has searched already, at its next search. Each process keeps a scope's
index from its first search; the scope's generation (stamped by the store's triggers) tells it
which rows changed since."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole

SCOPE = Scope(agent_name="助手", user_id="小明")

# The local-mode program: one JSON command a line on stdin, one JSON answer a line on stdout,
# so the test interleaves its steps with the server's.
_LOCAL = r"""
import json, sys
from pathlib import Path
from agentscope_memory.client import LongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings

scope = Scope(agent_name="助手", user_id="小明")
with LongTermClient.local(ServiceSettings(data_dir=Path(sys.argv[1]))) as ltm:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        op = json.loads(line)
        if op["op"] == "record":
            answer = [i.id for i in ltm.record(scope, [Msg.create(MsgRole.USER, op["text"])])]
        elif op["op"] == "search":
            found = ltm.search(scope, op["query"], top_k=10, ranking=op.get("ranking", ""))
            answer = [[i.id, i.text] for i in found]
        elif op["op"] == "update":
            answer = ltm.update(op["id"], op["text"]).text
        elif op["op"] == "delete":
            answer = ltm.delete(op["id"])
        else:
            break
        print(json.dumps(answer, ensure_ascii=False), flush=True)
"""


class LocalProgram:
    def __init__(self, data_dir: Path) -> None:
        self._process = subprocess.Popen([sys.executable, "-c", _LOCAL, str(data_dir)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True, encoding="utf-8")
        assert self._read() == {"ready": True}

    def _read(self) -> Any:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        assert line, f"the local-mode program ended (exit {self._process.poll()})"
        return json.loads(line)

    def __call__(self, op: str, **args: Any) -> Any:
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"op": op, **args}, ensure_ascii=False) + "\n")
        self._process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(60)


def _ids(found: list[Any]) -> list[str]:
    """The ids of a search's results, from either process."""
    return [f[0] if isinstance(f, list) else f.id for f in found]


async def _searched_by_both(ltm: AsyncLongTermClient, data: Path) -> tuple[str, LocalProgram]:
    """A memory of 小明's scope, searched by the server and then by a local-mode program: each
    has built its index of the scope before the other writes."""
    [milk] = await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "小明每天早上喝牛奶。")])
    assert milk.id in _ids(await ltm.search(SCOPE, "牛奶"))
    local = LocalProgram(data)
    assert milk.id in _ids(local("search", query="牛奶"))
    return milk.id, local


async def test_a_memory_recorded_by_either_is_found_by_the_others_next_search(server_factory, tmp_path) -> None:
    server = await server_factory(data_dir=tmp_path / "data")
    async with AsyncLongTermClient(server.address) as ltm:
        milk, local = await _searched_by_both(ltm, tmp_path / "data")
        try:
            [peanut] = local("record", text="小明对花生过敏。")
            assert peanut in _ids(await ltm.search(SCOPE, "花生过敏"))
            assert peanut in _ids(await ltm.search(SCOPE, "花生", ranking="lexical"))
            [cat] = await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "小明养了一只橘猫，名叫团子。")])
            assert cat.id in _ids(local("search", query="橘猫团子"))
            assert cat.id in _ids(local("search", query="团子", ranking="lexical"))
            # Each process's own writes are still found by its own searches.
            assert peanut in _ids(local("search", query="花生", ranking="lexical"))
            assert cat.id in _ids(await ltm.search(SCOPE, "团子", ranking="lexical"))
        finally:
            local.close()


async def test_updates_and_deletes_by_either_are_seen_by_the_others_next_search(server_factory, tmp_path) -> None:
    server = await server_factory(data_dir=tmp_path / "data")
    async with AsyncLongTermClient(server.address) as ltm:
        [peanut] = await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "小明对花生过敏。")])
        [cat] = await ltm.record(SCOPE, [Msg.create(MsgRole.USER, "小明养了一只橘猫，名叫团子。")])
        milk, local = await _searched_by_both(ltm, tmp_path / "data")
        try:
            # Local mode changes a text: the server's search finds it by its new words only.
            assert local("update", id=peanut.id, text="小明对芒果过敏。") == "小明对芒果过敏。"
            assert peanut.id in _ids(await ltm.search(SCOPE, "芒果", ranking="lexical"))
            assert peanut.id not in _ids(await ltm.search(SCOPE, "花生", ranking="lexical"))
            # The server changes a text: the local program finds it by its new words only.
            await ltm.update(cat.id, "小明养了一条柯基犬。")
            assert cat.id in _ids(local("search", query="柯基犬", ranking="lexical"))
            assert cat.id not in _ids(local("search", query="橘猫", ranking="lexical"))
            # A memory deleted by either is not found by the other.
            await ltm.delete(cat.id)
            assert cat.id not in _ids(local("search", query="柯基犬"))
            local("delete", id=milk)
            assert milk not in _ids(await ltm.search(SCOPE, "牛奶"))
            assert _ids(await ltm.search(SCOPE, "芒果")) == [peanut.id]
            assert _ids(local("search", query="芒果")) == [peanut.id]
        finally:
            local.close()
