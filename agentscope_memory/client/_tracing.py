"""W3C trace context on outgoing calls, so the server's spans join the caller's trace.

Only when the application uses OpenTelemetry (installed, with a span current at the call); the
propagator is the application's own (`opentelemetry.propagate`), as its other clients use.
"""

from __future__ import annotations

from typing import Any

try:
    from opentelemetry import propagate, trace
except ImportError:  # tracing is optional: the `tracing` extra
    propagate = None  # type: ignore[assignment]
    trace = None  # type: ignore[assignment]


def with_trace_context(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` of a stub call with `traceparent` (and `tracestate`) added to its metadata."""
    if trace is None or not trace.get_current_span().get_span_context().is_valid:
        return kwargs
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return kwargs
    return {**kwargs, "metadata": [*(kwargs.get("metadata") or []), *carrier.items()]}
