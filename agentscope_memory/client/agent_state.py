"""Python clients for `AgentStateService` (AgentScope-Java 2.x agent state), asyncio and
blocking, remote and local, in library types.

Reads are retried on UNAVAILABLE; writes are retried only when conditional (a compare-and-set
repeated after a lost reply fails with `StateConflictError` instead of writing twice). A
conflict raises `StateConflictError` carrying the version that won.

Values of any size up to the server's `max_state_streamed_value_bytes` (64 MiB by default):
`put_value` sends a value larger than one message carries (`UNARY_VALUE_BYTES`, or the server's
lower `max_state_value_bytes`) through `StreamPutValue`, in pieces; `get_value` asks `GetValue`
and, for a value too large for it, reads it through `StreamGetValue`. Both work over a channel
with gRPC's default 4 MiB message limit.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import agent_state_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import (
    agent_state_service_pb2_grpc as pb_grpc,
)
from agentscope_memory.agent_state import (
    KeyPage,
    ListPage,
    ListWrite,
    SessionIdPage,
    Slot,
    StateConflictError,
    StoredValue,
)
from agentscope_memory.client._base import AsyncGrpcClient
from agentscope_memory.client._common import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from agentscope_memory.client.local import Blocking, _LocalClient
from agentscope_memory.convert.agent_state import (
    condition_to_proto,
    keys_from_proto,
    put_stream_to_proto,
    list_page_from_proto,
    list_write_from_proto,
    session_ids_from_proto,
    slot_to_proto,
    value_from_proto,
    value_from_stream,
)
from agentscope_memory.errors import AbortedError, FailedPreconditionError, InvalidArgumentError, ResourceExhaustedError

T = TypeVar("T")

# The largest value `put_value` sends in one `PutValue`: a server's default (and greatest)
# `max_state_value_bytes`. A larger one goes through `StreamPutValue`.
UNARY_VALUE_BYTES = 4 * 1024 * 1024 - 64 * 1024

_CURRENT = re.compile(r"(?:current length (\d+); )?current version (\d+)$")


def _conflict(exc: AbortedError) -> AbortedError:
    """The server's ABORTED as a `StateConflictError` when it names the current version."""
    match = _CURRENT.search(str(exc))
    if match is None:
        return exc
    conflict = StateConflictError("state", int(match.group(2)), int(match.group(1)) if match.group(1) else None)
    conflict.args = exc.args
    conflict.retried = getattr(exc, "attempts", 1) > 1
    return conflict


class _SessionIds:
    """`iter_session_ids` over the pages of `list_session_ids_page`, remote and local alike."""

    async def list_session_ids_page(self, user_id: str = "", page_size: int = 0, page_token: str = "") -> SessionIdPage:
        raise NotImplementedError

    async def iter_session_ids(self, user_id: str = "", page_size: int = 0) -> AsyncIterator[str]:
        token = ""
        while True:
            page = await self.list_session_ids_page(user_id, page_size, token)
            for session_id in page.session_ids:
                yield session_id
            token = page.next_page_token
            if not token:
                return


class AsyncAgentStateClient(AsyncGrpcClient, _SessionIds):
    """Agent state over gRPC (asyncio). `Slot(user_id, session_id)` addresses a slot; an empty
    user id is the anonymous user."""

    # At most 3 retries by default, where the other clients retry until the deadline.
    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.aio.Channel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int = 3) -> None:
        super().__init__(target, channel=channel, api_key=api_key, root_certificates=root_certificates,
                         timeout=timeout, retries=retries)

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.AgentStateServiceStub(channel)

    @staticmethod
    def local(service: Any = None) -> AsyncLocalAgentStateClient:
        """The same methods over an in-process service (no server, no gRPC)."""
        return AsyncLocalAgentStateClient(service)

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any, retry: bool = True,
                    deadline: float | None = None, wait_for_ready: bool = False) -> T:
        try:
            return await super()._call(method, request, retry, deadline, wait_for_ready)
        except AbortedError as exc:
            raise _conflict(exc) from None

    async def put_value(self, slot: Slot, key: str, json_text: str, *, expected_version: int | None = None,
                        streamed: bool | None = None) -> int:
        """Stores a value; returns this write's version. `streamed`: True sends it in pieces
        (`StreamPutValue`), False whole (`PutValue`), None (default) whole when it fits one
        message, else in pieces."""
        retry = expected_version is not None
        if streamed is None or not streamed:
            try:
                size = len(json_text.encode("utf-8"))
            except UnicodeEncodeError:
                raise InvalidArgumentError("json", "contains an unpaired surrogate (not valid Unicode text)") from None
            if streamed is False or size <= UNARY_VALUE_BYTES:
                request = pb.PutValueRequest(slot=slot_to_proto(slot), key=key, json=json_text,
                                             condition=condition_to_proto(expected_version))
                try:
                    return (await self._call(self._stub.PutValue, request, retry=retry)).version
                except ResourceExhaustedError as exc:
                    # The server's max_state_value_bytes is lower than the default: in pieces.
                    if streamed is False or exc.field != "json":
                        raise
        pieces = put_stream_to_proto(slot, key, json_text, expected_version)
        return (await self._call(self._stub.StreamPutValue, pieces, retry=retry)).version

    async def get_value(self, slot: Slot, key: str, *, streamed: bool | None = None) -> StoredValue:
        """A value and its version. `streamed`: True reads it in pieces (`StreamGetValue`), False
        whole (`GetValue`: fails for a value larger than one response), None (default) whole and,
        when it is too large for that, in pieces."""
        request = pb.GetValueRequest(slot=slot_to_proto(slot), key=key)
        if not streamed:
            try:
                return value_from_proto(await self._call(self._stub.GetValue, request))
            except FailedPreconditionError:
                # GetValue's only FAILED_PRECONDITION: a value larger than one response.
                if streamed is False:
                    raise
        stream_request = pb.StreamGetValueRequest(slot=slot_to_proto(slot), key=key)
        return await self._call(self._read_value_stream, stream_request)

    async def _read_value_stream(self, request: pb.StreamGetValueRequest, **kwargs: Any) -> StoredValue:
        responses = [response async for response in self._stub.StreamGetValue(request, **kwargs)]
        return value_from_stream(responses)

    async def put_list(self, slot: Slot, key: str, items: Sequence[str], *, expected_version: int | None = None) -> ListWrite:
        request = pb.PutListRequest(slot=slot_to_proto(slot), key=key, items=list(items),
                                    condition=condition_to_proto(expected_version))
        return list_write_from_proto(await self._call(self._stub.PutList, request, retry=expected_version is not None))

    async def append_list(self, slot: Slot, key: str, items: Sequence[str], expected_length: int, *,
                          expected_version: int | None = None) -> ListWrite:
        request = pb.AppendListRequest(slot=slot_to_proto(slot), key=key, items=list(items),
                                       expected_length=expected_length, condition=condition_to_proto(expected_version))
        # Safe to repeat: a repeated append finds the length it already made and fails.
        return list_write_from_proto(await self._call(self._stub.AppendList, request))

    async def get_list_page(self, slot: Slot, key: str, page_size: int = 0, page_token: str = "") -> ListPage:
        request = pb.GetListRequest(slot=slot_to_proto(slot), key=key, page_size=page_size, page_token=page_token)
        return list_page_from_proto(await self._call(self._stub.GetList, request))

    async def get_list(self, slot: Slot, key: str) -> ListPage:
        """The whole list (every page), read again from the start if it changes meanwhile."""
        for _ in range(5):
            items: list[str] = []
            token = ""
            try:
                while True:
                    page = await self.get_list_page(slot, key, 0, token)
                    items += page.items
                    token = page.next_page_token
                    if not token:
                        return ListPage(page.found, items, page.version, page.length, "")
            except StateConflictError:
                continue
        raise AbortedError(f"list {key!r} kept changing while it was read; try again")

    async def session_exists(self, slot: Slot) -> bool:
        return (await self._call(self._stub.SessionExists, pb.SessionExistsRequest(slot=slot_to_proto(slot)))).exists

    async def delete_session(self, slot: Slot) -> int:
        return (await self._call(self._stub.DeleteSession, pb.DeleteSessionRequest(slot=slot_to_proto(slot)))).deleted

    async def delete_key(self, slot: Slot, key: str, *, list_: bool = False) -> bool:
        request = pb.DeleteKeyRequest(slot=slot_to_proto(slot), key=key, list=list_)
        return (await self._call(self._stub.DeleteKey, request)).deleted

    async def keys_page(self, slot: Slot, page_size: int = 0, page_token: str = "") -> KeyPage:
        request = pb.ListKeysRequest(slot=slot_to_proto(slot), page_size=page_size, page_token=page_token)
        return keys_from_proto(await self._call(self._stub.ListKeys, request))

    async def keys(self, slot: Slot) -> list[tuple[str, str]]:
        """Everything the slot holds, as (kind, key); kind is `value` or `list`."""
        out: list[tuple[str, str]] = []
        token = ""
        while True:
            page = await self.keys_page(slot, 0, token)
            out += page.keys
            token = page.next_page_token
            if not token:
                return out

    async def list_session_ids_page(self, user_id: str = "", page_size: int = 0, page_token: str = "") -> SessionIdPage:
        request = pb.ListSessionIdsRequest(user_id=user_id, page_size=page_size, page_token=page_token)
        return session_ids_from_proto(await self._call(self._stub.ListSessionIds, request))


class AsyncLocalAgentStateClient(_LocalClient, _SessionIds):
    """`AsyncAgentStateClient`'s methods over an in-process service."""

    async def _engine(self) -> Any:
        return await self._part("agent_state")

    async def put_value(self, slot: Slot, key: str, json_text: str, *, expected_version: int | None = None,
                        streamed: bool | None = None) -> int:
        # In-process there are no messages: any value up to max_state_streamed_value_bytes, unless
        # asked to behave as a whole `PutValue`.
        engine = await self._engine()
        return int(await engine.put_value(self.tenant, slot, key, json_text, expected_version, streamed=streamed is not False))

    async def get_value(self, slot: Slot, key: str, *, streamed: bool | None = None) -> StoredValue:
        value: StoredValue = await (await self._engine()).get_value(self.tenant, slot, key, whole=streamed is not False)
        return value

    async def put_list(self, slot: Slot, key: str, items: Sequence[str], *, expected_version: int | None = None) -> ListWrite:
        written: ListWrite = await (await self._engine()).put_list(self.tenant, slot, key, items, expected_version)
        return written

    async def append_list(self, slot: Slot, key: str, items: Sequence[str], expected_length: int, *,
                          expected_version: int | None = None) -> ListWrite:
        written: ListWrite = await (await self._engine()).append_list(
            self.tenant, slot, key, items, expected_length, expected_version)
        return written

    async def get_list_page(self, slot: Slot, key: str, page_size: int = 0, page_token: str = "") -> ListPage:
        page: ListPage = await (await self._engine()).get_list(self.tenant, slot, key, page_size, page_token)
        return page

    async def get_list(self, slot: Slot, key: str) -> ListPage:
        page: ListPage = await (await self._engine()).get_whole_list(self.tenant, slot, key)
        return page

    async def session_exists(self, slot: Slot) -> bool:
        return bool(await (await self._engine()).session_exists(self.tenant, slot))

    async def delete_session(self, slot: Slot) -> int:
        return int(await (await self._engine()).delete_session(self.tenant, slot))

    async def delete_key(self, slot: Slot, key: str, *, list_: bool = False) -> bool:
        return bool(await (await self._engine()).delete_key(self.tenant, slot, key, list_=list_))

    async def keys_page(self, slot: Slot, page_size: int = 0, page_token: str = "") -> KeyPage:
        page: KeyPage = await (await self._engine()).keys(self.tenant, slot, page_size, page_token)
        return page

    async def keys(self, slot: Slot) -> list[tuple[str, str]]:
        engine = await self._engine()
        out: list[tuple[str, str]] = []
        token = ""
        while True:
            page = await engine.keys(self.tenant, slot, 0, token)
            out += page.keys
            token = page.next_page_token
            if not token:
                return out

    async def list_session_ids_page(self, user_id: str = "", page_size: int = 0, page_token: str = "") -> SessionIdPage:
        page: SessionIdPage = await (await self._engine()).list_session_ids(self.tenant, user_id, page_size, page_token)
        return page


def AgentStateClient(target: str = DEFAULT_TARGET, **options: Any) -> Any:
    """The blocking client: `AsyncAgentStateClient`'s methods, blocking (its channel runs on a
    private event loop thread)."""
    return Blocking(lambda: AsyncAgentStateClient(target, **options))


def local_agent_state_client(service: Any = None) -> Any:
    """The blocking client over an in-process service."""
    return Blocking(lambda: AsyncLocalAgentStateClient(service))
