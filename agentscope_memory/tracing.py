"""Spans around the slow steps: store transactions, embedding, vector search and LLM calls.

The library never configures OpenTelemetry. A server that traces puts its tracer into
`current_tracer` for the code it runs (per call, and for its background tasks); without one every
`span` is a no-op, so untraced use costs one context-variable read and needs no OpenTelemetry
installed. A context variable rather than OpenTelemetry's process-wide provider keeps two servers
in one process (tests, embedded use) from sharing or overwriting each other's tracing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from agentscope_memory.errors import (
    DeadlineExceededError,
    MemoryServiceError,
    UnavailableError,
    UnimplementedError,
)

F = TypeVar("F", bound=Callable[..., Any])

# An opentelemetry.trace.Tracer when tracing is on; typed loosely so the library does not need
# OpenTelemetry installed.
current_tracer: ContextVar[Any | None] = ContextVar("agentscope_memory_tracer", default=None)


@contextmanager
def span(name: str, attributes: Mapping[str, str | int | float | bool] | None = None) -> Iterator[Any | None]:
    """A child span of the current one named `name`, or nothing when no tracer is set.

    Yields the span (to add attributes known only at the end) or None.
    """
    tracer = current_tracer.get()
    if tracer is None:
        yield None
        return
    # Not OpenTelemetry's default of recording the exception: its message quotes what the step
    # handled (an LLM's malformed answer, a memory id), and a trace goes to a collector that
    # people other than the memories' owners may read. The type says what failed.
    with tracer.start_as_current_span(name, attributes=dict(attributes or {}), record_exception=False,
                                      set_status_on_exception=False) as current:
        try:
            yield current
        except Exception as exc:
            if _is_failure(exc):
                from opentelemetry.trace import Status, StatusCode

                current.set_attribute("error.type", f"{type(exc).__module__}.{type(exc).__qualname__}")
                current.set_status(Status(StatusCode.ERROR))
            raise


# The library's errors that are the step failing rather than its answer to the caller (a
# memory not found, an invalid argument), as the server's spans count gRPC codes.
_FAILURES = (UnavailableError, DeadlineExceededError, UnimplementedError)


def _is_failure(exc: Exception) -> bool:
    return not isinstance(exc, MemoryServiceError) or isinstance(exc, _FAILURES)


def traced(name: str) -> Callable[[F], F]:
    """Decorates a blocking function so each call is a span named `name` (when traced)."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if current_tracer.get() is None:
                return fn(*args, **kwargs)
            with span(name):
                return fn(*args, **kwargs)

        return cast(F, wrapper)

    return decorate


class TracedEmbedder:
    """An embedder whose calls are `embed` spans (model and batch size); everything else passes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.embed = self._wrap(inner.embed, "passage")
        # Models without a query form embed queries like passages; the span still says which.
        self.embed_query = self._wrap(getattr(inner, "embed_query", inner.embed), "query")

    def _wrap(self, fn: Callable[[list[str]], Any], purpose: str) -> Callable[[list[str]], Any]:
        def embed(texts: list[str]) -> Any:
            if current_tracer.get() is None:
                return fn(texts)
            model = str(getattr(self._inner, "model_id", type(self._inner).__name__))
            with span("embed", {"agentscope_memory.embedder.model": model,
                                "agentscope_memory.embedder.batch_size": len(texts),
                                "agentscope_memory.embedder.purpose": purpose}):
                return fn(texts)

        return embed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
