"""What a RemoteMemory's GetMessages calls carry, counted on its own channel: shared by the
scripts that check reads are answered from the adapter's copy (run as `python script.py`, so
this sits beside them on the path)."""

from __future__ import annotations

from typing import Any

import grpc

from agentscope_memory.agentscope_adapters.per_loop import PerLoop
from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory
from agentscope_memory.client import AsyncMemoryClient


class GetMessagesCounter(grpc.aio.UnaryUnaryClientInterceptor):
    """What GetMessages answers carry on one client's channel: calls, messages, bytes, and how
    many answers were pages of the whole list (neither `not_modified` nor a delta)."""

    def __init__(self) -> None:
        self.counts = {"calls": 0, "received": 0, "bytes": 0, "pages": 0}

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        response = await (await continuation(details, request))
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if method.endswith("/GetMessages"):
            self.counts["calls"] += 1
            self.counts["received"] += len(response.messages)
            self.counts["bytes"] += response.ByteSize()
            self.counts["pages"] += not (response.not_modified or response.delta)
        return response


def counted_memory(target: str, memory_id: str, key: str | None
                   ) -> tuple[RemoteMemory, GetMessagesCounter, grpc.aio.Channel]:
    """A RemoteMemory whose calls go over a channel counting what its reads receive; the channel
    is the caller's to close."""
    counter = GetMessagesCounter()
    channel = grpc.aio.insecure_channel(target, interceptors=[counter])
    memory = RemoteMemory(target, memory_id, api_key=key)
    memory._clients = PerLoop(lambda: AsyncMemoryClient(channel=channel, api_key=key))
    return memory, counter, channel
