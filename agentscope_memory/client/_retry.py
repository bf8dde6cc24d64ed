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
from typing import Any, Awaitable, Callable, TypeVar

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
                raise translate(exc) from None
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
                raise translate(exc) from None
            await asyncio.sleep(pause)
            attempt += 1
