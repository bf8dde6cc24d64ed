"""`agentscope.memory.v1.MemoryService`: translates requests and calls the memory manager."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncGenerator, AsyncIterator, Callable

import grpc
from google.protobuf.duration_pb2 import Duration

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.encoded import Encoded, with_stored_messages
from agentscope_memory.convert.from_proto import auto_context_config_from_proto, kind_from_proto, msgs_from_proto
from agentscope_memory.convert.marks import delete_messages_to_proto, marks_to_proto
from agentscope_memory.convert.to_proto import memory_to_proto
from agentscope_memory.convert.scopes import visibility_from_proto
from agentscope_memory.convert.tiered import tiered_config_from_proto
from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError
from agentscope_memory.scopes.engine import ScopeEngine
from agentscope_memory.short_term.auto_context.service import AutoContextService
from agentscope_memory.short_term.coherence import Changed, Coherence, Event, LeaseGranted, Watcher
from agentscope_memory.short_term.description import describe
from agentscope_memory.short_term.manager import MemoryInfo, MemoryManager
from agentscope_memory.store.codec import stored_to_proto
from agentscope_memory_server.auto_context_rpcs import AutoContextRpcs
from agentscope_memory_server.drain import current_drain
from agentscope_memory_server.embedded_calls import run_embedded
from agentscope_memory_server.errors import grpc_errors, grpc_bidi_errors
from agentscope_memory_server.tenancy import tenant_of


# The RPC an `add` on a `WatchMessages` stream stands for, in metrics and traces.
ADD_MESSAGES = "/agentscope.memory.v1.MemoryService/AddMessages"


def _memory(info: MemoryInfo) -> pb.Memory:
    return memory_to_proto(describe(info.record, info.message_count))


class MemoryServicer(AutoContextRpcs, pb_grpc.MemoryServiceServicer):
    def __init__(self, manager: MemoryManager, auto_context: AutoContextService,
                 scopes: ScopeEngine | None = None, coherence: Coherence | None = None) -> None:
        self.manager = manager
        self.auto_context = auto_context
        # Parent/child scopes: deleting a parent, and messages added SHARED or GLOBAL.
        self.scopes = scopes
        # Coherent caching (WatchMessages); None where this server cannot see every write.
        self.coherence = coherence

    @grpc_errors
    async def CreateMemory(self, request: pb.CreateMemoryRequest, context: grpc.aio.ServicerContext) -> pb.CreateMemoryResponse:
        return await self._create_memory(tenant_of(context), request)

    async def _create_memory(self, tenant: str, request: pb.CreateMemoryRequest) -> pb.CreateMemoryResponse:
        kind = kind_from_proto(request.kind)
        config_json = "{}"
        if request.HasField("auto_context_config"):
            # Which kinds take a config is the kind's rule (`validate_config`), not the wire's.
            config_json = auto_context_config_from_proto(request.auto_context_config).to_json()
        if request.HasField("tiered_config"):
            if kind != "TIERED":
                raise InvalidArgumentError("tiered_config", "is only allowed for MEMORY_KIND_TIERED memories")
            if request.HasField("auto_context_config"):
                raise InvalidArgumentError("auto_context_config", "is not allowed for MEMORY_KIND_TIERED memories")
            config_json = tiered_config_from_proto(request.tiered_config).to_json()
        elif kind == "TIERED" and request.HasField("auto_context_config"):
            raise InvalidArgumentError("auto_context_config", "is not allowed for MEMORY_KIND_TIERED memories")
        info, created = await self.manager.create_memory(
            tenant,
            request.memory_id,
            kind,
            config_json,
            dict(request.labels),
            request.allow_existing,
        )
        return pb.CreateMemoryResponse(memory=_memory(info), created=created)

    @grpc_errors
    async def GetMemory(self, request: pb.GetMemoryRequest, context: grpc.aio.ServicerContext) -> pb.GetMemoryResponse:
        info = await self.manager.get_memory(tenant_of(context), request.memory_id)
        return pb.GetMemoryResponse(memory=_memory(info))

    @grpc_errors
    async def ListMemories(self, request: pb.ListMemoriesRequest, context: grpc.aio.ServicerContext) -> pb.ListMemoriesResponse:
        page = await self.manager.list_memories(
            tenant_of(context), request.page_size, request.page_token
        )
        return pb.ListMemoriesResponse(
            memories=[_memory(i) for i in page.memories],
            next_page_token=page.next_page_token,
        )

    @grpc_errors
    async def DeleteMemory(self, request: pb.DeleteMemoryRequest, context: grpc.aio.ServicerContext) -> pb.DeleteMemoryResponse:
        if self.scopes is not None:
            await self.scopes.delete_memory(tenant_of(context), request.memory_id, request.force)
        else:
            await self.manager.delete_memory(tenant_of(context), request.memory_id)
        return pb.DeleteMemoryResponse()

    @grpc_errors
    async def AddMessages(self, request: pb.AddMessagesRequest, context: grpc.aio.ServicerContext) -> pb.AddMessagesResponse:
        # The caller's deadline bounds what runs after the add (a TIERED pass's LLM summaries).
        return await self._add_messages(tenant_of(context), request, context.time_remaining())

    async def _add_messages(self, tenant: str, request: pb.AddMessagesRequest,
                            time_left_s: float | None = None) -> pb.AddMessagesResponse:
        """`AddMessages`, whether it came as its own call or as an `add` on a `WatchMessages` stream
        (whose adds have no deadline of their own: None)."""
        msgs = msgs_from_proto(request.messages)
        if request.visibility and self.scopes is not None:
            result = await self.scopes.add_messages(
                tenant, request.memory_id, msgs, request.request_id or None,
                visibility_from_proto(request.visibility), watch_id=request.watch_id, time_left_s=time_left_s,
            )
        else:
            result = await self.manager.add_messages(
                tenant, request.memory_id, msgs, request.request_id or None, watch_id=request.watch_id,
                time_left_s=time_left_s,
            )
        return pb.AddMessagesResponse(
            message_count=result.message_count, replayed=result.replayed, version=result.version,
            etag=result.etag, previous_etag=result.previous_etag,
        )

    @grpc_errors
    async def GetMessages(self, request: pb.GetMessagesRequest, context: grpc.aio.ServicerContext) -> Encoded:
        page = await self.manager.get_messages_page(
            tenant_of(context), request.memory_id, request.page_size, request.page_token, request.if_none_match,
            request.accept_delta,
        )
        # Encoded from the stored bytes: parsing each message only to serialize it again cost
        # more than the rest of the call.
        return with_stored_messages(pb.GetMessagesResponse(
            next_page_token=page.next_page_token, total_size=page.total_size, etag=page.etag,
            not_modified=page.not_modified, delta=page.delta,
        ), page.stored)

    @grpc_errors
    async def DeleteMessage(self, request: pb.DeleteMessageRequest, context: grpc.aio.ServicerContext) -> pb.DeleteMessageResponse:
        result = await self.manager.delete_message(
            tenant_of(context), request.memory_id, request.index,
            request.expected_message_id if request.HasField("expected_message_id") else None,
        )
        return pb.DeleteMessageResponse(deleted=result.deleted, message_count=result.message_count,
                                        etag=result.etag, previous_etag=result.previous_etag)

    @grpc_errors
    async def DeleteMessages(self, request: pb.DeleteMessagesRequest, context: grpc.aio.ServicerContext) -> pb.DeleteMessagesResponse:
        result = await self.manager.delete_messages(tenant_of(context), request.memory_id, list(request.message_ids),
                                                    list(request.marks), request.allow_missing)
        return delete_messages_to_proto(result)

    @grpc_errors
    async def UpdateMessageMarks(self, request: pb.UpdateMessageMarksRequest,
                                 context: grpc.aio.ServicerContext) -> pb.UpdateMessageMarksResponse:
        if request.all_messages and request.message_ids:
            raise InvalidArgumentError("message_ids", "must be empty when all_messages is set")
        result = await self.manager.update_message_marks(
            tenant_of(context), request.memory_id, None if request.all_messages else list(request.message_ids),
            request.new_mark if request.HasField("new_mark") else None,
            request.old_mark if request.HasField("old_mark") else None, request.allow_missing)
        return marks_to_proto(result)

    @grpc_errors
    async def ClearMessages(self, request: pb.ClearMessagesRequest, context: grpc.aio.ServicerContext) -> pb.ClearMessagesResponse:
        result = await self.manager.clear_messages(tenant_of(context), request.memory_id)
        return pb.ClearMessagesResponse(etag=result.etag, previous_etag=result.previous_etag)

    @grpc_bidi_errors
    async def WatchMessages(self, requests: AsyncIterator[pb.WatchMessagesRequest],
                            context: grpc.aio.ServicerContext) -> AsyncGenerator[pb.WatchMessagesResponse, None]:
        # The first request before anything else, so an undecodable one is INVALID_ARGUMENT here too.
        first = await anext(aiter(requests), None)
        coherence = self.coherence
        if coherence is None:
            raise FailedPreconditionError(
                "coherent caching is unavailable on this server (it needs the embedded store, which sees every "
                "write, and the coherent_cache setting on); read with GetMessages if_none_match instead")
        if first is None:
            return
        if first.HasField("create"):
            if first.create.memory_id not in ("", first.memory_id):
                raise InvalidArgumentError("create.memory_id", "must be empty or the watched memory's id")
            create = pb.CreateMemoryRequest()
            create.CopyFrom(first.create)
            create.memory_id, create.allow_existing = first.memory_id, True
            await self._create_memory(tenant_of(context), create)
        watcher = await coherence.watch(tenant_of(context), first.memory_id)
        # One queue carries all that goes out, in the order it came: the watch's events and the
        # answers to its adds both land in `watcher.outbox`, so each waits for one wake-up of this
        # task only (waiting on a queue per kind took a task per kind and a wait over them).
        outbox = watcher.outbox
        adds = _StreamAdds(self, watcher)
        adds.take(first)
        # The first message's `release` ends the watch as a later one's would (a one-shot add:
        # watch, add, release): no more requests are read, and the stream ends once its add is
        # answered.
        reader = asyncio.ensure_future(_take_in(requests, coherence, watcher, adds, first.release))
        reader.add_done_callback(lambda _: outbox.put_nowait(_LOOK))
        loop = asyncio.get_running_loop()
        looking: asyncio.TimerHandle | None = None

        def look() -> None:
            # gRPC may notice a vanished caller only on a write: look now and then.
            nonlocal looking
            outbox.put_nowait(_LOOK)
            looking = loop.call_later(_LOOK_EVERY_S, look)

        looking = loop.call_later(_LOOK_EVERY_S, look)
        try:
            while True:
                item = await outbox.get()
                if isinstance(item, pb.WatchMessagesResponse):
                    adds.answered()
                    yield item
                elif item is not _LOOK:
                    yield _watch_event(item)
                if context.done():
                    return
                # The client closed its side (or its stream failed): the watch ends, once the adds
                # it sent before are answered.
                if reader.done() and adds.idle():
                    if not reader.cancelled():
                        reader.result()
                    return
        finally:
            if looking is not None:
                looking.cancel()
            reader.cancel()
            # Unless the client released it, writes wait until the lease its client may still
            # trust runs out. Closed only once the stream's own add under way (if any) is done:
            # until then the watch is that add's writer, which its announcement skips; closed
            # first, the add would wait for its own watch's lease (past a drain's grace, and
            # holding up every other write to the memory meanwhile).
            adds.stop(lambda: coherence.close(watcher, released=False))


# Put in a watch's outbox to make its stream look at its caller and its request stream.
_LOOK = object()
_LOOK_EVERY_S = 1.0


class _StreamAdds:
    """The adds of one `WatchMessages` stream, applied one at a time in the order they came, in a
    task of their own: an add waits for the memory's other watchers, and meanwhile the stream's
    own renewals and acknowledgements must go on being read. Each add is `AddMessages` itself
    (`MemoryServicer._add_messages`, observed as that RPC by `run_embedded`), as this watch's own
    write. Answers go to the watch's outbox (`Watcher.outbox`), with its events."""

    def __init__(self, servicer: MemoryServicer, watcher: Watcher) -> None:
        self._servicer = servicer
        self._watcher = watcher
        self._queue: asyncio.Queue[tuple[int, pb.AddMessagesRequest]] = asyncio.Queue()
        self._worker: asyncio.Future[None] | None = None
        self._busy = False
        self._stopped = False
        # Adds taken whose answer has not been sent yet (queued, running, or in the outbox).
        self._unanswered = 0

    def take(self, request: pb.WatchMessagesRequest) -> None:
        """Queues the request's add, if it has one."""
        if not request.HasField("add"):
            return
        self._queue.put_nowait((request.add_id, request.add))
        self._unanswered += 1
        if self._worker is None:
            self._worker = asyncio.ensure_future(self._run())

    def answered(self) -> None:
        """An answer from the outbox was sent."""
        self._unanswered -= 1

    def idle(self) -> bool:
        """True when no add waits, runs or has an answer still to send."""
        return self._unanswered == 0

    def stop(self, then: Callable[[], None]) -> None:
        """The stream ended: adds not started are dropped (their client retries them as
        `AddMessages` with the same `request_id`). One under way is left to finish, as its
        transaction may already be committing: it must still be announced to the other watchers.
        `then` runs once no add runs any more."""
        self._stopped = True
        if self._worker is None or self._worker.done():
            then()
            return
        if not self._busy:
            self._worker.cancel()
        self._worker.add_done_callback(lambda _: then())

    async def _run(self) -> None:
        while not self._stopped:
            add_id, add = await self._queue.get()
            self._busy = True
            drain = current_drain.get()
            answered = False
            try:
                with drain.running() if drain is not None else contextlib.nullcontext():
                    self._watcher.outbox.put_nowait(await self._apply(add_id, add))
                    answered = True
            finally:
                self._busy = False
                if not answered:
                    # Cancelled: no answer is coming, so the stream does not wait for one.
                    self._unanswered -= 1
            # One turn of the event loop between adds: a small add may complete without ever
            # suspending (inline SQLite write, nobody else to tell), and a stream's queued adds
            # would then run back to back, holding every other call and the server's stop.
            await asyncio.sleep(0)

    async def _apply(self, add_id: int, add: pb.AddMessagesRequest) -> pb.WatchMessagesResponse:
        watcher = self._watcher

        async def call() -> pb.AddMessagesResponse:
            if add.memory_id and add.memory_id != watcher.memory_id:
                raise InvalidArgumentError("add.memory_id", "must be empty or the watched memory's id")
            # The stream's own decoded request: set in place rather than copied with its messages.
            add.memory_id, add.watch_id = watcher.memory_id, watcher.watch_id
            return await self._servicer._add_messages(watcher.tenant, add)

        outcome = await run_embedded(ADD_MESSAGES, call)
        if outcome.value is not None:
            return pb.WatchMessagesResponse(added=pb.MessagesAdded(add_id=add_id, response=outcome.value))
        return pb.WatchMessagesResponse(added=pb.MessagesAdded(
            add_id=add_id, failure=pb.AddFailure(code=outcome.code.value[0], message=outcome.message)))


async def _take_in(requests: AsyncIterator[pb.WatchMessagesRequest], coherence: Coherence, watcher: Watcher,
                   adds: _StreamAdds, released: bool = False) -> None:
    if released:
        coherence.close(watcher, released=True)
        return
    async for request in requests:
        if request.ack_sequence > 0:
            coherence.ack(watcher, request.ack_sequence)
        if request.renewal > 0:
            coherence.renew(watcher, request.renewal)
        adds.take(request)
        if request.release:
            coherence.close(watcher, released=True)
            return


def _duration(seconds: float) -> Duration:
    duration = Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def _watch_event(event: Event) -> pb.WatchMessagesResponse:
    if isinstance(event, Changed):
        return pb.WatchMessagesResponse(changed=pb.MessagesChanged(
            sequence=event.sequence, etag=event.etag, previous_etag=event.previous_etag, appended=event.appended,
            messages=[stored_to_proto(d) for d in event.stored]))
    if isinstance(event, LeaseGranted):
        return pb.WatchMessagesResponse(lease_granted=pb.LeaseGranted(
            renewal=event.renewal, lease_duration=_duration(event.lease_s)))
    return pb.WatchMessagesResponse(started=pb.WatchStarted(
        watch_id=event.watch_id, etag=event.etag, lease_duration=_duration(event.lease_s), accepts_adds=True,
        message_count=event.count))
