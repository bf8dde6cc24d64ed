"""The one place that turns library errors into gRPC status codes.

Servicers raise library errors; the decorators here abort with the matching code and the
error's own message. Anything unexpected becomes INTERNAL with an incident id that is also in
the server log with the traceback, never UNKNOWN with a Python traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from typing import Any, AsyncGenerator, AsyncIterator, Awaitable, Callable, TypeVar

import grpc

from agentscope_memory import errors

log = logging.getLogger("agentscope_memory_server")

_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (errors.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFoundError, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (errors.FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.AbortedError, grpc.StatusCode.ABORTED),
    (errors.ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (errors.DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.UnimplementedError, grpc.StatusCode.UNIMPLEMENTED),
    (errors.UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (errors.PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
]

F = TypeVar("F", bound=Callable[..., Any])


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code, str(exc)
    return None


def status_of(exc: Exception, method: str) -> tuple[grpc.StatusCode, str]:
    """The status a call fails with for `exc`: the library error's own, or INTERNAL with an
    incident id that the server log also holds, with the traceback (call within `except`)."""
    mapped = status_for(exc)
    if mapped is not None:
        return mapped
    incident = uuid.uuid4().hex[:12]
    log.exception("unexpected error in %s (incident %s)", method, incident)
    return grpc.StatusCode.INTERNAL, f"internal error (incident {incident}); see the server log"


async def _abort_for(exc: Exception, context: grpc.aio.ServicerContext, method: str) -> None:
    await context.abort(*status_of(exc, method))


# A client stream refused before its end is read to its end, up to this much, before the answer.
_DRAIN_BYTES = 64 * 1024 * 1024
_DRAIN_S = 5.0


async def _drain(requests: AsyncIterator[Any]) -> None:
    """Read what a client still streams, up to `_DRAIN_BYTES` and `_DRAIN_S`, discarding it.
    A grpc.aio client whose write fails because the server already answered reports INTERNAL
    "Internal error from Core" in place of that answer when its event loop sees the failed write
    after the status (grpc/grpc#36066): a caller streaming a value too large would hear of an
    internal error about one time in forty. Once the client has sent everything, its writes
    cannot fail, so it hears the real reason. A client streaming more than the budget is cut
    off as before."""
    loop = asyncio.get_running_loop()
    until, left = loop.time() + _DRAIN_S, _DRAIN_BYTES

    async def read() -> None:
        nonlocal left
        async for item in requests:
            left -= item.ByteSize()
            if left < 0:
                return

    with contextlib.suppress(Exception):
        await asyncio.wait_for(read(), max(until - loop.time(), 0))


def grpc_errors(method: F) -> F:
    """Map library errors of a unary or client-streaming RPC handler to status codes."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001 - mapped or reported as INTERNAL
            if hasattr(request, "__aiter__") and status_for(exc) is not None:
                await _drain(request)
            await _abort_for(exc, context, method.__qualname__)

    return wrapper  # type: ignore[return-value]


_GONE = object()
# How often a stream waiting for its next item checks that its caller is still there.
_CALLER_CHECK_S = 1.0


async def _next_while_open(items: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
    """The stream's next item, or `_GONE` when it ends or its caller has gone (a cancelled call
    or a passed deadline). gRPC only notices a gone caller on a write, so a watch with nothing to
    send would otherwise keep its handler, and its polling, alive until the server stops."""
    step = asyncio.ensure_future(items.__anext__())
    try:
        while True:
            done, _ = await asyncio.wait({step}, timeout=_CALLER_CHECK_S)
            if done:
                try:
                    return step.result()
                except StopAsyncIteration:
                    return _GONE
            if context.done() or context.cancelled():
                return _GONE
    finally:
        if not step.done():
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await step


def grpc_stream_errors(method: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    """The same for server-streaming handlers (async generators)."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        items = method(self, request, context).__aiter__()
        try:
            while True:
                item = await _next_while_open(items, context)
                if item is _GONE:
                    return
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001
            await _abort_for(exc, context, method.__qualname__)
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()

    return wrapper


def unimplemented(what: str) -> Callable[..., Awaitable[Any]]:
    """A handler for a contract RPC this server does not provide yet; says what is missing."""

    async def handler(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, what)

    return handler


def grpc_bidi_errors(
    method: Callable[..., AsyncGenerator[Any, None]],
) -> Callable[..., AsyncIterator[Any]]:
    """The same for bidirectional handlers (async generators over a request stream)."""

    @functools.wraps(method)
    async def wrapper(self: Any, requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        items = method(self, requests, context)
        try:
            async for item in items:
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # noqa: BLE001
            await _abort_for(exc, context, method.__qualname__)

    return wrapper
