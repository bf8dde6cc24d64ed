"""The gRPC clients' shared plumbing (`client/_base.py`): one constructor for every client, the
channel a client owns (and only that one) closed with it, the API key and deadline on each call,
the retry rule, ids checked before sending, and paged listings followed on copies of the request."""

from __future__ import annotations

import inspect
from typing import Any

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pool_pb
from agentscope_memory.client import _base
from agentscope_memory.client._base import AsyncGrpcClient, BlockingGrpcClient
from agentscope_memory.client.agent_state import AsyncAgentStateClient, AsyncLocalAgentStateClient
from agentscope_memory.client.aio import AsyncMemoryClient
from agentscope_memory.client.auto_context import AsyncAutoContextClient, AsyncLocalAutoContextClient, AutoContextClient
from agentscope_memory.client.lifecycle_reflect import AsyncLocalReflectionClient, AsyncReflectionClient, ReflectionClient
from agentscope_memory.client.local import AsyncLocalLongTermClient, AsyncLocalMemoryClient
from agentscope_memory.client.long_term import AsyncLongTermClient, LongTermClient
from agentscope_memory.client.pool import AsyncLocalPoolClient, AsyncPoolClient, PoolClient
from agentscope_memory.client.scopes import AsyncLocalScopeClient, AsyncScopeClient, ScopeClient
from agentscope_memory.client.sync import MemoryClient
from agentscope_memory.client.tiered import AsyncLocalTieredClient, AsyncTieredClient, TieredClient
from agentscope_memory.errors import InvalidArgumentError, UnavailableError

ASYNC_CLIENTS = [AsyncMemoryClient, AsyncPoolClient, AsyncTieredClient, AsyncScopeClient, AsyncLongTermClient,
                 AsyncReflectionClient, AsyncAutoContextClient]
BLOCKING_CLIENTS = [MemoryClient, PoolClient, TieredClient, ScopeClient, LongTermClient, ReflectionClient,
                    AutoContextClient]


def _parameters(cls: type) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]


class FakeChannel:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "server gone"


def _pages(tokens: list[str]) -> tuple[list[Any], Any]:
    """A fake paged method answering with `tokens` as next_page_token in turn; it records the
    requests and keyword arguments it was called with."""
    seen: list[Any] = []
    answers = iter(tokens)

    def method(request: Any, **kwargs: Any) -> pool_pb.ListPoolEntriesResponse:
        seen.append((request, kwargs))
        return pool_pb.ListPoolEntriesResponse(next_page_token=next(answers))

    return seen, method


@pytest.mark.parametrize("cls", ASYNC_CLIENTS + BLOCKING_CLIENTS)
def test_every_client_takes_the_constructor_of_its_base(cls: type) -> None:
    base = AsyncGrpcClient if cls in ASYNC_CLIENTS else BlockingGrpcClient
    assert issubclass(cls, base)
    assert _parameters(cls) == _parameters(base)
    assert [name for name, _, _ in _parameters(cls)] == ["target", "channel", "api_key", "root_certificates",
                                                         "timeout", "retries"]


async def test_agent_state_keeps_its_three_retries() -> None:
    expected = [(n, k, 3 if n == "retries" else d) for n, k, d in _parameters(AsyncGrpcClient)]
    assert _parameters(AsyncAgentStateClient) == expected
    async with AsyncAgentStateClient("127.0.0.1:1") as client:  # no call: nothing is dialled
        assert client.retry_policy.retries == 3


def test_a_given_channel_stays_open_an_own_one_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    given = FakeChannel()
    BlockingGrpcClient(channel=given).close()  # type: ignore[arg-type]
    assert given.closed == 0

    opened: list[tuple[str, bytes | None]] = []
    own = FakeChannel()

    def open_channel(target: str, root_certificates: bytes | None) -> FakeChannel:
        opened.append((target, root_certificates))
        return own

    monkeypatch.setattr(_base, "blocking_channel", open_channel)
    with BlockingGrpcClient("memory.example:443", root_certificates=b"ca") as client:
        assert client._channel.get() is own and client._channel.get() is own
    assert opened == [("memory.example:443", b"ca")] and own.closed == 1


async def test_an_async_client_closes_only_its_own_channel(monkeypatch: pytest.MonkeyPatch) -> None:
    class AsyncFakeChannel:
        closed = 0

        async def close(self) -> None:
            self.closed += 1

    given, own = AsyncFakeChannel(), AsyncFakeChannel()
    await AsyncGrpcClient(channel=given).close()  # type: ignore[arg-type]
    monkeypatch.setattr(_base, "async_channel", lambda target, root_certificates: own)
    async with AsyncGrpcClient("memory.example:443") as client:
        assert client._channel.get() is own
    assert given.closed == 0 and own.closed == 1


def test_paged_follows_the_tokens_on_copies_with_key_and_deadline() -> None:
    client = BlockingGrpcClient(channel=FakeChannel(), api_key="k-1", timeout=7)  # type: ignore[arg-type]
    seen, method = _pages(["a", "b", ""])
    request = pool_pb.ListPoolEntriesRequest(pool_id="团队", page_size=2)

    assert [r.next_page_token for r in client._paged(method, request)] == ["a", "b", ""]
    assert [r.page_token for r, _ in seen] == ["", "a", "b"]
    assert all(r.pool_id == "团队" and r.page_size == 2 and r is not request for r, _ in seen)
    assert request.page_token == ""  # the caller's request is left as it was
    assert all(k["metadata"] == [("x-api-key", "k-1")] and 0 < k["timeout"] <= 7 for _, k in seen)


async def test_async_paged_follows_the_tokens_too() -> None:
    client = AsyncGrpcClient(channel=FakeChannel())  # type: ignore[arg-type]
    seen, method = _pages(["next", ""])

    async def call(request: Any, **kwargs: Any) -> Any:
        return method(request, **kwargs)

    pages = [r async for r in client._paged(call, pool_pb.ListPoolEntriesRequest(pool_id="p"))]
    assert len(pages) == 2 and [r.page_token for r, _ in seen] == ["", "next"]
    assert seen[0][1]["metadata"] is None  # no API key: no metadata


def test_call_retries_only_safe_calls_within_the_policy() -> None:
    attempts = 0

    def down(request: Any, **kwargs: Any) -> Any:
        nonlocal attempts
        attempts += 1
        raise Unavailable()

    client = BlockingGrpcClient(channel=FakeChannel(), retries=2, timeout=30)  # type: ignore[arg-type]
    with pytest.raises(UnavailableError, match="server gone"):
        client._call(down, mem_pb.GetMemoryRequest(memory_id="m"), retry=False)
    assert attempts == 1
    attempts = 0
    with pytest.raises(UnavailableError):
        client._call(down, mem_pb.GetMemoryRequest(memory_id="m"))
    assert attempts == 3  # the first and `retries` more


def test_call_checks_ids_before_sending() -> None:
    sent: list[Any] = []
    client = BlockingGrpcClient(channel=FakeChannel())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="memory_id"):
        client._call(lambda request, **kwargs: sent.append(request), mem_pb.GetMemoryRequest(memory_id="a\x00b"))
    assert sent == []



def _methods(cls: type) -> dict[str, list[tuple[str, Any]]]:
    return {name: [(p.name, p.default) for p in inspect.signature(member).parameters.values()]
            for name, member in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_") and name not in ("local", "close")}


@pytest.mark.parametrize(("remote", "local"), [
    (AsyncMemoryClient, AsyncLocalMemoryClient), (AsyncLongTermClient, AsyncLocalLongTermClient),
    (AsyncPoolClient, AsyncLocalPoolClient), (AsyncTieredClient, AsyncLocalTieredClient),
    (AsyncScopeClient, AsyncLocalScopeClient), (AsyncReflectionClient, AsyncLocalReflectionClient),
    (AsyncAgentStateClient, AsyncLocalAgentStateClient), (AsyncAutoContextClient, AsyncLocalAutoContextClient),
])
def test_the_local_mode_has_every_method_and_parameter_of_the_remote_client(remote: type, local: type) -> None:
    """Local mode promises the remote client's methods: a missing one (agent state's
    `keys_page`) raised AttributeError, a missing parameter (`progress=`, `ranking=`) TypeError."""
    assert _methods(local) == _methods(remote)


@pytest.mark.parametrize(("aio", "blocking"), list(zip(ASYNC_CLIENTS, BLOCKING_CLIENTS, strict=True)))
def test_the_blocking_client_has_every_method_and_parameter_of_the_asyncio_one(aio: type, blocking: type) -> None:
    """The blocking clients promise the asyncio clients' methods (their local mode wraps the
    asyncio local client, so it has them): `MemoryClient` lacked `read_messages` and
    `add_messages_with_etags`."""
    assert _methods(blocking) == _methods(aio)


async def test_scope_clients_never_repeat_a_record() -> None:
    """Record has no request id: repeated after a lost reply it stores the memories twice, so
    the scope clients send it once, as `LongTermClient.record` does (they used to retry it)."""
    from agentscope_memory.long_term import Scope
    from agentscope_memory.message import Msg, MsgRole

    attempts = 0

    def down(request: Any, **kwargs: Any) -> Any:
        nonlocal attempts
        attempts += 1
        raise Unavailable()

    async def down_async(request: Any, **kwargs: Any) -> Any:
        nonlocal attempts
        attempts += 1
        raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "server gone")

    msgs = [Msg.create(MsgRole.USER, "我住在北京")]
    blocking = ScopeClient("127.0.0.1:1", retries=3)
    blocking._long_term = type("Stub", (), {"Record": staticmethod(down)})()
    with blocking, pytest.raises(UnavailableError):
        blocking.record(Scope("代理", "用户"), msgs, visibility="GLOBAL")
    assert attempts == 1

    attempts = 0
    async with AsyncScopeClient("127.0.0.1:1", retries=3) as client:
        client._long_term = type("Stub", (), {"Record": staticmethod(down_async)})()
        with pytest.raises(UnavailableError):
            await client.record(Scope("代理", "用户"), msgs)
    assert attempts == 1
