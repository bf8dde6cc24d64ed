"""In-process backend for tests and throwaway use: the sqlite store in a private temporary
directory, removed on close.

It is the same SQL as the durable backends on purpose: every table and statement is written
once, so the throwaway store cannot drift from the real ones. Nothing needs to survive a crash,
so SQLite never waits for the disk (synchronous=OFF).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

from agentscope_memory.store.sqlite import SqliteStore


class InProcessStore(SqliteStore):
    """Lost when closed (or when the process ends)."""

    def __init__(self) -> None:
        directory = tempfile.mkdtemp(prefix="agentscope-memory-")
        # Also removes the directory if the store is dropped unclosed, or at interpreter exit.
        self._remove_directory = weakref.finalize(self, shutil.rmtree, directory, True)
        try:
            super().__init__(Path(directory) / "memory.sqlite3", synchronous="OFF")
        except BaseException:
            self._remove_directory()
            raise

    async def close(self) -> None:
        await super().close()
        self._remove_directory()
