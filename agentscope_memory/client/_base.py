"""The plumbing every gRPC client shares, asyncio and blocking: the channel (the client's own,
opened on `target` with TLS when `root_certificates` are given, or the caller's, which the
client then does not close), the API key sent as metadata, the deadline of each call, the retry
rule (`_retry`) and `_call`, which checks a request's ids, sends it and raises the library's
errors. Every public method of a client names an argument holding a lone surrogate as the local
mode does (`_validate.refuse_unencodable_in`), wherever its request is built. Paged listings are followed by `_paged`.

A client subclasses `AsyncGrpcClient` or `BlockingGrpcClient` and builds its stubs in
`_bind(channel)`, so every client takes the same constructor parameters. The stubs are bound to a
`ClientChannel`, which finds the real channel at each call: an asyncio client's own channel is
opened in the event loop of its first call (a grpc.aio channel belongs to one loop, and
applications build their agents, so their clients, before `asyncio.run`), and a closed client
refuses every call with `FailedPreconditionError` (`CLOSED`), whatever its channel.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator, Protocol, Self, TypeVar

import grpc

from agentscope_memory.client._common import (
    DEFAULT_TARGET,
    DEFAULT_TIMEOUT_S,
    async_channel,
    blocking_channel,
    metadata,
)
from agentscope_memory.client._retry import RetryPolicy, call_async, call_blocking
from agentscope_memory.client._validate import check_request, refuse_unencodable_in
from agentscope_memory.errors import DeadlineExceededError, FailedPreconditionError

T = TypeVar("T")

# What every call on a closed client raises (`FailedPreconditionError`), in every mode.
CLOSED = "the client is closed: make a new one"


# Added to the deadline error of a blocking call made from a running event loop's thread.
BLOCKING_IN_LOOP = ("this blocking call was made inside a running asyncio event loop, which waited for it, so nothing "
                    "in that loop (an in-process server, say) could answer; use the asyncio client there")


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def closed_error() -> FailedPreconditionError:
    return FailedPreconditionError(CLOSED)


class _Method:
    """One method of a stub: bound, at each call, to the client's channel of that moment."""

    def __init__(self, channel: ClientChannel, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._channel, self._kind, self._args, self._kwargs = channel, kind, args, kwargs
        self._bound: tuple[Any, Any] | None = None  # (real channel, its multicallable)

    def _target(self) -> Any:
        real = self._channel.get()
        if self._bound is None or self._bound[0] is not real:
            self._bound = (real, getattr(real, self._kind)(*self._args, **self._kwargs))
        return self._bound[1]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # with_call, future, ... of the real multicallable
        return getattr(self._target(), name)


class ClientChannel:
    """What a client's stubs are bound to (a stub takes any object with the four multicallable
    makers): the caller's channel, or the client's own, opened by `open_channel` (on first use
    for asyncio, at once for blocking).
    With `per_loop` (asyncio) the own channel is opened in the running loop; a call from another
    loop while that one is alive is refused (the channel cannot work there), and once that loop
    is closed (a later `asyncio.run`) a new channel is opened in the new loop: the old one
    cannot be closed from another loop and is dropped."""

    def __init__(self, given: Any | None, open_channel: Callable[[], Any], per_loop: bool) -> None:
        self._given, self._open, self._per_loop = given, open_channel, per_loop
        # A blocking channel belongs to no loop: opened now, so threads sharing the client
        # never race to open two.
        self._real: Any | None = given if given is not None or per_loop else open_channel()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    @property
    def owned(self) -> bool:
        return self._given is None

    def get(self) -> Any:
        """The real channel for a call now."""
        if self.closed:
            raise closed_error()
        if not self.owned or not self._per_loop:
            assert self._real is not None
            return self._real
        loop = asyncio.get_running_loop()
        if self._real is not None and self._loop is not loop:
            assert self._loop is not None
            if not self._loop.is_closed():
                raise FailedPreconditionError(
                    "the client was first used in another event loop, which is still open: its channel works only "
                    "there; make one client per event loop")
            self._real = None
        if self._real is None:
            self._real, self._loop = self._open(), loop
        return self._real

    def take(self) -> Any | None:
        """Mark the channel closed; the client's own real channel, if opened, for it to close."""
        self.closed = True
        real, self._real = (self._real, None) if self.owned else (None, self._real)
        return real

    def unary_unary(self, *args: Any, **kwargs: Any) -> _Method:
        return _Method(self, "unary_unary", args, kwargs)

    def unary_stream(self, *args: Any, **kwargs: Any) -> _Method:
        return _Method(self, "unary_stream", args, kwargs)

    def stream_unary(self, *args: Any, **kwargs: Any) -> _Method:
        return _Method(self, "stream_unary", args, kwargs)

    def stream_stream(self, *args: Any, **kwargs: Any) -> _Method:
        return _Method(self, "stream_stream", args, kwargs)


class _Page(Protocol):
    next_page_token: str


P = TypeVar("P", bound=_Page)


def _page_request(request: Any, token: str) -> Any:
    # A copy a page: the caller's request is left as it was given (a stub may keep it).
    page = type(request)()
    page.CopyFrom(request)
    page.page_token = token
    return page


def _left(timeout: float, deadline: float | None) -> float:
    # What is left of a deadline; a spent one still sends the call, which gRPC then fails with
    # DEADLINE_EXCEEDED as it fails any call out of time.
    return timeout if deadline is None else max(deadline - time.monotonic(), 0.001)


class AsyncGrpcClient:
    """An asyncio gRPC client: its channel, API key, deadline and retries (see the module)."""

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.aio.Channel | ClientChannel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        # Nothing is dialled here: the own channel opens in the loop of the first call.
        self._channel = ClientChannel(channel, lambda: async_channel(target, root_certificates), per_loop=True)
        self._metadata = metadata(api_key)
        self.timeout = timeout
        self.retry_policy = RetryPolicy(retries)
        self._bind(self._channel)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        refuse_unencodable_in(cls)

    def _bind(self, channel: grpc.aio.Channel) -> None:
        """Build the client's stubs on `channel`."""

    async def close(self) -> None:
        """Close the client's own channel (a given one stays open); every later call raises
        `FailedPreconditionError`. Closing again does nothing."""
        real = self._channel.take()
        if real is not None:
            await real.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any, retry: bool = True,
                     deadline: float | None = None, wait_for_ready: bool = False) -> T:
        """`deadline` (time.monotonic()): the end of a call made of several, instead of `timeout`.
        `wait_for_ready`: the call waits, within its deadline, for a server that cannot be reached
        (restarting, say) and is sent once it can be, where a call that is not retried would fail
        at once; it is still sent at most once."""
        if self._channel.closed:
            raise closed_error()
        check_request(request)
        return await call_async(self.retry_policy, method, request, retry=retry, timeout=_left(self.timeout, deadline),
                                metadata=self._metadata, **({"wait_for_ready": True} if wait_for_ready else {}))

    async def _paged(self, method: Callable[..., Awaitable[P]], request: Any,
                     deadline: float | None = None) -> AsyncIterator[P]:
        """Every page of a listing, from the first: `request` with each page's token in turn;
        each page within `timeout`, or all of them before `deadline`."""
        token = ""
        while True:
            response = await self._call(method, _page_request(request, token), deadline=deadline)
            yield response
            token = response.next_page_token
            if not token:
                return


class BlockingGrpcClient:
    """A blocking gRPC client: `AsyncGrpcClient`'s plumbing on a blocking channel."""

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.Channel | ClientChannel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        self._channel = ClientChannel(channel, lambda: blocking_channel(target, root_certificates), per_loop=False)
        self._metadata = metadata(api_key)
        self.timeout = timeout
        self.retry_policy = RetryPolicy(retries)
        self._bind(self._channel)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        refuse_unencodable_in(cls)

    def _bind(self, channel: grpc.Channel) -> None:
        """Build the client's stubs on `channel`."""

    def close(self) -> None:
        """Close the client's own channel (a given one stays open); every later call raises
        `FailedPreconditionError`. Closing again does nothing."""
        real = self._channel.take()
        if real is not None:
            real.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Callable[..., T], request: Any, retry: bool = True,
                     deadline: float | None = None, wait_for_ready: bool = False) -> T:
        """`AsyncGrpcClient._call`, blocking."""
        if self._channel.closed:
            raise closed_error()
        check_request(request)
        try:
            return call_blocking(self.retry_policy, method, request, retry=retry,
                                 timeout=_left(self.timeout, deadline), metadata=self._metadata,
                                 **({"wait_for_ready": True} if wait_for_ready else {}))
        except DeadlineExceededError as exc:
            if not _in_running_loop():
                raise
            # The likely cause, which the bare deadline does not say: this call blocked the event
            # loop of its thread, where the server (or whatever it waits for) may run.
            error = DeadlineExceededError(f"{exc}: {BLOCKING_IN_LOOP}")
            error.grpc_code = getattr(exc, "grpc_code", None)  # type: ignore[attr-defined]
            raise error from None

    def _paged(self, method: Callable[..., P], request: Any, deadline: float | None = None) -> Iterator[P]:
        """Every page of a listing, from the first: `request` with each page's token in turn;
        each page within `timeout`, or all of them before `deadline`."""
        token = ""
        while True:
            response = self._call(method, _page_request(request, token), deadline=deadline)
            yield response
            token = response.next_page_token
            if not token:
                return
