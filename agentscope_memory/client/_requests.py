"""Request builders and response readers shared by the sync and asyncio clients."""

from __future__ import annotations

from typing import Sequence

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.client._common import kind_to_pb
from agentscope_memory.message import Msg
from agentscope_memory.proto_convert import msgs_from_proto, msgs_to_proto


def create(
    memory_id: str,
    kind: str,
    labels: dict[str, str] | None,
    allow_existing: bool,
    auto_context_config: pb.AutoContextConfig | None,
) -> pb.CreateMemoryRequest:
    request = pb.CreateMemoryRequest(
        memory_id=memory_id,
        kind=kind_to_pb(kind),
        labels=dict(labels or {}),
        allow_existing=allow_existing,
    )
    if auto_context_config is not None:
        request.auto_context_config.CopyFrom(auto_context_config)
    return request


def add(memory_id: str, msgs: Sequence[Msg], request_id: str) -> pb.AddMessagesRequest:
    return pb.AddMessagesRequest(
        memory_id=memory_id, messages=msgs_to_proto(list(msgs)), request_id=request_id
    )


def page_messages(response: pb.GetMessagesResponse) -> list[Msg]:
    return msgs_from_proto(response.messages, "response.messages")


# Reads of a long history that another client keeps changing between pages.
CONSISTENT_READ_ATTEMPTS = 5


def one_state(pages: Sequence[pb.GetMessagesResponse]) -> bool:
    """Whether the pages were read from one state of the memory (every change moves the etag)."""
    return len({page.etag for page in pages}) == 1
