"""Requests that cannot be decoded get INVALID_ARGUMENT, on every RPC of every service.

grpcio answers UNKNOWN ("Unexpected DecodeError") when a request deserializer raises: invalid
UTF-8 in a string field, truncated or garbage bytes, or messages nested beyond protobuf's
recursion limit (a tool result in a tool result, a hundred times). `decode_errors` wraps the
deserializer of every handler the server registers (`registration.py`): a failed decode becomes a
marker, and the wrapped behaviour answers INVALID_ARGUMENT with the reason instead of calling the
servicer.

On the way out it lets a unary servicer answer with a response already in its wire form
(`convert.encoded.Encoded`, a page of stored messages), which is sent as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from agentscope_memory.convert.encoded import Encoded


class _Undecodable:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _message(request: _Undecodable) -> str:
    return f"request: cannot be decoded as the RPC's request message ({request.reason})"


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    # protobuf's messages are short and name no user data; keep them so a person can act.
    return text.splitlines()[0][:200]


def _wrap_deserializer(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def safe(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:  # noqa: BLE001 - any decode failure is the client's input
            return _Undecodable(_reason(exc))

    return safe


def _passing_encoded(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes] | None:
    if serialize is None:
        return None

    def encode(response: Any) -> bytes:
        return response.data if isinstance(response, Encoded) else serialize(response)

    return encode


def _wrap_unary(behaviour: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(request))
        return await behaviour(request, context)

    return checked


def _wrap_stream(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    async def checked(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(request))
        async for item in behaviour(request, context):
            yield item

    return checked


def _wrap_upload(behaviour: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A client stream decodes each piece as it arrives: the first undecodable one ends the call."""

    async def checked(requests: Any, context: grpc.aio.ServicerContext) -> Any:
        async def decoded() -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, _Undecodable):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(request))
                yield request

        return await behaviour(decoded(), context)

    return checked


def _wrap_bidi(behaviour: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """A bidirectional stream decodes each request as it arrives: the first undecodable one ends the call."""

    async def checked(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def decoded() -> AsyncIterator[Any]:
            async for request in requests:
                if isinstance(request, _Undecodable):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(request))
                yield request

        async for item in behaviour(decoded(), context):
            yield item

    return checked


def decode_errors(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """`handler` answering INVALID_ARGUMENT to a request it cannot decode (a `registration`
    wrapper: innermost, so every other wrapper and interceptor sees decoded requests only)."""
    if handler.stream_unary is not None:
        return handler._replace(
            request_deserializer=_wrap_deserializer(handler.request_deserializer),
            stream_unary=_wrap_upload(handler.stream_unary),
        )
    if handler.stream_stream is not None:
        return handler._replace(
            request_deserializer=_wrap_deserializer(handler.request_deserializer),
            stream_stream=_wrap_bidi(handler.stream_stream),
        )
    if handler.unary_unary is not None:
        return handler._replace(
            request_deserializer=_wrap_deserializer(handler.request_deserializer),
            response_serializer=_passing_encoded(handler.response_serializer),
            unary_unary=_wrap_unary(handler.unary_unary),
        )
    if handler.unary_stream is not None:
        return handler._replace(
            request_deserializer=_wrap_deserializer(handler.request_deserializer),
            unary_stream=_wrap_stream(handler.unary_stream),
        )
    return handler
