"""Prometheus metrics: calls and latency per RPC and status code, on their own HTTP port.

With API keys configured, `/metrics` wants one too (Prometheus sends `Authorization: Bearer`,
`authorization.credentials_file` in its scrape config): what it shows is the server's, not a
tenant's, so any configured key may read it, and no series is labelled with a tenant or an id.
"""

from __future__ import annotations

import contextvars
import time
from typing import Any, AsyncIterator, Awaitable, Callable

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, make_asgi_app

from agentscope_memory.errors import UnauthenticatedError
from agentscope_memory_server.auth_failures import TooManyFailedAuthentications
from agentscope_memory_server.handlers import Behaviour, call_status, wrap_behaviour
from agentscope_memory_server.tenancy import ApiKeys


# The metrics of the server running the current call (set by `MetricsInterceptor`), for calls
# carried inside a stream (`embedded_calls`), which the interceptor does not see one by one.
current_metrics: contextvars.ContextVar[Metrics | None] = contextvars.ContextVar(
    "agentscope_memory_metrics", default=None)


class Metrics:
    """One registry per server (no process-global collectors)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "agentscope_memory_rpc_calls", "RPCs handled", ["method", "code"], registry=self.registry
        )
        self.latency = Histogram(
            "agentscope_memory_rpc_seconds",
            "RPC handling time",
            ["method"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        # OpenTelemetry's RPC semantic convention `rpc.server.call.duration` (seconds), in
        # Prometheus form, for dashboards built on the convention; it also counts streaming calls.
        self.call_duration = Histogram(
            "rpc_server_call_duration_seconds",
            "Duration of RPCs handled by the server (OpenTelemetry rpc.server.call.duration)",
            ["rpc_system", "rpc_service", "rpc_method", "rpc_grpc_status_code"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )

    def observe(self, method: str, code: str, seconds: float, unary: bool) -> None:
        """Records one finished call (`method` as gRPC names it: `/package.Service/Method`)."""
        service, _, name = method.lstrip("/").rpartition("/")
        status = grpc.StatusCode[code].value[0] if code in grpc.StatusCode.__members__ else 2
        self.call_duration.labels("grpc", service, name, str(status)).observe(seconds)
        if unary:
            self.calls.labels(method, code).inc()
            self.latency.labels(method).observe(seconds)

    def app(self, keys: ApiKeys) -> Callable[..., Awaitable[None]]:
        """The ASGI app of `/metrics` (any path, as Prometheus' own server): the registry in
        the text format, to a request with a known key when keys are configured (else 401)."""
        exposition = make_asgi_app(self.registry)

        async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                      send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
            if scope["type"] == "lifespan":
                await _no_lifespan(receive, send)
                return
            if scope["type"] != "http":
                return
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
            client = scope.get("client")
            try:
                keys.authenticate(headers, client[0] if client else None)
            except UnauthenticatedError as exc:
                await _refuse(send, 401, str(exc), (b"www-authenticate", b'Bearer realm="agentscope-memory"'))
                return
            except TooManyFailedAuthentications as exc:
                await _refuse(send, 429, str(exc), (b"retry-after", str(exc.retry_after).encode()))
                return
            await exposition(scope, receive, send)

        return app


async def _refuse(send: Callable[[dict[str, Any]], Awaitable[None]], status: int, reason: str,
                  header: tuple[bytes, bytes]) -> None:
    body = f"{reason}\n".encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()), header]})
    await send({"type": "http.response.body", "body": body})


async def _no_lifespan(receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    # Nothing to start or stop; answering keeps uvicorn from logging that lifespan is unsupported.
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _code_of(exc: BaseException, context: grpc.aio.ServicerContext) -> str:
    return call_status(context, exc).name


def _observed_stream(inner: Callable[..., AsyncIterator[Any]], method: str, metrics: Metrics) -> Callable[..., AsyncIterator[Any]]:
    """A server-streaming or bidirectional handler, timed and counted when its stream ends. The
    first argument is the request (server stream) or the request iterator (bidirectional)."""

    async def observed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        # Each call runs in its own task, so what is set here ends with the call; calls a stream
        # carries (embedded_calls) are counted through it.
        current_metrics.set(metrics)
        started = time.perf_counter()
        code = "OK"
        try:
            async for item in inner(request, context):
                yield item
        except BaseException as exc:
            code = _code_of(exc, context)
            raise
        finally:
            metrics.observe(method, code, time.perf_counter() - started, unary=False)

    return observed


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        method = details.method
        metrics = self._metrics

        def answered_once(behaviour: Behaviour) -> Behaviour:
            async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
                started = time.perf_counter()
                code = "OK"
                try:
                    return await behaviour(request, context)
                except BaseException as exc:
                    code = _code_of(exc, context)
                    raise
                finally:
                    metrics.observe(method, code, time.perf_counter() - started, unary=True)

            return observed

        return wrap_behaviour(handler, answered_once, lambda behaviour: _observed_stream(behaviour, method, metrics))
