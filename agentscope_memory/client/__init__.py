"""Python clients for the agentscope-memory server (blocking and asyncio), in library types.

Each client also has a local mode (`AsyncMemoryClient.local(...)`, ...) with the same methods
over an in-process service, without a server or gRPC.
"""

from agentscope_memory.client.agent_state import AgentStateClient, AsyncAgentStateClient
from agentscope_memory.client.aio import AsyncMemoryClient
from agentscope_memory.client.auto_context import AsyncAutoContextClient, AutoContextClient
from agentscope_memory.client.messages import (
    MarksUpdated,
    MessageDeleted,
    MessagesAdded,
    MessagesDeleted,
    MessagesRead,
    MessagesReplaced,
)
from agentscope_memory.client.long_term import AsyncLongTermClient, LongTermClient, Turn
from agentscope_memory.client.pool import AsyncPoolClient, PoolClient
from agentscope_memory.client.sync import MemoryClient
from agentscope_memory.client.tiered import AsyncTieredClient, TieredClient
from agentscope_memory.short_term.description import MemoryDescription

__all__ = ["AgentStateClient", "AsyncAgentStateClient", "AsyncAutoContextClient", "AsyncLongTermClient", "AsyncMemoryClient", "AsyncPoolClient",
           "AsyncTieredClient", "AutoContextClient", "LongTermClient", "MemoryClient", "MarksUpdated", "MemoryDescription", "MessageDeleted", "MessagesDeleted",
           "MessagesAdded", "MessagesRead", "MessagesReplaced", "PoolClient", "TieredClient", "Turn"]
