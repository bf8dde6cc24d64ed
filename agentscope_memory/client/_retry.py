"""The one retry rule of the Python clients, blocking and asyncio alike.

A call is retried only when it is safe to repeat (the caller says so: reads, and writes made
idempotent by a request id) and only on UNAVAILABLE (the server was not reached or is
restarting). Waits grow exponentially and are capped. Failures become the library's errors.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

import grpc

from agentscope_memory.client._common import translate

T = TypeVar("T")
RETRYABLE = (grpc.StatusCode.UNAVAILABLE,)


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    first_delay_s: float = 0.1
    max_delay_s: float = 2.0

    def delay(self, attempt: int) -> float:
        return min(self.first_delay_s * 2**attempt, self.max_delay_s)

    def again(self, exc: grpc.RpcError, attempt: int, retry: bool) -> bool:
        return retry and exc.code() in RETRYABLE and attempt < self.retries


def call_blocking(
    policy: RetryPolicy, method: Callable[..., T], request: Any, *, retry: bool, **kwargs: Any
) -> T:
    attempt = 0
    while True:
        try:
            return method(request, **kwargs)
        except grpc.RpcError as exc:
            if not policy.again(exc, attempt, retry):
                raise translate(exc) from None
            time.sleep(policy.delay(attempt))
            attempt += 1


async def call_async(
    policy: RetryPolicy, method: Callable[..., Awaitable[T]], request: Any, *, retry: bool, **kwargs: Any
) -> T:
    attempt = 0
    while True:
        try:
            return await method(request, **kwargs)
        except grpc.aio.AioRpcError as exc:
            if not policy.again(exc, attempt, retry):
                raise translate(exc) from None
            await asyncio.sleep(policy.delay(attempt))
            attempt += 1
