"""AgentScope-Java 1.0.12 `JsonSession`, on disk byte for byte, without its path-traversal hole.

Layout (reference/agentscope-java-core.md §3.5):

    {root}/{session dir}/{key}.json    one state, Jackson's pretty printer, no trailing newline
    {root}/{session dir}/{key}.jsonl   a list state, one compact JSON document per line
    {root}/{session dir}/{key}.hash    change detection for the list

The session directory is the id itself when it matches `[a-zA-Z0-9_\\-.]+`, otherwise the
unpadded base64url of its UTF-8 bytes, as Java does. Deliberate differences, each safer and
each still readable by Java:
- `.` and `..` are encoded like any other unsafe id (Java resolves them to the root's parent
  and the root itself; `delete(".")` wipes every session).
- state keys must be plain names (`[A-Za-z0-9_\\-.]+`, not `.`/`..`); Java writes
  `save(key, "../../x")` outside the session directory.
- files are replaced atomically (temp file + rename) and fsynced; `save_all` (an export)
  replaces a session's states all together: written into a copy beside the directory, which
  is then swapped in, so an interrupted export leaves the session as it was, not old and new
  files mixed.
- list change detection uses a content hash (`sha256:<count>:<hex>`) instead of Java's identity
  hash, so appends are detected across processes. Java reads our `.hash` as "changed" and simply
  rewrites the list; we read Java's as unknown and compare the file's lines instead.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import hashlib
import os
import secrets
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.message import to_json_text, to_pretty_json
from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.json_text import MAX_STATE_DEPTH, parse_json

__all__ = ["JsonSession", "SessionFileError", "session_dir_name"]

_SAFE = re.compile(r"[a-zA-Z0-9_\-.]+")
_MAX_DIR_NAME = 255
# The longest UTF-8 id whose unpadded base64url still fits a directory name.
MAX_ENCODED_SESSION_ID_BYTES = 191


class SessionFileError(InvalidArgumentError):
    """A session file that cannot be read; names the file and line."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(where, reason)
        self.path = path
        self.line = line


def session_dir_name(session_id: str) -> str:
    """The directory name JsonSession uses for a session id (`.`/`..` always encoded)."""
    check_id(session_id, "session_id")
    if _SAFE.fullmatch(session_id) and session_id not in (".", ".."):
        name = session_id
    else:
        name = base64.urlsafe_b64encode(session_id.encode("utf-8")).decode("ascii").rstrip("=")
    if len(name) > _MAX_DIR_NAME:
        raise InvalidArgumentError(
            "session_id",
            f"is too long for a directory name ({len(name)} > {_MAX_DIR_NAME}); a session id outside "
            f"[A-Za-z0-9_.-] is stored base64url-encoded and may be at most {MAX_ENCODED_SESSION_ID_BYTES} bytes of UTF-8",
        )
    return name


def _check_key(key: str) -> str:
    if not key or not _SAFE.fullmatch(key) or key in (".", "..") or len(key) > 200:
        raise InvalidArgumentError(
            "key", f"{key!r} is not a plain state key (letters, digits, _ - . only; not . or ..)"
        )
    return key


def _content_hash(lines: list[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8"))
        digest.update(b"\n")
    return f"sha256:{len(lines)}:{digest.hexdigest()}"


def _write_atomic(path: Path, data: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# Marks the directories `save_all` writes beside a session: `~` is in no session directory's
# name (neither a plain id's nor base64url), so they are never taken for sessions.
_WORK_MARK = "~"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux `renameat2(RENAME_EXCHANGE)`); False where the
    system or the file system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


def _swap_in(new: Path, path: Path) -> None:
    """Put directory `new` at `path`, whose old contents are removed."""
    if not path.exists():
        os.rename(new, path)
    elif _exchange(new, path):
        shutil.rmtree(new)
    else:
        # Two renames: between them the session is missing for an instant, never half-written.
        old = path.with_name(new.name + ".old")
        os.rename(path, old)
        try:
            os.rename(new, path)
        except BaseException:
            os.rename(old, path)
            raise
        shutil.rmtree(old)
    _fsync_dir(path.parent)


class JsonSession:
    """Sessions as directories of JSON files under `root`."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    # -- paths ------------------------------------------------------------------------------

    def session_dir(self, session_id: str) -> Path:
        path = self.root / session_dir_name(session_id)
        # Defence in depth: whatever the id, the directory is a direct child of the root.
        if path.resolve().parent != self.root.resolve():
            raise InvalidArgumentError("session_id", "resolves outside the session root")
        return path

    def _file(self, session_id: str, key: str, suffix: str) -> Path:
        return self.session_dir(session_id) / f"{_check_key(key)}{suffix}"

    # -- single values ----------------------------------------------------------------------

    def save(self, session_id: str, key: str, value: Any) -> None:
        """Store one state (a JSON-ready value) as `{key}.json`, replacing any previous one."""
        path = self._file(session_id, key, ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, to_pretty_json(value))

    def save_all(self, session_id: str, states: list[tuple[str, Any, bool]]) -> None:
        """Store several states, (key, value, is_list) each, all or none: a memory's export
        writes several keys, and one interrupted (Ctrl-C, a full disk) left old and new files
        mixed, a session no memory ever had. They are written into a copy of the session
        directory beside it (its other files kept), which then replaces it in one step."""
        path = self.session_dir(session_id)
        for key, _, _ in states:
            _check_key(key)
        # Not named after the session: its name may be as long as a name can be.
        work = path.with_name(f".{_WORK_MARK}export-{secrets.token_hex(8)}")
        try:
            if path.is_dir():
                shutil.copytree(path, work)
            else:
                work.mkdir()
            for key, value, is_list in states:
                if is_list:
                    self._save_list_at(work, key, value)
                else:
                    _write_atomic(work / f"{key}.json", to_pretty_json(value))
            _fsync_dir(work)
            _swap_in(work, path)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise

    def get(self, session_id: str, key: str) -> Any | None:
        """The state saved under `key`, or None when there is none."""
        path = self._file(session_id, key, ".json")
        if not path.is_file():
            return None
        try:
            return parse_json(path.read_bytes(), "file", MAX_STATE_DEPTH)
        except InvalidArgumentError as exc:
            raise SessionFileError(path, None, exc.reason) from None

    # -- lists ------------------------------------------------------------------------------

    def save_list(self, session_id: str, key: str, values: list[Any]) -> None:
        """Store a list state as `{key}.jsonl`. Callers pass the whole list; when it only grew,
        just the new items are appended (JsonSession's incremental save)."""
        directory = self.session_dir(session_id)
        directory.mkdir(parents=True, exist_ok=True)
        self._save_list_at(directory, _check_key(key), values)

    def _save_list_at(self, directory: Path, key: str, values: list[Any]) -> None:
        jsonl = directory / f"{key}.jsonl"
        hash_file = directory / f"{key}.hash"
        lines = [to_json_text(v) for v in values]
        existing = self._existing_prefix(jsonl, hash_file, lines)
        if existing is None:
            _write_atomic(jsonl, "".join(line + "\n" for line in lines))
        elif existing < len(lines):
            with open(jsonl, "a", encoding="utf-8", newline="") as handle:
                handle.write("".join(line + "\n" for line in lines[existing:]))
                handle.flush()
                os.fsync(handle.fileno())
        _write_atomic(hash_file, "empty:0" if not lines else _content_hash(lines))

    def _existing_prefix(self, jsonl: Path, hash_file: Path, lines: list[str]) -> int | None:
        """How many leading items are already on disk unchanged; None means rewrite."""
        if not jsonl.exists():
            return None
        stored = hash_file.read_text(encoding="utf-8").strip() if hash_file.is_file() else ""
        parts = stored.split(":")
        if len(parts) == 3 and parts[0] == "sha256" and parts[1].isdigit():
            count = int(parts[1])
            if count <= len(lines) and _content_hash(lines[:count]) == stored:
                return count
            return None
        # Written by Java (an identity hash we cannot interpret) or by hand: compare contents.
        on_disk = [line for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
        if len(on_disk) <= len(lines) and on_disk == lines[: len(on_disk)]:
            return len(on_disk)
        return None

    def get_list(self, session_id: str, key: str) -> list[Any]:
        """The list saved under `key` (blank lines skipped), or [] when there is none."""
        path = self._file(session_id, key, ".jsonl")
        if not path.is_file():
            return []
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise SessionFileError(path, None, f"is not UTF-8: {exc}") from None
        items: list[Any] = []
        raw_lines = text.split("\n")
        for number, line in enumerate(raw_lines, start=1):
            if not line.strip():
                continue
            try:
                items.append(parse_json(line, "line", MAX_STATE_DEPTH))
            except InvalidArgumentError as exc:
                truncated = number == len(raw_lines) and not text.endswith("\n")
                reason = "is truncated (the last line is incomplete)" if truncated else exc.reason
                raise SessionFileError(path, number, reason) from None
        return items

    # -- sessions ---------------------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        return self.session_dir(session_id).is_dir()

    def delete(self, session_id: str) -> None:
        """Delete a whole session; nothing happens if it does not exist."""
        path = self.session_dir(session_id)
        if path.is_dir():
            shutil.rmtree(path)

    def delete_key(self, session_id: str, key: str) -> None:
        """Delete a single state (`{key}.json` only, as Java does; lists stay)."""
        self._file(session_id, key, ".json").unlink(missing_ok=True)

    def list_session_dirs(self) -> list[str]:
        """The session directory names, sorted (Java's `listSessionKeys` returns these)."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _WORK_MARK not in p.name)

    def keys(self, session_id: str) -> list[tuple[str, str]]:
        """The states in a session as (key, "single" | "list"); a key can be both."""
        path = self.session_dir(session_id)
        if not path.is_dir():
            raise NotFoundError(f"session {session_id!r} does not exist under {self.root}")
        kinds = {".json": "single", ".jsonl": "list"}
        return [(p.stem, kinds[p.suffix]) for p in sorted(path.iterdir()) if p.suffix in kinds]
