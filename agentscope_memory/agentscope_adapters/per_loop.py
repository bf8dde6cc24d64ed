"""One connection per running event loop, for the AgentScope adapters.

A gRPC channel or an httpx pool belongs to the event loop that opened it, and an application
may build its agent (and so its memory) before `asyncio.run`, or run several loops one after
another; AgentScope's own memories work in each, so the adapters keep one connection per loop.
"""

from __future__ import annotations

import asyncio
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """The value `connect()` made for the running loop, made on first use there."""

    def __init__(self, connect: Callable[[], T]) -> None:
        self._connect = connect
        self._made: dict[asyncio.AbstractEventLoop, T] = {}

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        value = self._made.get(loop)
        if value is None:
            # A finished loop's connection cannot be closed from another loop: it is dropped.
            self._made = {known: v for known, v in self._made.items() if not known.is_closed()}
            value = self._made[loop] = self._connect()
        return value

    def take(self) -> T | None:
        """The running loop's value, no longer kept (for its owner to close), or None."""
        return self._made.pop(asyncio.get_running_loop(), None)
