"""JsonFileAgentStateStore's layout (AgentScope-Java 2.0.0), as observed from the real store; the
Java test JsonFileLayoutTest compares whole directories byte for byte."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentscope_memory.agent_state.json_files import (
    SlotFiles,
    compact,
    dir_name,
    pretty,
    read_slot,
    write_slot,
)
from agentscope_memory.errors import InvalidArgumentError

# What 2.0.0's JsonFileAgentStateStore wrote for a message (toPrettyJson), observed 2026-11-23.
COMPACT = ('{"id":"m2","name":"a","role":"ASSISTANT","content":[{"type":"text","text":"hi"}],'
           '"metadata":{"arr":[1,2],"e":[],"f":0.5,"n":1,"o":{}},"timestamp":"2026-11-22 18:42:43.000","usage":null}')
PRETTY = """{
  "id" : "m2",
  "name" : "a",
  "role" : "ASSISTANT",
  "content" : [ {
    "type" : "text",
    "text" : "hi"
  } ],
  "metadata" : {
    "arr" : [ 1, 2 ],
    "e" : [ ],
    "f" : 0.5,
    "n" : 1,
    "o" : { }
  },
  "timestamp" : "2026-11-22 18:42:43.000",
  "usage" : null
}"""


def test_pretty_is_jacksons_layout_and_compact_undoes_it() -> None:
    assert pretty(COMPACT) == PRETTY
    assert compact(PRETTY) == COMPACT
    tricky = '{"t":"a \\" , : { [ \\\\","n":1.0E-7,"u":"\\u0001 中文"}'
    assert compact(pretty(tricky)) == tricky


def test_directory_names_as_java_derives_them() -> None:
    assert dir_name("s1") == "s1"
    assert dir_name("s 2/x") == "cyAyL3g"
    assert dir_name("会话") == "5Lya6K-d"
    assert dir_name("..") == "Li4"


def test_a_slot_round_trips_through_files(tmp_path: Path) -> None:
    files = SlotFiles(values={"agent_state": COMPACT}, lists={"memory_messages": [COMPACT, "1"], "nothing": []})
    directory = write_slot(tmp_path, "", "s 2/x", files)
    assert directory == tmp_path / "__anon__" / "cyAyL3g"
    assert (directory / "agent_state.json").read_text(encoding="utf-8") == PRETTY
    assert (directory / "memory_messages.jsonl").read_text(encoding="utf-8") == COMPACT + "\n1\n"
    assert (directory / "nothing.hash").read_text() == "empty:0" and not (directory / "nothing.jsonl").exists()
    assert read_slot(tmp_path, "  ", "s 2/x") == files
    with pytest.raises(InvalidArgumentError):
        write_slot(tmp_path, "u", "s", SlotFiles(values={"../x": "{}"}))


def test_keys_are_file_names_as_java_writes_them(tmp_path: Path) -> None:
    # JsonFileAgentStateStore writes `<key>.json` for any key (`偏好 设置.json`, `.隐藏.json`);
    # the export refused all but [a-zA-Z0-9_.-] keys, and the import skipped a leading dot.
    files = SlotFiles(values={"偏好 设置": COMPACT, ".隐藏": "{}", "a.b": "1"}, lists={"消息": ["1", "2"]})
    directory = write_slot(tmp_path, "u", "s", files)
    assert sorted(p.name for p in directory.iterdir()) == [".隐藏.json", "a.b.json", "偏好 设置.json", "消息.hash", "消息.jsonl"]
    assert (directory / "偏好 设置.json").read_text(encoding="utf-8") == PRETTY
    assert read_slot(tmp_path, "u", "s") == files
    # A key holding '/' is no file name: refused before anything is written.
    with pytest.raises(InvalidArgumentError, match="key"):
        write_slot(tmp_path, "u", "t", SlotFiles(values={"ok": "{}"}, lists={"a/b": ["1"]}))
    assert not (tmp_path / "u" / "t").exists()


def test_the_empty_key_is_files_named_by_their_suffix_alone(tmp_path: Path) -> None:
    # JsonFileAgentStateStore names the files `key + ".json"` etc., so the empty key's are
    # `.json`, `.jsonl` and `.hash`; pathlib reads those as suffix-less hidden files, and the
    # import skipped them.
    files = SlotFiles(values={"": COMPACT, " ": "1", ".": "2"}, lists={"": ["1", "2"], "空": []})
    directory = write_slot(tmp_path, "", "s", files)
    assert sorted(p.name for p in directory.iterdir()) == [" .json", "..json", ".hash", ".json", ".jsonl", "空.hash"]
    assert (directory / ".json").read_text(encoding="utf-8") == PRETTY
    assert read_slot(tmp_path, "", "s") == files


@pytest.mark.parametrize(("umask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o027, 0o640, 0o750)])
def test_files_and_directories_get_the_modes_java_gives_them(tmp_path: Path, umask: int, file_mode: int,
                                                             dir_mode: int) -> None:
    # Java's Files.writeString creates 0666 and createDirectories 0777, less the umask: 0644 and
    # 0755 under the usual 022. The export wrote 0600 files (mkstemp), which another user's
    # AgentScope process could not read.
    old = os.umask(umask)
    try:
        directory = write_slot(tmp_path / "root", "用户", "会话", SlotFiles(values={"agent_state": COMPACT},
                                                                        lists={"m": ["1"], "空": []}))
    finally:
        os.umask(old)
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "root").rglob("*")}
    for name in ("agent_state.json", "m.jsonl", "m.hash", "空.hash"):
        assert modes.pop((directory / name).relative_to(tmp_path).as_posix()) == file_mode, name
    assert set(modes.values()) == {dir_mode} and len(modes) == 2  # the user's and the session's
