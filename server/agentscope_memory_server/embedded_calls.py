"""Calls carried inside a stream (an `add` on `WatchMessages`), observed as the RPC they stand for.

The interceptors see a bidirectional stream as one long call. A request that does the work of
another RPC on that stream is counted, timed and traced here as that RPC would be: the same
metrics (`Metrics.observe`, as a unary call of `method`), a span named after `method` (a child of
the stream's span), and the status the RPC would have failed with (`errors.status_of`). The
tenant is the stream's: authentication happened when it opened.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import grpc

from agentscope_memory.tracing import current_tracer
from agentscope_memory_server.errors import status_of
from agentscope_memory_server.metrics import current_metrics
from agentscope_memory_server.tracing import call_attributes, record_status

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What an embedded call returned (`value`), or the status it failed with (`code` not OK)."""

    value: T | None
    code: grpc.StatusCode = grpc.StatusCode.OK
    message: str = ""


async def run_embedded(method: str, call: Callable[[], Awaitable[T]]) -> Outcome[T]:
    """Runs `call` as one call of the RPC `method` (`/package.Service/Method`); never raises for
    a failed call (cancellation aside): its status is in the outcome."""
    tracer = current_tracer.get()
    if tracer is None:
        return await _observed(method, call, None)
    with tracer.start_as_current_span(method.lstrip("/"), attributes=call_attributes(method),
                                      record_exception=False, set_status_on_exception=False) as span:
        return await _observed(method, call, span)


async def _observed(method: str, call: Callable[[], Awaitable[T]], span: object | None) -> Outcome[T]:
    started = time.perf_counter()
    try:
        outcome: Outcome[T] = Outcome(await call())
    except Exception as exc:  # noqa: BLE001 - mapped, or reported as INTERNAL with an incident id
        code, message = status_of(exc, method)
        outcome = Outcome(None, code, message)
    metrics = current_metrics.get()
    if metrics is not None:
        metrics.observe(method, outcome.code.name, time.perf_counter() - started, unary=True)
    if span is not None:
        record_status(span, outcome.code)
    return outcome
