"""JsonSession in Python: AgentScope-Java 1.0.12's on-disk layout, made safe."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import Msg, MsgRole, msg_from_dict, msg_to_dict, msg_to_json
from agentscope_memory.session import JsonSession, SessionFileError, session_dir_name

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize(
    ("session_id", "directory"),
    [("user_1", "user_1"), ("we/ird id", "d2UvaXJkIGlk"), ("用户1", "55So5oi3MQ"),
     ('{"tenant":"t1","user":"u1"}', "eyJ0ZW5hbnQiOiJ0MSIsInVzZXIiOiJ1MSJ9"), ("a.b-c_d", "a.b-c_d")],
)
def test_directory_names_match_java(session_id: str, directory: str) -> None:
    assert session_dir_name(session_id) == directory


@pytest.mark.parametrize(("session_id", "directory"), [(".", "Lg"), ("..", "Li4")])
def test_dot_ids_are_encoded_and_never_escape_the_root(tmp_path: Path, session_id: str, directory: str) -> None:
    # Deliberate difference from Java, which resolves ".." to the root's parent.
    session = JsonSession(tmp_path / "root")
    session.save_list(session_id, "memory_messages", [])
    assert (tmp_path / "root" / directory / "memory_messages.jsonl").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    session.delete(session_id)  # in Java, delete(".") wipes every session
    assert session.list_session_dirs() == []
    assert (tmp_path / "root").is_dir()


@pytest.mark.parametrize("key", ["../../x", "a/b", "..", ".", "", "x\x00", "with space"])
def test_state_keys_cannot_name_paths(tmp_path: Path, key: str) -> None:
    session = JsonSession(tmp_path)
    with pytest.raises(InvalidArgumentError, match="key"):
        session.save("s", key, {"a": 1})
    with pytest.raises(InvalidArgumentError):
        session.save_list("s", key, [])
    assert list(tmp_path.rglob("*.json*")) == []


def test_blank_session_ids_are_rejected(tmp_path: Path) -> None:
    for bad in ("", "  ", "\t\n"):
        with pytest.raises(InvalidArgumentError, match="session_id"):
            JsonSession(tmp_path).save(bad, "k", 1)


def test_writes_the_exact_files_java_writes(tmp_path: Path) -> None:
    session = JsonSession(tmp_path)
    session.save("user_1", "agent_meta", {"id": "id1", "name": "Assistant", "description": "desc", "systemPrompt": "sys"})
    session.save("user_1", "toolkit_activeGroups", {"activeGroups": ["g1"]})
    golden = GOLDEN / "user_1"
    messages = [line for line in (golden / "memory_messages.jsonl").read_text().splitlines()]
    session.save_list("user_1", "memory_messages", [msg_to_dict(msg_from_dict(json.loads(m))) for m in messages])
    for name in ("agent_meta.json", "toolkit_activeGroups.json", "memory_messages.jsonl"):
        assert (tmp_path / "user_1" / name).read_bytes() == (golden / name).read_bytes(), name


def test_reads_a_directory_java_wrote(tmp_path: Path) -> None:
    shutil.copytree(GOLDEN / "user_1", tmp_path / "user_1")
    session = JsonSession(tmp_path)
    assert session.exists("user_1") and session.list_session_dirs() == ["user_1"]
    assert session.get("user_1", "agent_meta")["systemPrompt"] == "sys"
    msgs = [msg_from_dict(i) for i in session.get_list("user_1", "memory_messages")]
    assert [(m.id, m.role, m.text_content) for m in msgs] == [("a", MsgRole.USER, "one"), ("b", MsgRole.ASSISTANT, "two")]
    assert session.get("user_1", "missing") is None and session.get_list("user_1", "missing") == []
    assert ("memory_messages", "list") in session.keys("user_1")


def test_growing_list_is_appended_not_rewritten(tmp_path: Path) -> None:
    session = JsonSession(tmp_path)
    msgs = [msg_to_dict(Msg.create(MsgRole.USER, str(i))) for i in range(3)]
    session.save_list("s", "memory_messages", msgs[:1])
    path = tmp_path / "s" / "memory_messages.jsonl"
    inode = os.stat(path).st_ino
    session.save_list("s", "memory_messages", msgs)
    assert os.stat(path).st_ino == inode  # appended in place
    assert path.read_text().splitlines() == [msg_to_json(msg_from_dict(m)) for m in msgs]
    assert session.get_list("s", "memory_messages") == msgs


def test_changed_or_shrunk_list_is_rewritten(tmp_path: Path) -> None:
    session = JsonSession(tmp_path)
    items = [{"i": i} for i in range(10)]
    session.save_list("s", "k", items)
    items[1] = {"i": "changed"}  # an unsampled index in Java's hash, which Java would miss
    session.save_list("s", "k", items)
    assert session.get_list("s", "k")[1] == {"i": "changed"}
    session.save_list("s", "k", items[:3])
    assert session.get_list("s", "k") == items[:3]
    session.save_list("s", "k", [])
    assert session.get_list("s", "k") == [] and (tmp_path / "s" / "k.hash").read_text() == "empty:0"


def test_java_written_hash_falls_back_to_comparing_lines(tmp_path: Path) -> None:
    shutil.copytree(GOLDEN / "user_1", tmp_path / "user_1")
    session = JsonSession(tmp_path)
    loaded = session.get_list("user_1", "memory_messages")
    path = tmp_path / "user_1" / "memory_messages.jsonl"
    inode = os.stat(path).st_ino
    session.save_list("user_1", "memory_messages", loaded + [{"id": "c"}])
    assert os.stat(path).st_ino == inode
    assert session.get_list("user_1", "memory_messages")[2] == {"id": "c"}


def test_null_items_are_written_as_null_lines(tmp_path: Path) -> None:
    session = JsonSession(tmp_path)
    session.save_list("s", "k", [{"a": 1}, None])
    assert (tmp_path / "s" / "k.jsonl").read_text() == '{"a":1}\nnull\n'
    assert session.get_list("s", "k") == [{"a": 1}, None]


def test_malformed_and_truncated_files_name_file_and_line(tmp_path: Path) -> None:
    session = JsonSession(tmp_path)
    session.save_list("s", "k", [{"a": 1}, {"b": 2}])
    path = tmp_path / "s" / "k.jsonl"
    path.write_text('{"a":1}\n{"b": oops}\n')
    with pytest.raises(SessionFileError) as err:
        session.get_list("s", "k")
    assert err.value.line == 2 and "k.jsonl:2" in str(err.value) and "not valid JSON" in str(err.value)
    path.write_text('{"a":1}\n{"b":')
    with pytest.raises(SessionFileError, match="truncated") as err:
        session.get_list("s", "k")
    assert err.value.line == 2
    (tmp_path / "s" / "single.json").write_text("{nope")
    with pytest.raises(SessionFileError, match="single.json"):
        session.get("s", "single")


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "k.jsonl").write_text('{"a":1}\n\n  \n{"a":2}\n')
    assert JsonSession(tmp_path).get_list("s", "k") == [{"a": 1}, {"a": 2}]


def test_delete_key_removes_only_the_single_value(tmp_path: Path) -> None:
    session = JsonSession(tmp_path)
    session.save("s", "k", {"v": 1})
    session.save_list("s", "k", [1])
    session.delete_key("s", "k")
    assert session.get("s", "k") is None and session.get_list("s", "k") == [1]
    session.delete("s")
    assert not session.exists("s")
    session.delete("s")  # deleting a missing session is fine
