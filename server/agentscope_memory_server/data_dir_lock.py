"""One server per data directory: a second `serve` on the same sqlite data dir is refused at start.

Two servers on one sqlite file each believe they see every write: their coherent caches
(`WatchMessages`) would let clients read stale conversations, and their checkpoints and job
runners compete. `agentscope-memory mcp` on an embedded store holds it too. Otherwise the lock
is the server's alone, so a program in local mode (the Python client without a server,
`coherent_cache` off) may still open the same file beside a server.
The operating system releases it when the process ends, however it ends (`kill -9` included).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_NAME = "agentscope-memory.server.lock"


class DataDirInUseError(OSError):
    """Another server holds the data directory; `holder` is its pid when it wrote one, else ""."""

    holder = ""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+", encoding="utf-8")
        except OSError as exc:
            raise OSError(f"data_dir {self.path.parent} cannot be used: {exc.strerror or exc}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            who = f" (pid {holder})" if holder.isdigit() else ""
            error = DataDirInUseError(
                f"data_dir {self.path.parent} is in use by another agentscope-memory server{who};"
                " stop it, or give this one another --data-dir")
            error.holder = holder if holder.isdigit() else ""
            raise error from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        if self._file is not None:
            # The file stays: removing it would race a server starting right now.
            self._file.close()
            self._file = None
