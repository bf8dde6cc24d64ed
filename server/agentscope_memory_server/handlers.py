"""Wrapping a gRPC method handler's behaviour, whatever its kind, for the interceptors and the
wrappers every handler is registered with (`registration.py`).

A handler carries its behaviour under one of four names (`unary_unary`, `unary_stream`,
`stream_unary`, `stream_stream`). An interceptor that wraps only the kinds it thought of passes
the others through untouched: that is how a client-streaming call (`StreamLoadState`) once ran
with no tenant and no key check. Everything that wraps behaviours goes through here, so
each kind is wrapped, by the wrapper for calls answered once or for calls answered by a stream.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import grpc

# A handler's behaviour: `(request or request iterator, context)` to a response, or to an async
# iterator of responses.
Behaviour = Callable[[Any, grpc.aio.ServicerContext], Any]


def wrap_behaviour(handler: grpc.RpcMethodHandler, answered_once: Callable[[Behaviour], Behaviour],
                   streamed: Callable[[Behaviour], Behaviour]) -> grpc.RpcMethodHandler:
    """`handler` with its behaviour wrapped: by `answered_once` for unary and client-streaming
    calls, by `streamed` for server-streaming and bidirectional ones (an async generator function,
    which grpc iterates, or a coroutine function that answers with a status only)."""
    if handler.unary_unary is not None:
        return handler._replace(unary_unary=answered_once(handler.unary_unary))
    if handler.stream_unary is not None:
        return handler._replace(stream_unary=answered_once(handler.stream_unary))
    if handler.unary_stream is not None:
        return handler._replace(unary_stream=streamed(handler.unary_stream))
    if handler.stream_stream is not None:
        return handler._replace(stream_stream=streamed(handler.stream_stream))
    return handler


def call_status(context: grpc.aio.ServicerContext, exc: BaseException | None) -> grpc.StatusCode:
    """The status a call ended with, for the interceptors that report it (`exc`: what ended the
    behaviour, None when it returned).

    A call the client cancelled, or whose deadline passed, ends with its task cancelled and no
    code set: that is CANCELLED or DEADLINE_EXCEEDED as the client sees it, not UNKNOWN (which
    would make every stream a client walks away from a server error).
    """
    code = context.code() if hasattr(context, "code") else None
    if isinstance(code, grpc.StatusCode):
        return code
    if exc is None:
        return grpc.StatusCode.OK
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        remaining = context.time_remaining() if hasattr(context, "time_remaining") else None
        return grpc.StatusCode.DEADLINE_EXCEEDED if remaining is not None and remaining <= 0 else grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN
