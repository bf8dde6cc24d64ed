"""Prometheus metrics: calls and latency per RPC and status code, on their own HTTP port."""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server


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
        self._server: Any = None

    def serve(self, host: str, port: int) -> int:
        self._server, thread = start_http_server(port, addr=host, registry=self.registry)
        del thread
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _code_of(exc: BaseException, context: grpc.aio.ServicerContext) -> str:
    code = context.code() if hasattr(context, "code") else None
    if isinstance(code, grpc.StatusCode):
        return code.name
    return "UNKNOWN" if not isinstance(exc, grpc.aio.AbortError) else "ABORTED_BY_HANDLER"


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary
        method = details.method
        metrics = self._metrics

        async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = time.perf_counter()
            code = "OK"
            try:
                return await inner(request, context)
            except BaseException as exc:
                code = _code_of(exc, context)
                raise
            finally:
                metrics.calls.labels(method, code).inc()
                metrics.latency.labels(method).observe(time.perf_counter() - started)

        return handler._replace(unary_unary=observed)
