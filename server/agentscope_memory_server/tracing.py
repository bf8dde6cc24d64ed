"""OpenTelemetry tracing of the server: a span per RPC, exported over OTLP/HTTP (off by default).

The span of a call continues the caller's trace when the call carries W3C `traceparent`
metadata (the Python and Java clients send it when the application traces). Inside the call,
the library adds child spans for store transactions, embedding, vector search and LLM calls
through `agentscope_memory.tracing.current_tracer`, which the interceptor sets for the call.
The provider is this server's own, not OpenTelemetry's process-wide one, so several servers in
one process each export to their own endpoint.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
import threading
from typing import Any

import grpc

from agentscope_memory.tracing import current_tracer
from agentscope_memory_server.handlers import call_status, wrap_behaviour

# Seconds an export may take, and a shutdown (the daemon threads left behind when a collector
# hangs do not hold up the process's exit).
_EXPORT_S = 5
_SHUTDOWN_S = 5

# gRPC codes that make a server span an error, per OpenTelemetry's RPC semantic conventions.
_SERVER_ERRORS = {
    grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DATA_LOSS,
}


class Tracing:
    """This server's tracer provider and exporter; `None`-free: build only when tracing is on."""

    def __init__(self, endpoint: str, service_name: str, instance: str) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise ValueError(
                "otlp_endpoint is set but OpenTelemetry is not installed: pip install 'agentscope-memory[tracing]'"
            ) from exc
        resource = Resource.create({"service.name": service_name, "service.instance.id": instance})
        self.provider = TracerProvider(resource=resource)
        # A collector that is down must not hold up calls or a shutdown: each export is bounded
        # (calls never wait for one: a thread exports), and so is `shutdown`.
        self._exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces", timeout=_EXPORT_S)
        self.provider.add_span_processor(BatchSpanProcessor(self._exporter, schedule_delay_millis=1000))
        self.tracer = self.provider.get_tracer("agentscope_memory_server")

    def shutdown(self) -> None:
        """Exports what is pending and stops the exporter, in at most `_SHUTDOWN_S` seconds.

        Not OpenTelemetry's `force_flush`, whose timeout is not applied: with a collector that
        accepts connections and never answers, it waited the export timeout for every batch
        queued, then the provider's shutdown waited again, for minutes in all.
        """
        stopping = threading.Thread(target=self.provider.shutdown, name="otel-shutdown", daemon=True)
        stopping.start()
        stopping.join(_SHUTDOWN_S - 1)
        if stopping.is_alive():
            # The collector does not keep up: what is still queued is dropped, not waited for
            # (a stopped exporter refuses the remaining batches at once).
            self._exporter.shutdown()
            stopping.join(1)


def call_attributes(method: str) -> dict[str, str]:
    """OpenTelemetry's RPC attributes of the call `method` (`/package.Service/Method`)."""
    service, _, name = method.lstrip("/").rpartition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}


def record_status(span: Any, code: grpc.StatusCode) -> None:
    """Puts a call's status on its span: the code, and an error status for server errors."""
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code in _SERVER_ERRORS:
        span.set_status(Status(StatusCode.ERROR, code.name))


class TracingInterceptor(grpc.aio.ServerInterceptor):
    """Runs every call inside a SERVER span named after its method, with the tracer current."""

    def __init__(self, tracing: Tracing) -> None:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._tracer = tracing.tracer
        self._propagator = TraceContextTextMapPropagator()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        carrier = {key: value for key, value in (details.invocation_metadata or ())
                   if isinstance(value, str)}
        parent = self._propagator.extract(carrier)
        method = details.method
        attributes = call_attributes(method)
        tracer = self._tracer

        from opentelemetry.trace import SpanKind

        def start() -> Any:
            return tracer.start_as_current_span(method.lstrip("/"), context=parent, kind=SpanKind.SERVER,
                                                attributes=attributes, record_exception=False,
                                                set_status_on_exception=False)

        def unary_response(inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            async def traced(request: Any, context: grpc.aio.ServicerContext) -> Any:
                # Each call runs in its own task, so what is set here ends with the call.
                current_tracer.set(tracer)
                with start() as span:
                    try:
                        result = await inner(request, context)
                    except BaseException as exc:
                        record_status(span, call_status(context, exc))
                        raise
                    record_status(span, call_status(context, None))
                    return result

            return traced

        def stream_response(inner: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
            async def traced(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                current_tracer.set(tracer)
                with start() as span:
                    try:
                        async for item in inner(request, context):
                            yield item
                    except BaseException as exc:
                        record_status(span, call_status(context, exc))
                        raise
                    record_status(span, call_status(context, None))

            return traced

        return wrap_behaviour(handler, unary_response, stream_response)
