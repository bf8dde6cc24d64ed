"""Draining on shutdown: calls already running finish with their real answer, new calls get
UNAVAILABLE, and grpc's own stop runs only once nothing is left in flight.

Why not just `grpc.aio.Server.stop(grace)`: grpc core answers every call that has arrived but
not yet been handed to a handler with CANCELLED when its shutdown begins (grpc/grpc#41785), and
under load many are waiting there. So the server first refuses new calls itself, with
UNAVAILABLE (which every client may retry elsewhere or later), waits for the running ones, and
waits for a short quiet spell in which no call arrived, and only then stops grpc, when its
queue is empty. Server streams (WatchCompressionEvents, WatchMessages) never end by themselves,
so they end at once with UNAVAILABLE; a watcher resumes from its last sequence (or, for
WatchMessages, reads with if_none_match until it watches again).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import time
from dataclasses import dataclass
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc

from agentscope_memory_server.handlers import Behaviour, wrap_behaviour

log = logging.getLogger("agentscope_memory_server")

# grpc's own services (health, reflection) keep answering while the server drains: health is
# how load balancers learn of the shutdown.
_EXEMPT_PREFIX = "/grpc."
SHUTTING_DOWN = "the server is shutting down; retry on another replica or once it is back"


# The drain of the server running the current stream (set by `run_stream`), for work a stream
# carries (`running`).
current_drain: contextvars.ContextVar[Drain | None] = contextvars.ContextVar("agentscope_memory_drain", default=None)

class Drain:
    """Counts the calls in flight and refuses new ones once `drain` has begun."""

    def __init__(self, quiet_s: float = 0.2, clock: Callable[[], float] = time.monotonic) -> None:
        self._quiet_s = quiet_s
        self._clock = clock
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._draining = asyncio.Event()
        self._last_arrival = clock()
        self._streams: set[_Stream] = set()

    @property
    def draining(self) -> bool:
        return self._draining.is_set()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def drain(self, grace: float) -> bool:
        """Refuse new calls, then wait (at most `grace` seconds) until the calls running have
        finished and no call has arrived for the quiet spell. True when that happened in time."""
        deadline = self._clock() + grace
        self._draining.set()
        for stream in list(self._streams):
            # Streams never end by themselves: each ends now, UNAVAILABLE (see `run_stream`).
            if stream.waiting and not stream.stopped and stream.task is not None:
                stream.stopped = True
                stream.task.cancel()
        self._last_arrival = self._clock()
        while True:
            left = deadline - self._clock()
            if left <= 0:
                return self._in_flight == 0
            if self._in_flight:
                try:
                    await asyncio.wait_for(self._idle.wait(), left)
                except TimeoutError:
                    return False
                continue
            quiet_until = self._last_arrival + self._quiet_s
            if self._clock() >= quiet_until:
                return True
            await asyncio.sleep(min(quiet_until - self._clock(), left))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Counts a piece of work carried inside a stream (an add on a `WatchMessages` stream) as a
        call in flight: the stream ends at once when draining begins, but its add, once started,
        finishes before the stores close."""
        self._enter()
        try:
            yield
        finally:
            self._leave()

    def _enter(self) -> None:
        self._in_flight += 1
        self._idle.clear()

    def _leave(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0:
            self._idle.set()

    async def run_unary(self, behavior: Callable[..., Awaitable[Any]], request: Any, context: grpc.aio.ServicerContext) -> Any:
        self._last_arrival = self._clock()
        if self.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)
        self._enter()
        try:
            return await behavior(request, context)
        finally:
            self._leave()

    async def run_stream(self, behavior: Callable[..., Any], request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        self._last_arrival = self._clock()
        if self.draining:
            await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)
        # Each call runs in its own task, so what is set here ends with the call.
        current_drain.set(self)
        result = behavior(request, context)
        if inspect.isawaitable(result):  # a handler that answers with a status only
            await result
            return
        items = result.__aiter__()
        # Draining ends the stream while it waits for its next item by cancelling the task waiting
        # (the call's own): no task and wait for every item, which cost each item two more turns
        # of the event loop.
        stream = _Stream(asyncio.current_task())
        self._streams.add(stream)
        try:
            while True:
                if self.draining:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)
                stream.waiting = True
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    return
                except asyncio.CancelledError:
                    if not stream.stopped or stream.task is None:
                        raise
                    stream.task.uncancel()
                    await context.abort(grpc.StatusCode.UNAVAILABLE, SHUTTING_DOWN)
                finally:
                    stream.waiting = False
                yield item
        finally:
            self._streams.discard(stream)
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()


@dataclass(eq=False)
class _Stream:
    """A stream `run_stream` is running: the task iterating it, and whether it waits for its
    next item (so draining may cancel that wait)."""

    task: asyncio.Task[Any] | None
    waiting: bool = False
    stopped: bool = False


def drained(drain: Drain) -> Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]:
    """A `registration` wrapper putting every call of the project's services through `drain`."""

    # A client stream (StreamLoadState) is one call with one answer: drained as unary. A
    # server stream or a watch (WatchMessages) never ends by itself: it ends at once, UNAVAILABLE.
    def answered_once(behaviour: Behaviour) -> Behaviour:
        async def run(request: Any, context: grpc.aio.ServicerContext) -> Any:
            return await drain.run_unary(behaviour, request, context)

        return run

    def streamed(behaviour: Behaviour) -> Behaviour:
        async def run(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for item in drain.run_stream(behaviour, request, context):
                yield item

        return run

    def wrap(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        if method.startswith(_EXEMPT_PREFIX):
            return handler
        return wrap_behaviour(handler, answered_once, streamed)

    return wrap
