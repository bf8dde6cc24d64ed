"""Registering services with the wrappers every call of every method goes through.

Undecodable requests (`decoding.py`) and draining (`drain.py`) apply to every call, whatever the
settings. As interceptors they rebuilt each method's handler on every call and added a turn of
grpc's interceptor chain (about 15 µs a call, as much as a third of what a small call costs on
top of grpc itself); here each method's handler is wrapped once, when it is registered or first
looked up, and a server with no optional interceptor (auth, metrics, tracing) runs none.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import grpc

# (full method name, e.g. "/agentscope.memory.v1.MemoryService/AddMessages", its handler) to
# the handler that serves it.
HandlerWrapper = Callable[[str, grpc.RpcMethodHandler], grpc.RpcMethodHandler]


def chain(*wrappers: HandlerWrapper) -> HandlerWrapper:
    """The first wrapper outermost: its behaviour runs first and sees what the others return."""

    def wrap(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        for wrapper in reversed(wrappers):
            handler = wrapper(method, handler)
        return handler

    return wrap


class _WrappedGenericHandler(grpc.GenericRpcHandler):
    """A generic handler whose method handlers come out wrapped, each wrapped once."""

    def __init__(self, inner: grpc.GenericRpcHandler, wrapper: HandlerWrapper) -> None:
        self._inner = inner
        self._wrapper = wrapper
        # Keyed by method, holding the handler it was made from: a generic handler that answers
        # a method with a new handler gets it wrapped anew. Only methods the inner handler
        # serves are kept, so a client naming made-up methods cannot grow it.
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = self._inner.service(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = self._wrapper(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped


class WrappingRegistrar:
    """What the generated `add_*Servicer_to_server` functions (and health and reflection) are
    given in place of the server: it registers their handlers with the server, wrapped."""

    def __init__(self, server: grpc.aio.Server, wrapper: HandlerWrapper) -> None:
        self._server = server
        self._wrapper = wrapper

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(
            tuple(_WrappedGenericHandler(h, self._wrapper) for h in generic_rpc_handlers))

    def add_registered_method_handlers(self, service_name: str, method_handlers: Mapping[str, Any]) -> None:
        self._server.add_registered_method_handlers(service_name, {
            name: self._wrapper(f"/{service_name}/{name}", handler) for name, handler in method_handlers.items()
        })
