"""The one retry rule of the Python clients, blocking and asyncio alike.

A call is retried only when it is safe to repeat (the caller says so: reads, and writes made
idempotent by a request id) and only on UNAVAILABLE (the server was not reached, is restarting
or is draining for a shutdown). The budget is the call's deadline, not a count: a server that
is killed and restarted within the deadline is ridden out with no action by the caller, however
long gRPC's reconnect takes. Every attempt gets the time that is left; waits between attempts
grow exponentially, with jitter, and are capped. Failures become the library's errors.

Why not a gRPC service-config retry policy: whether a call is safe depends on the request
(`allow_existing`, `expected_version`), not only on the method, and a service-config policy
counts attempts (at most 5) where a restart needs a budget in time.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, TypeVar

import grpc

from agentscope_memory.client._common import translate
from agentscope_memory.client._tracing import with_trace_context

T = TypeVar("T")
RETRYABLE = (grpc.StatusCode.UNAVAILABLE,)


@dataclass(frozen=True)
class RetryPolicy:
    """`retries`: at most this many attempts after the first (None: as many as fit in the
    deadline; 0: no retry at all)."""

    retries: int | None = None
    first_delay_s: float = 0.05
    max_delay_s: float = 0.5

    def delay(self, attempt: int) -> float:
        # Jitter spreads out clients that all lost the same server at the same moment.
        return min(self.first_delay_s * 2**attempt, self.max_delay_s) * random.uniform(0.5, 1.0)

    def again(self, exc: grpc.RpcError, attempt: int, retry: bool) -> bool:
        if not retry or exc.code() not in RETRYABLE:
            return False
        return self.retries is None or attempt < self.retries


def _attempted(error: Exception, attempts: int) -> Exception:
    # How many times the call was sent: a write's failure after a retry may be its own first
    # attempt's doing (a compare-and-set that landed, its reply lost).
    error.attempts = attempts  # type: ignore[attr-defined]
    return error


def call_blocking(
    policy: RetryPolicy, method: Callable[..., T], request: Any, *, retry: bool, timeout: float, **kwargs: Any
) -> T:
    deadline = time.monotonic() + timeout
    kwargs = with_trace_context(kwargs)
    attempt = 0
    while True:
        try:
            return method(request, timeout=max(deadline - time.monotonic(), 0.001), **kwargs)
        except grpc.RpcError as exc:
            pause = policy.delay(attempt)
            if not policy.again(exc, attempt, retry) or time.monotonic() + pause >= deadline:
                raise _attempted(translate(exc), attempt + 1) from None
            time.sleep(pause)
            attempt += 1


async def call_async(
    policy: RetryPolicy, method: Callable[..., Awaitable[T]], request: Any, *, retry: bool, timeout: float, **kwargs: Any
) -> T:
    deadline = time.monotonic() + timeout
    kwargs = with_trace_context(kwargs)
    attempt = 0
    while True:
        try:
            return await method(request, timeout=max(deadline - time.monotonic(), 0.001), **kwargs)
        except grpc.aio.AioRpcError as exc:
            pause = policy.delay(attempt)
            if not policy.again(exc, attempt, retry) or time.monotonic() + pause >= deadline:
                raise _attempted(translate(exc), attempt + 1) from None
            await asyncio.sleep(pause)
            attempt += 1


class Reconnects:
    """When a watch reopens its broken stream: after a pause that grows (the retry rule's,
    `RetryPolicy.delay`) while the server stays unreachable, so a lost server is not redialled
    thousands of times a second; and never once the client's deadline (`timeout`) or its
    `retries` are spent without reaching it: then the last failure is raised. A stream that was
    up (it brought an event, or stayed open longer than the longest pause) starts a new count."""

    def __init__(self, policy: RetryPolicy, timeout: float) -> None:
        self.policy, self.timeout = policy, timeout
        self.attempt = 0
        self.since: float | None = None

    def pause(self, failure: grpc.RpcError | None, opened: float, delivered: bool) -> float:
        now = time.monotonic()
        if delivered or now - opened >= self.policy.max_delay_s:
            self.attempt, self.since = 0, None
        if self.since is None:
            self.since = now
        if failure is not None and (now - self.since >= self.timeout
                                    or (self.policy.retries is not None and self.attempt >= self.policy.retries)):
            raise translate(failure) from None
        delay = self.policy.delay(self.attempt)
        self.attempt += 1
        return delay


async def resuming_stream(open_after: Callable[[int], Any], after: int, sequence_of: Callable[[Any], int],
                          reconnects: Reconnects) -> AsyncIterator[Any]:
    """The responses of a watch opened by `open_after(sequence)` (a server stream of events after
    `sequence`), reopened after the last event seen whenever it breaks with UNAVAILABLE, so
    nothing is missed or repeated; pauses and gives up as `reconnects` says. Other failures raise."""
    last = after
    while True:
        call = open_after(last)
        opened, delivered, failure = time.monotonic(), False, None
        try:
            async for response in call:
                last, delivered = sequence_of(response), True
                yield response
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise translate(exc) from None
            failure = exc
        finally:
            call.cancel()
        await asyncio.sleep(reconnects.pause(failure, opened, delivered))


def resuming_stream_blocking(open_after: Callable[[int], Any], after: int, sequence_of: Callable[[Any], int],
                             reconnects: Reconnects) -> Iterator[Any]:
    """`resuming_stream` on a blocking channel."""
    last = after
    while True:
        call = open_after(last)
        opened, delivered, failure = time.monotonic(), False, None
        try:
            for response in call:
                last, delivered = sequence_of(response), True
                yield response
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise translate(exc) from None
            failure = exc
        finally:
            call.cancel()
        time.sleep(reconnects.pause(failure, opened, delivered))
