"""Clients of AUTO_CONTEXT memories (AgentScope-Java's `AutoContextMemory` on the server):
asyncio, blocking and local mode, in library types. Listings follow their pages for the caller;
a `get_*` read is one state of the memory (read again from its first page when the memory
changed between pages, as `AsyncMemoryClient.get_messages` is), an `iter_*` read streams pages.

    async with AsyncAutoContextClient("127.0.0.1:50051") as memory:
        await memory.create_memory("agent-1", AutoContextConfig(msg_threshold=50), profile="improved")
        await memory.add_messages("agent-1", [Msg.create(MsgRole.USER, "部署窗口是周二上午")])
        prepared = await memory.prepare_reasoning_input("agent-1", "You are a helpful assistant.")
        model_input = prepared.messages  # the system message with the offload instruction, then the working history

Retries follow the other clients: reads, adds (with their request id) and plan notes are
retried on UNAVAILABLE until the deadline; a compression is not (a replay after a lost reply
could compress a second time), so neither is the first page of `prepare_reasoning_input`,
the page that compresses. Those two wait instead, within the deadline, for a server that cannot
be reached (restarting, say) and are sent once it can be: a server restarted between two calls
is ridden out as by the retried calls, and the compression still sent at most once.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Iterator, Sequence, TypeVar

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client._base import AsyncGrpcClient, BlockingGrpcClient, _page_request
from agentscope_memory.client._common import DEFAULT_TARGET, DEFAULT_TIMEOUT_S
from agentscope_memory.client._retry import Reconnects, resuming_stream, resuming_stream_blocking
from agentscope_memory.client._validate import fields_named, msg_on_wire
from agentscope_memory.client.aio import AsyncMemoryClient
from agentscope_memory.client.local import Blocking, _LocalClient
from agentscope_memory.client.messages import CONSISTENT_READ_ATTEMPTS
from agentscope_memory.client.sync import MemoryClient
from agentscope_memory.convert.auto_context import event_from_proto, outcome_from_proto, plan_to_proto
from agentscope_memory.convert.from_proto import memory_from_proto, msgs_from_proto
from agentscope_memory.convert.to_proto import auto_context_config_to_proto
from agentscope_memory.errors import AbortedError
from agentscope_memory.message import Msg
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import CompressionEvent, PlanNote
from agentscope_memory.short_term.auto_context.service import AutoContextService, CompressOutcome, Page
from agentscope_memory.short_term.description import MemoryDescription, describe
from agentscope_memory.store.codec import decode_msg

if TYPE_CHECKING:
    from agentscope_memory.service import Service, ServiceSettings

T = TypeVar("T")
Event = tuple[int, CompressionEvent]


@dataclass(frozen=True)
class ReasoningInput:
    """What AgentScope-Java's `AutoContextHook` hands the model: the system message (the prompt
    given, or the agent's own system message, then the offload instruction), then the working
    history. `compressed` and `events`: what the call's compression did (every start of the read
    counted, should the memory change between pages and the read start again)."""

    messages: list[Msg]
    compressed: bool
    events: list[Event]

    @property
    def system(self) -> Msg:
        return self.messages[0]

    @property
    def working(self) -> list[Msg]:
        return self.messages[1:]


@dataclass(frozen=True)
class ReloadedContext:
    """The `context_reload` tool's answer: the messages offloaded under the UUID (`found`), or
    else the one message AgentScope's tool answers (a blank UUID's error, the not-found text)."""

    messages: list[Msg]
    found: bool


def _config(config: AutoContextConfig | None, profile: str | None, token_counter: str | None) -> AutoContextConfig:
    config = config or AutoContextConfig()
    if profile is not None:
        config = dataclasses.replace(config, profile=profile.lower())
    if token_counter is not None:
        config = dataclasses.replace(config, token_counter=token_counter.lower())
    return config.validate()


def _create(memory_id: str, config: AutoContextConfig, labels: dict[str, str] | None,
            allow_existing: bool) -> pb.CreateMemoryRequest:
    request = pb.CreateMemoryRequest(memory_id=memory_id, kind=pb.MEMORY_KIND_AUTO_CONTEXT, labels=labels or {},
                                     allow_existing=allow_existing)
    request.auto_context_config.CopyFrom(auto_context_config_to_proto(config))
    return request


def _reasoning(memory_id: str, system_prompt: str | None, system_message: Msg | None,
               page_size: int) -> pb.PrepareReasoningInputRequest:
    request = pb.PrepareReasoningInputRequest(memory_id=memory_id, page_size=page_size)
    if system_prompt is not None:
        request.system_prompt = system_prompt
    if system_message is not None:
        request.system_message.CopyFrom(msg_on_wire(system_message, "system_message"))
    return request


def _msgs(response: Any) -> list[Msg]:
    return msgs_from_proto(response.messages, "messages", newer_kinds=True)


def _events(response: Any) -> list[Event]:
    return [event_from_proto(e) for e in response.events]


async def _consistently(read: Callable[[], Awaitable[T]]) -> T:
    """`read()` (every page of a listing) again from its first page while the server aborts it
    because the memory changed between pages; `AbortedError` after CONSISTENT_READ_ATTEMPTS."""
    for attempt in range(1, CONSISTENT_READ_ATTEMPTS + 1):
        try:
            return await read()
        except AbortedError:
            if attempt == CONSISTENT_READ_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def _consistently_blocking(read: Callable[[], T]) -> T:
    """`_consistently` for a blocking `read`."""
    for attempt in range(1, CONSISTENT_READ_ATTEMPTS + 1):
        try:
            return read()
        except AbortedError:
            if attempt == CONSISTENT_READ_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


class AsyncAutoContextClient(AsyncGrpcClient):
    """AUTO_CONTEXT memories over gRPC (asyncio); see the module for what is retried. Every
    call has the client's deadline (`timeout`), one for all the pages (and new starts) a `get_*`
    read or `prepare_reasoning_input` follows."""

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.aio.Channel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        super().__init__(target, channel=channel, api_key=api_key, root_certificates=root_certificates,
                         timeout=timeout, retries=retries)
        # Adds and the working history's consistent read, on this client's channel (not owned).
        self._messages = AsyncMemoryClient(channel=self._channel, api_key=api_key, timeout=timeout, retries=retries)

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.MemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> AsyncLocalAutoContextClient:
        """The same methods over an in-process service (no server, no gRPC)."""
        return AsyncLocalAutoContextClient(service)

    async def create_memory(self, memory_id: str, config: AutoContextConfig | None = None, *,
                            profile: str | None = None, token_counter: str | None = None,
                            labels: dict[str, str] | None = None, allow_existing: bool = False) -> MemoryDescription:
        """An AUTO_CONTEXT memory; `profile` ("parity", the default, or "improved") and
        `token_counter` ("java_estimate" or "cl100k"), when given, override the config's."""
        request = _create(memory_id, _config(config, profile, token_counter), labels, allow_existing)
        response = await self._call(self._stub.CreateMemory, request, retry=allow_existing)
        return memory_from_proto(response.memory)

    async def add_messages(self, memory_id: str, msgs: Sequence[Msg], *, request_id: str | None = None) -> int:
        """Append to the working and the original history; the message count afterwards."""
        return await self._messages.add_messages(memory_id, msgs, request_id=request_id)

    async def get_messages(self, memory_id: str) -> list[Msg]:
        """The working history (what compression rewrites), as `AsyncMemoryClient.get_messages`."""
        return await self._messages.get_messages(memory_id)

    async def compress_if_needed(self, memory_id: str) -> CompressOutcome:
        # Not retried: a replay after a lost reply could compress a second time.
        response = await self._call(self._stub.CompressIfNeeded, pb.CompressIfNeededRequest(memory_id=memory_id),
                                    retry=False, wait_for_ready=True)
        return outcome_from_proto(response)

    async def prepare_reasoning_input(self, memory_id: str, system_prompt: str | None = None, *,
                                      system_message: Msg | None = None, page_size: int = 0) -> ReasoningInput:
        """Compress if needed, then what the hook hands the model, every page. Give the agent's
        prompt as text, or its own SYSTEM message (whose name and metadata are kept), not both."""
        request = _reasoning(memory_id, system_prompt, system_message, page_size)
        deadline = time.monotonic() + self.timeout
        events: list[Event] = []

        async def read() -> list[Msg]:
            msgs: list[Msg] = []
            token = ""
            while True:
                # The first page compresses: not retried. Later pages only read.
                response = await self._call(self._stub.PrepareReasoningInput, _page_request(request, token),
                                            retry=bool(token), deadline=deadline, wait_for_ready=not token)
                if not token:
                    events.extend(_events(response))
                msgs += _msgs(response)
                token = response.next_page_token
                if not token:
                    return msgs

        msgs = await _consistently(read)
        return ReasoningInput(msgs, bool(events), events)

    async def _all(self, method: Callable[..., Awaitable[Any]], request: Any,
                   items: Callable[[Any], list[T]]) -> list[T]:
        deadline = time.monotonic() + self.timeout

        async def read() -> list[T]:
            return [item async for page in self._paged(method, request, deadline) for item in items(page)]

        return await _consistently(read)

    async def iter_original_messages(self, memory_id: str, page_size: int = 0) -> AsyncIterator[Msg]:
        request = pb.GetOriginalMessagesRequest(memory_id=memory_id, page_size=page_size)
        async for page in self._paged(self._stub.GetOriginalMessages, request):
            for msg in _msgs(page):
                yield msg

    async def get_original_messages(self, memory_id: str) -> list[Msg]:
        """The uncompressed, append-only history (Java `getOriginalMemoryMsgs`)."""
        return await self._all(self._stub.GetOriginalMessages, pb.GetOriginalMessagesRequest(memory_id=memory_id),
                               _msgs)

    async def iter_interaction_messages(self, memory_id: str, page_size: int = 0) -> AsyncIterator[Msg]:
        request = pb.GetInteractionMessagesRequest(memory_id=memory_id, page_size=page_size)
        async for page in self._paged(self._stub.GetInteractionMessages, request):
            for msg in _msgs(page):
                yield msg

    async def get_interaction_messages(self, memory_id: str) -> list[Msg]:
        """The user messages and final assistant answers of the original history (Java
        `getInteractionMsgs`)."""
        return await self._all(self._stub.GetInteractionMessages,
                               pb.GetInteractionMessagesRequest(memory_id=memory_id), _msgs)

    @fields_named(uuid="working_context_offload_uuid")
    async def reload_context(self, memory_id: str, uuid: str, *, page_size: int = 0) -> ReloadedContext:
        """The `context_reload` tool: the messages offloaded under `uuid` (an offload tag's)."""
        request = pb.ReloadContextRequest(memory_id=memory_id, working_context_offload_uuid=uuid, page_size=page_size)
        found: list[bool] = []

        def items(page: pb.ReloadContextResponse) -> list[Msg]:
            found.append(page.found)
            return _msgs(page)

        msgs = await self._all(self._stub.ReloadContext, request, items)
        return ReloadedContext(msgs, found[-1] if found else False)

    async def iter_events(self, memory_id: str, after_sequence: int = 0, page_size: int = 0) -> AsyncIterator[Event]:
        request = pb.ListCompressionEventsRequest(memory_id=memory_id, after_sequence=after_sequence,
                                                  page_size=page_size)
        async for page in self._paged(self._stub.ListCompressionEvents, request):
            for event in _events(page):
                yield event

    async def get_events(self, memory_id: str, after_sequence: int = 0) -> list[Event]:
        """The compression events recorded after `after_sequence`, as (sequence, event)."""
        request = pb.ListCompressionEventsRequest(memory_id=memory_id, after_sequence=after_sequence)
        return await self._all(self._stub.ListCompressionEvents, request, _events)

    async def watch_events(self, memory_id: str, after_sequence: int = 0) -> AsyncIterator[Event]:
        """Recorded events after `after_sequence`, then new ones as they are recorded (until the
        caller stops reading). A broken stream is reopened after the last event seen, so nothing
        is missed or repeated, with growing pauses; a server unreachable for the client's
        `timeout` raises `UnavailableError`."""
        responses = resuming_stream(
            lambda last: self._stub.WatchCompressionEvents(
                pb.WatchCompressionEventsRequest(memory_id=memory_id, after_sequence=last), metadata=self._metadata),
            after_sequence, lambda response: response.event.sequence, Reconnects(self.retry_policy, self.timeout))
        async for response in responses:
            yield event_from_proto(response.event)

    async def attach_plan_note(self, memory_id: str, plan: PlanNote | None) -> None:
        """The plan the summariser's plan-aware hint reads; None detaches it. Retried: attaching
        the same plan twice leaves what once does."""
        request = pb.AttachPlanNoteRequest(memory_id=memory_id)
        if plan is not None:
            request.plan.CopyFrom(plan_to_proto(plan))
        await self._call(self._stub.AttachPlanNote, request)


class AutoContextClient(BlockingGrpcClient):
    """AUTO_CONTEXT memories over gRPC (blocking); the same methods as `AsyncAutoContextClient`."""

    def __init__(self, target: str = DEFAULT_TARGET, *, channel: grpc.Channel | None = None,
                 api_key: str | None = None, root_certificates: bytes | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, retries: int | None = None) -> None:
        super().__init__(target, channel=channel, api_key=api_key, root_certificates=root_certificates,
                         timeout=timeout, retries=retries)
        self._messages = MemoryClient(channel=self._channel, api_key=api_key, timeout=timeout, retries=retries)

    def _bind(self, channel: grpc.Channel) -> None:
        self._stub = pb_grpc.MemoryServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        return Blocking(lambda: AsyncLocalAutoContextClient(service))

    def create_memory(self, memory_id: str, config: AutoContextConfig | None = None, *,
                      profile: str | None = None, token_counter: str | None = None,
                      labels: dict[str, str] | None = None, allow_existing: bool = False) -> MemoryDescription:
        request = _create(memory_id, _config(config, profile, token_counter), labels, allow_existing)
        return memory_from_proto(self._call(self._stub.CreateMemory, request, retry=allow_existing).memory)

    def add_messages(self, memory_id: str, msgs: Sequence[Msg], *, request_id: str | None = None) -> int:
        return self._messages.add_messages(memory_id, msgs, request_id=request_id)

    def get_messages(self, memory_id: str) -> list[Msg]:
        return self._messages.get_messages(memory_id)

    def compress_if_needed(self, memory_id: str) -> CompressOutcome:
        # Not retried: a replay after a lost reply could compress a second time.
        return outcome_from_proto(self._call(self._stub.CompressIfNeeded,
                                             pb.CompressIfNeededRequest(memory_id=memory_id), retry=False,
                                             wait_for_ready=True))

    def prepare_reasoning_input(self, memory_id: str, system_prompt: str | None = None, *,
                                system_message: Msg | None = None, page_size: int = 0) -> ReasoningInput:
        request = _reasoning(memory_id, system_prompt, system_message, page_size)
        deadline = time.monotonic() + self.timeout
        events: list[Event] = []

        def read() -> list[Msg]:
            msgs: list[Msg] = []
            token = ""
            while True:
                response = self._call(self._stub.PrepareReasoningInput, _page_request(request, token),
                                      retry=bool(token), deadline=deadline, wait_for_ready=not token)
                if not token:
                    events.extend(_events(response))
                msgs += _msgs(response)
                token = response.next_page_token
                if not token:
                    return msgs

        msgs = _consistently_blocking(read)
        return ReasoningInput(msgs, bool(events), events)

    def _all(self, method: Callable[..., Any], request: Any, items: Callable[[Any], list[T]]) -> list[T]:
        deadline = time.monotonic() + self.timeout
        return _consistently_blocking(
            lambda: [item for page in self._paged(method, request, deadline) for item in items(page)])

    def iter_original_messages(self, memory_id: str, page_size: int = 0) -> Iterator[Msg]:
        request = pb.GetOriginalMessagesRequest(memory_id=memory_id, page_size=page_size)
        for page in self._paged(self._stub.GetOriginalMessages, request):
            yield from _msgs(page)

    def get_original_messages(self, memory_id: str) -> list[Msg]:
        return self._all(self._stub.GetOriginalMessages, pb.GetOriginalMessagesRequest(memory_id=memory_id), _msgs)

    def iter_interaction_messages(self, memory_id: str, page_size: int = 0) -> Iterator[Msg]:
        request = pb.GetInteractionMessagesRequest(memory_id=memory_id, page_size=page_size)
        for page in self._paged(self._stub.GetInteractionMessages, request):
            yield from _msgs(page)

    def get_interaction_messages(self, memory_id: str) -> list[Msg]:
        return self._all(self._stub.GetInteractionMessages, pb.GetInteractionMessagesRequest(memory_id=memory_id),
                         _msgs)

    @fields_named(uuid="working_context_offload_uuid")
    def reload_context(self, memory_id: str, uuid: str, *, page_size: int = 0) -> ReloadedContext:
        request = pb.ReloadContextRequest(memory_id=memory_id, working_context_offload_uuid=uuid, page_size=page_size)
        found: list[bool] = []

        def items(page: pb.ReloadContextResponse) -> list[Msg]:
            found.append(page.found)
            return _msgs(page)

        msgs = self._all(self._stub.ReloadContext, request, items)
        return ReloadedContext(msgs, found[-1] if found else False)

    def iter_events(self, memory_id: str, after_sequence: int = 0, page_size: int = 0) -> Iterator[Event]:
        request = pb.ListCompressionEventsRequest(memory_id=memory_id, after_sequence=after_sequence,
                                                  page_size=page_size)
        for page in self._paged(self._stub.ListCompressionEvents, request):
            yield from _events(page)

    def get_events(self, memory_id: str, after_sequence: int = 0) -> list[Event]:
        request = pb.ListCompressionEventsRequest(memory_id=memory_id, after_sequence=after_sequence)
        return self._all(self._stub.ListCompressionEvents, request, _events)

    def watch_events(self, memory_id: str, after_sequence: int = 0) -> Iterator[Event]:
        """`AsyncAutoContextClient.watch_events`, blocking."""
        responses = resuming_stream_blocking(
            lambda last: self._stub.WatchCompressionEvents(
                pb.WatchCompressionEventsRequest(memory_id=memory_id, after_sequence=last), metadata=self._metadata),
            after_sequence, lambda response: response.event.sequence, Reconnects(self.retry_policy, self.timeout))
        for response in responses:
            yield event_from_proto(response.event)

    def attach_plan_note(self, memory_id: str, plan: PlanNote | None) -> None:
        request = pb.AttachPlanNoteRequest(memory_id=memory_id)
        if plan is not None:
            request.plan.CopyFrom(plan_to_proto(plan))
        self._call(self._stub.AttachPlanNote, request)


class AsyncLocalAutoContextClient(_LocalClient):
    """`AsyncAutoContextClient`'s methods over an in-process service (local mode, tenant `default`)."""

    async def _auto(self) -> AutoContextService:
        service: AutoContextService = await self._part("auto_context")
        return service

    async def _pages(self, fetch: Callable[[str], Awaitable[Page[T]]]) -> AsyncIterator[T]:
        token = ""
        while True:
            page = await fetch(token)
            for item in page.items:
                yield item
            token = page.next_page_token
            if not token:
                return

    async def create_memory(self, memory_id: str, config: AutoContextConfig | None = None, *,
                            profile: str | None = None, token_counter: str | None = None,
                            labels: dict[str, str] | None = None, allow_existing: bool = False) -> MemoryDescription:
        memories = (await self._handle.get()).memories
        info, _ = await memories.create_memory(self.tenant, memory_id, "AUTO_CONTEXT",
                                               _config(config, profile, token_counter).to_json(), labels,
                                               allow_existing)
        return describe(info.record, info.message_count)

    async def add_messages(self, memory_id: str, msgs: Sequence[Msg], *, request_id: str | None = None) -> int:
        memories = (await self._handle.get()).memories
        return (await memories.add_messages(self.tenant, memory_id, list(msgs), request_id)).message_count

    async def get_messages(self, memory_id: str) -> list[Msg]:
        return await (await self._handle.get()).memories.get_messages(self.tenant, memory_id)

    async def compress_if_needed(self, memory_id: str) -> CompressOutcome:
        return await (await self._auto()).compress_if_needed(self.tenant, memory_id)

    async def prepare_reasoning_input(self, memory_id: str, system_prompt: str | None = None, *,
                                      system_message: Msg | None = None, page_size: int = 0) -> ReasoningInput:
        auto = await self._auto()
        events: list[Event] = []

        async def read() -> list[Msg]:
            msgs: list[Msg] = []
            token = ""
            while True:
                page = await auto.prepare_reasoning_input(self.tenant, memory_id, system_prompt, system_message,
                                                          page_size, token)
                if page.outcome is not None:
                    events.extend(page.outcome.events)
                msgs += page.items
                token = page.next_page_token
                if not token:
                    return msgs

        msgs = await _consistently(read)
        return ReasoningInput(msgs, bool(events), events)

    async def _all(self, fetch: Callable[[str], Awaitable[Page[T]]]) -> list[T]:
        return await _consistently(lambda: self._list(self._pages(fetch)))

    @staticmethod
    async def _list(items: AsyncIterator[T]) -> list[T]:
        return [item async for item in items]

    async def _original(self, memory_id: str, page_size: int, token: str) -> Page[Msg]:
        page = await (await self._auto()).original_page(self.tenant, memory_id, page_size, token)
        return Page([decode_msg(data, newer_kinds=True) for data in page.items], page.next_page_token, page.total_size)

    async def iter_original_messages(self, memory_id: str, page_size: int = 0) -> AsyncIterator[Msg]:
        async for msg in self._pages(lambda token: self._original(memory_id, page_size, token)):
            yield msg

    async def get_original_messages(self, memory_id: str) -> list[Msg]:
        return await self._all(lambda token: self._original(memory_id, 0, token))

    async def _interaction(self, memory_id: str, page_size: int, token: str) -> Page[Msg]:
        return await (await self._auto()).interaction(self.tenant, memory_id, page_size, token)

    async def iter_interaction_messages(self, memory_id: str, page_size: int = 0) -> AsyncIterator[Msg]:
        async for msg in self._pages(lambda token: self._interaction(memory_id, page_size, token)):
            yield msg

    async def get_interaction_messages(self, memory_id: str) -> list[Msg]:
        return await self._all(lambda token: self._interaction(memory_id, 0, token))

    @fields_named(uuid="working_context_offload_uuid")
    async def reload_context(self, memory_id: str, uuid: str, *, page_size: int = 0) -> ReloadedContext:
        auto = await self._auto()
        found: list[bool] = []

        async def fetch(token: str) -> Page[Msg]:
            page, hit = await auto.reload(self.tenant, memory_id, uuid, page_size, token)
            found.append(hit)
            return page

        msgs = await self._all(fetch)
        return ReloadedContext(msgs, found[-1] if found else False)

    async def _events_page(self, memory_id: str, after_sequence: int, page_size: int, token: str) -> Page[Event]:
        return await (await self._auto()).events(self.tenant, memory_id, after_sequence, page_size, token)

    async def iter_events(self, memory_id: str, after_sequence: int = 0, page_size: int = 0) -> AsyncIterator[Event]:
        async for event in self._pages(lambda token: self._events_page(memory_id, after_sequence, page_size, token)):
            yield event

    async def get_events(self, memory_id: str, after_sequence: int = 0) -> list[Event]:
        return await self._all(lambda token: self._events_page(memory_id, after_sequence, 0, token))

    async def watch_events(self, memory_id: str, after_sequence: int = 0) -> AsyncIterator[Event]:
        async for event in (await self._auto()).watch(self.tenant, memory_id, after_sequence):
            yield event

    async def attach_plan_note(self, memory_id: str, plan: PlanNote | None) -> None:
        await (await self._auto()).attach_plan(self.tenant, memory_id, plan)
