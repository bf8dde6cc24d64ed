"""The asyncio client for `MemoryService`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Sequence

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as state_grpc
from agentscope_memory.client import _requests
from agentscope_memory.client._base import AsyncGrpcClient
from agentscope_memory.client._common import new_request_id
from agentscope_memory.client.messages import MarksUpdated, MessageDeleted, MessagesDeleted, MessagesAdded, MessagesRead, MessagesReplaced, Page, read_consistently
from agentscope_memory.convert.from_proto import memory_from_proto
from agentscope_memory.message import Msg
from agentscope_memory.short_term.pending_tools import interrupted_results
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.tiered.config import TieredConfig
from agentscope_memory.short_term.description import MemoryDescription

if TYPE_CHECKING:
    from agentscope_memory.service import Service, ServiceSettings


class AsyncMemoryClient(AsyncGrpcClient):
    """Short-term memory over gRPC, in library types.

    Every call has a deadline (`timeout`, seconds). Calls that are safe to repeat are retried on
    UNAVAILABLE, with backoff, until that deadline (a server restarted meanwhile is ridden out;
    `retries` caps the attempts if given); `add_messages` is made safe by a request id.
    Failures raise the library's errors (`NotFoundError`, `InvalidArgumentError`, ...).
    """

    def _bind(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.MemoryServiceStub(channel)
        self._state = state_grpc.StateServiceStub(channel)

    @staticmethod
    def local(service: "Service | ServiceSettings | None" = None) -> Any:
        """The same methods over an in-process service (no server, no gRPC); see `client.local`.
        Given settings (or nothing: the embedded defaults), the client owns the service."""
        from agentscope_memory.client.local import AsyncLocalMemoryClient

        return AsyncLocalMemoryClient(service)

    async def create_memory(
        self,
        memory_id: str,
        kind: str = "IN_MEMORY",
        *,
        labels: dict[str, str] | None = None,
        allow_existing: bool = False,
        auto_context_config: AutoContextConfig | None = None,
        tiered_config: TieredConfig | None = None,
    ) -> MemoryDescription:
        """Create a memory; `auto_context_config` for AUTO_CONTEXT, `tiered_config` for TIERED."""
        request = _requests.create(memory_id, kind, labels, allow_existing, auto_context_config, tiered_config)
        response = await self._call(self._stub.CreateMemory, request, retry=allow_existing)
        return memory_from_proto(response.memory)

    async def get_memory(self, memory_id: str) -> MemoryDescription:
        response = await self._call(self._stub.GetMemory, pb.GetMemoryRequest(memory_id=memory_id))
        return memory_from_proto(response.memory)

    async def list_memories(self, page_size: int = 0) -> AsyncIterator[MemoryDescription]:
        async for response in self._paged(self._stub.ListMemories, pb.ListMemoriesRequest(page_size=page_size)):
            for memory in response.memories:
                yield memory_from_proto(memory)

    async def delete_memory(self, memory_id: str) -> None:
        await self._call(self._stub.DeleteMemory, pb.DeleteMemoryRequest(memory_id=memory_id), retry=False)

    async def add_messages(
        self, memory_id: str, msgs: Sequence[Msg], *, request_id: str | None = None
    ) -> int:
        """Append messages; returns the memory's message count afterwards."""
        return (await self.add_messages_with_etags(memory_id, msgs, request_id=request_id)).message_count

    async def add_messages_with_etags(
        self, memory_id: str, msgs: Sequence[Msg], *, request_id: str | None = None
    ) -> MessagesAdded:
        """`add_messages`, answering also the etags just before and after the add, for a caller
        that keeps a copy (see `read_messages`)."""
        request = _requests.add(memory_id, msgs, request_id or new_request_id())
        response = await self._call(self._stub.AddMessages, request)
        return MessagesAdded(response.message_count, response.etag, response.previous_etag, response.replayed)

    async def add_message(self, memory_id: str, msg: Msg) -> int:
        return await self.add_messages(memory_id, [msg])

    async def close_pending_tool_calls(self, memory_id: str, agent_name: str) -> list[Msg]:
        """Answer the tool calls the conversation was left with (a crash during a tool call)
        with an error result each, so an agent can go on; returns the messages added, none when
        nothing was pending. See `short_term.pending_tools`."""
        added = interrupted_results(await self.get_messages(memory_id), agent_name)
        if added:
            await self.add_messages(memory_id, added)
        return added

    def _pages(self, memory_id: str, page_size: int = 0,
               deadline: float | None = None) -> AsyncIterator[pb.GetMessagesResponse]:
        request = pb.GetMessagesRequest(memory_id=memory_id, page_size=page_size)
        return self._paged(self._stub.GetMessages, request, deadline)

    async def iter_messages(self, memory_id: str, page_size: int = 0) -> AsyncIterator[Msg]:
        async for response in self._pages(memory_id, page_size):
            for msg in _requests.page_messages(response):
                yield msg

    async def get_messages(self, memory_id: str) -> list[Msg]:
        """Every message in insertion order (Java `Memory.getMessages()`), as one state of the
        memory: when it changes between pages the server aborts the read (ABORTED), and the
        whole read starts again, at most `CONSISTENT_READ_ATTEMPTS` times; then `AbortedError`
        is raised. A mixed list is never returned. `iter_messages` streams pages instead.
        The whole read, every page and every new start, is within the client's `timeout`."""
        return (await self.read_messages(memory_id)).messages

    async def read_messages(self, memory_id: str, *, if_none_match: str = "", accept_delta: bool = False) -> MessagesRead:
        """`get_messages` with the etag naming the state read, for a caller that keeps a copy:
        given the etag of its copy (`if_none_match`), an unchanged memory answers `not_modified`
        with no messages, and with `accept_delta` a memory only added to since answers just the
        added messages (`delta`); anything else (a delete, a clear, a compression, a state
        load) answers the whole list. Read as `get_messages` reads, within the `timeout`."""
        deadline = time.monotonic() + self.timeout

        async def fetch(token: str, first: bool) -> Page:
            request = pb.GetMessagesRequest(memory_id=memory_id, page_token=token)
            if first:
                request.if_none_match, request.accept_delta = if_none_match, accept_delta
            response = await self._call(self._stub.GetMessages, request, deadline=deadline)
            return Page(_requests.page_messages(response), response.etag, response.next_page_token,
                        response.not_modified, response.delta)

        return await read_consistently(fetch)

    async def delete_message(self, memory_id: str, index: int, *, expected_id: str | None = None) -> bool:
        """Delete by position; like AgentScope, an index out of range (or negative) is a no-op.
        With `expected_id`, only if the message there still has that id: else `AbortedError`
        (another client changed the list since it was read) and nothing is deleted."""
        return (await self.delete_message_with_etags(memory_id, index, expected_id=expected_id)).deleted

    async def delete_message_with_etags(self, memory_id: str, index: int, *,
                                        expected_id: str | None = None) -> MessageDeleted:
        """`delete_message`, answering also the etags just before and after the delete, for a
        caller that keeps a copy (see `read_messages`)."""
        if index < 0:
            return MessageDeleted(False, 0, "", "")
        response = await self._call(
            self._stub.DeleteMessage, pb.DeleteMessageRequest(memory_id=memory_id, index=index, expected_message_id=expected_id),
            retry=False
        )
        return MessageDeleted(response.deleted, response.message_count, response.etag, response.previous_etag)

    async def delete_messages(self, memory_id: str, message_ids: Sequence[str] = (), *, marks: Sequence[str] = (),
                        allow_missing: bool = False) -> MessagesDeleted:
        """Delete every message whose id is in `message_ids`, or (instead) every message carrying
        one of `marks` (AgentScope-Python `delete` / `delete_by_mark`), in one call that sends only
        the ids or marks. An id naming no message is `NotFoundError` (nothing deleted) unless
        `allow_missing`. Answers the deleted ids and the etags around the delete. Retried on
        UNAVAILABLE like the reads when repeating it is safe: by marks, or with `allow_missing`."""
        response = await self._call(self._stub.DeleteMessages,
                                   _requests.delete_messages(memory_id, message_ids, marks, allow_missing),
                                   retry=_requests.deletes_repeatable(message_ids, allow_missing))
        return _requests.messages_deleted(response)

    async def update_message_marks(self, memory_id: str, new_mark: str | None, *, old_mark: str | None = None,
                             message_ids: Sequence[str] | None = None, allow_missing: bool = False) -> MarksUpdated:
        """AgentScope-Python `update_messages_mark(new_mark, old_mark, msg_ids)` on the server:
        `message_ids` None considers every message. Only the change travels; the marks are those
        at `metadata.agentscope_python.marks`. An id naming no message is `NotFoundError`
        (nothing changed) unless `allow_missing`. Retried on UNAVAILABLE like the reads: setting or
        removing marks again leaves them as once does (a repeat only answers smaller counts)."""
        response = await self._call(self._stub.UpdateMessageMarks,
                                   _requests.update_marks(memory_id, message_ids, new_mark, old_mark, allow_missing))
        return _requests.marks_updated(response)

    async def clear(self, memory_id: str) -> None:
        await self.clear_with_etags(memory_id)

    async def clear_with_etags(self, memory_id: str) -> MessagesReplaced:
        """`clear`, answering also the etag of the now empty messages (and the one before), so a
        caller keeps an empty copy without a read."""
        response = await self._call(self._stub.ClearMessages, pb.ClearMessagesRequest(memory_id=memory_id))
        return MessagesReplaced(response.etag, response.previous_etag)

    async def save_state(
        self, memory_id: str, *, progress: Callable[[int], None] | None = None
    ) -> tuple[list[StateEntry], int]:
        """The memory's state in AgentScope session terms, and the version it was read at.
        `progress` is called with the size in bytes of each piece as it arrives."""
        async def read(request: state_pb.StreamSaveStateRequest, **kwargs: Any) -> list[state_pb.StreamSaveStateResponse]:
            pieces = []
            async for piece in self._state.StreamSaveState(request, **kwargs):
                if progress is not None:
                    progress(piece.ByteSize())
                pieces.append(piece)
            return pieces

        return _requests.joined_state(await self._call(read, _requests.save_stream(memory_id)))

    async def load_state(
        self, memory_id: str, entries: list[StateEntry], *, expected_version: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Replace the memory's contents (AgentScope `loadFrom`); returns the new version.
        With `expected_version`, a memory changed since then raises `AbortedError`.
        `progress` is called with the size in bytes of each piece as it is sent."""
        return (await self.load_state_with_etags(memory_id, entries, expected_version=expected_version,
                                                 progress=progress)).version

    async def load_state_with_etags(
        self, memory_id: str, entries: list[StateEntry], *, expected_version: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> MessagesReplaced:
        """`load_state`, answering also the new version and the etags of the messages just
        before and after the load, so a caller that knows what it loaded keeps it as its copy."""
        requests = _requests.load_stream(memory_id, entries, expected_version)

        async def load(pieces: list[state_pb.StreamLoadStateRequest], **kwargs: Any) -> state_pb.StreamLoadStateResponse:
            return await self._state.StreamLoadState(_requests.reported(pieces, progress), **kwargs)

        response = await self._call(load, requests, retry=expected_version is not None)
        return MessagesReplaced(response.etag, response.previous_etag, response.version)
