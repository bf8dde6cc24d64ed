"""The plumbing every gRPC client shares, asyncio and blocking: the channel (the client's own,
opened on `target` with TLS when `root_certificates` are given, or the caller's, which the
client then does not close), the API key sent as metadata, the deadline of each call, the retry
rule (`_retry`) and `_call`, which checks a request's ids, sends it and raises the library's
errors. Every public method of a client names an argument holding a lone surrogate as the local
mode does (`_validate.refuse_unencodable_in`), wherever its request is built. Paged listings are followed by `_paged`.

A client subclasses `AsyncGrpcClient` or `BlockingGrpcClient` and builds its stubs in
`_bind(channel)`, so every client takes the same constructor parameters.
"""

from __future__ import annotations

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

T = TypeVar("T")


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

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.aio.Channel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        self._own_channel = channel is None
        self._channel = channel if channel is not None else async_channel(target, root_certificates)
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
        if self._own_channel:
            await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any, retry: bool = True,
                     deadline: float | None = None) -> T:
        """`deadline` (time.monotonic()): the end of a call made of several, instead of `timeout`."""
        check_request(request)
        return await call_async(self.retry_policy, method, request, retry=retry, timeout=_left(self.timeout, deadline),
                                metadata=self._metadata)

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

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.Channel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        self._own_channel = channel is None
        self._channel = channel if channel is not None else blocking_channel(target, root_certificates)
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
        if self._own_channel:
            self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: Callable[..., T], request: Any, retry: bool = True,
                     deadline: float | None = None) -> T:
        """`deadline` (time.monotonic()): the end of a call made of several, instead of `timeout`."""
        check_request(request)
        return call_blocking(self.retry_policy, method, request, retry=retry, timeout=_left(self.timeout, deadline),
                             metadata=self._metadata)

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
