"""Python clients for the agentscope-memory server (blocking and asyncio), in library types."""

from agentscope_memory.client._common import MemoryDescription
from agentscope_memory.client.aio import AsyncMemoryClient
from agentscope_memory.client.long_term import AsyncLongTermClient, Turn
from agentscope_memory.client.sync import MemoryClient

__all__ = ["AsyncLongTermClient", "AsyncMemoryClient", "MemoryClient", "MemoryDescription", "Turn"]
