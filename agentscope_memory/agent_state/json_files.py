"""AgentScope-Java 2.0's `JsonFileAgentStateStore` directory layout, for export and import.

    <root>/<user dir>/<session dir>/<key>.json    a single value, Jackson's pretty printer
    <root>/<user dir>/<session dir>/<key>.jsonl   a list, one compact JSON document per line
    <root>/<user dir>/<session dir>/<key>.hash    the list's change marker

The user directory is `__anon__` for the anonymous (empty or blank) user. A user or session id
matching `[a-zA-Z0-9_\\-.]+` is its own directory name, anything else the unpadded base64url of
its UTF-8 bytes (`.` and `..` are always encoded here, which Java would not do: it resolves them
to other directories). Observed from 2.0.0 (reference/observed-2026-11-23.md and the Java layout
test): an empty list is only a `.hash` file reading `empty:0`, no `.jsonl`. A key is the file
name as it is, the empty key included (`.json`, `.jsonl`, `.hash`). Files are created mode 0666
and directories 0777, less the umask, as Java's `Files.writeString` and `createDirectories` do.

Values travel as the compact JSON AgentScope's codec writes; `.json` files are re-laid out token
by token (numbers and strings copied verbatim), so the bytes are the ones Java writes for the same
value. The `.hash` of a non-empty list is Java's identity hash of the list's objects, which no
other process (not even a restarted JVM) can reproduce: we write eight hex digits of a content
hash, which Java reads as "changed" and answers by rewriting the list on its next save, exactly
as it does after a restart.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from agentscope_memory.errors import InvalidArgumentError

ANONYMOUS_DIR = "__anon__"
EMPTY_LIST_HASH = "empty:0"
_SAFE = re.compile(r"[a-zA-Z0-9_\-.]+")
_WHITESPACE = " \t\r\n"


def dir_name(value: str) -> str:
    """The directory name JsonFileAgentStateStore uses for a user or session id."""
    if _SAFE.fullmatch(value) and value not in (".", ".."):
        return value
    return base64.urlsafe_b64encode(value.encode("utf-8")).decode("ascii").rstrip("=")


def slot_dir(root: Path, user_id: str, session_id: str) -> Path:
    user = ANONYMOUS_DIR if not user_id.strip() else dir_name(user_id)
    return Path(root) / user / dir_name(session_id)


@dataclass
class SlotFiles:
    """What one slot holds, as JSON text: single values and lists by key."""

    values: dict[str, str] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)


# -- JSON layout --------------------------------------------------------------------------------


def _tokens(text: str) -> list[str]:
    """Structural characters and whole scalar tokens (strings with their quotes and escapes)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _WHITESPACE:
            i += 1
        elif ch in "{}[]:,":
            out.append(ch)
            i += 1
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise ValueError("unterminated string")
            out.append(text[i : j + 1])
            i = j + 1
        else:
            j = i
            while j < n and text[j] not in _WHITESPACE and text[j] not in "{}[]:,":
                j += 1
            out.append(text[i:j])
            i = j
    return out


def compact(text: str) -> str:
    """The document without whitespace outside strings: Jackson's compact form."""
    return "".join(_tokens(text))


def pretty(text: str) -> str:
    """The document as Jackson's DefaultPrettyPrinter lays it out: one object entry per line,
    two spaces per enclosing object, `" : "`, arrays inline as `[ a, b ]`, `{ }` and `[ ]` when
    empty, no trailing newline. Scalars are copied verbatim."""
    tokens = _tokens(text)
    out: list[str] = []
    end = _pretty_value(tokens, 0, 0, out)
    if end != len(tokens):
        raise ValueError("trailing data after the JSON document")
    return "".join(out)


def _pretty_value(tokens: list[str], i: int, nesting: int, out: list[str]) -> int:
    token = tokens[i]
    if token == "{":
        if tokens[i + 1] == "}":
            out.append("{ }")
            return i + 2
        out.append("{")
        i += 1
        first = True
        while True:
            out.append("\n" if first else ",\n")
            first = False
            out.append("  " * (nesting + 1) + tokens[i] + " : ")
            if tokens[i + 1] != ":":
                raise ValueError("expected ':'")
            i = _pretty_value(tokens, i + 2, nesting + 1, out)
            if tokens[i] == "}":
                out.append("\n" + "  " * nesting + "}")
                return i + 1
            if tokens[i] != ",":
                raise ValueError("expected ',' or '}'")
            i += 1
    if token == "[":
        if tokens[i + 1] == "]":
            out.append("[ ]")
            return i + 2
        out.append("[ ")
        i += 1
        while True:
            i = _pretty_value(tokens, i, nesting, out)
            if tokens[i] == "]":
                out.append(" ]")
                return i + 1
            if tokens[i] != ",":
                raise ValueError("expected ',' or ']'")
            out.append(", ")
            i += 1
    out.append(token)
    return i + 1


def _content_hash(lines: list[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()[:8]


# -- files --------------------------------------------------------------------------------------


def _check_key(key: str) -> str:
    # JsonFileAgentStateStore names the files `<key>.json` / `.jsonl` / `.hash` with the key as
    # it is (Chinese, spaces, a leading dot), unlike ids; only a `/` would make it a path.
    if "/" in key:
        raise InvalidArgumentError("key", f"{key!r} cannot be a file name (it contains '/')")
    return key


def _write_atomic(path: Path, data: str) -> None:
    # Created as Java's `Files.writeString` creates a file: mode 0666 less the umask (0644 under
    # the usual 022), so AgentScope processes of other users can read an export as they read the
    # files JsonFileAgentStateStore writes (mkstemp's 0600 could not). Random temporary names, not
    # Java's fixed `<file>.tmp`, so two exports at once never write into one temporary file.
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_slot(root: Path, user_id: str, session_id: str, files: SlotFiles) -> Path:
    """Writes a slot's values and lists under `root`; returns the slot's directory."""
    for key in (*files.values, *files.lists):
        _check_key(key)  # before any file is written: a refused slot leaves no partial export
    directory = slot_dir(root, user_id, session_id)
    directory.mkdir(parents=True, exist_ok=True)
    for key, value in files.values.items():
        _write_atomic(directory / f"{key}.json", pretty(value))
    for key, items in files.lists.items():
        jsonl = directory / f"{key}.jsonl"
        if items:
            _write_atomic(jsonl, "".join(compact(item) + "\n" for item in items))
            _write_atomic(directory / f"{key}.hash", _content_hash(items))
        else:
            jsonl.unlink(missing_ok=True)
            _write_atomic(directory / f"{key}.hash", EMPTY_LIST_HASH)
    return directory


def read_slot(root: Path, user_id: str, session_id: str) -> SlotFiles:
    """Reads a slot's `.json` values and lists (`.jsonl`, or `.hash` alone: an empty list)."""
    directory = slot_dir(root, user_id, session_id)
    if not directory.is_dir():
        raise InvalidArgumentError("session_id", f"no slot directory {directory}")
    files = SlotFiles()
    # Temporary files (Java's `<file>.tmp`, ours `.<file>.<random>.tmp`) end in `.tmp`, which
    # no suffix below matches; a key may itself start with a dot.
    # The key is the name less its suffix, taken by hand: an empty key's files are `.json`,
    # `.jsonl` and `.hash`, which pathlib reads as suffix-less hidden files.
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        name = path.name
        try:
            if name.endswith(".json"):
                files.values[name[: -len(".json")]] = compact(path.read_text(encoding="utf-8"))
            elif name.endswith(".jsonl"):
                lines = path.read_text(encoding="utf-8").split("\n")
                files.lists[name[: -len(".jsonl")]] = [compact(line) for line in lines if line.strip()]
            elif name.endswith(".hash") and not (directory / f"{name[: -len('.hash')]}.jsonl").exists():
                files.lists[name[: -len(".hash")]] = []
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidArgumentError(str(path), f"cannot be read: {exc}") from None
    return files
