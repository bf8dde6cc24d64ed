"""Memory tools and resources for agents that reach the service through MCP.

The tool and resource logic lives here, over `MemoryAccess` (an in-process `Service` or a
running server through the Python clients); the MCP transport in
`agentscope_memory_server.mcp` only lists and routes. No MCP SDK import in this package.
"""

from agentscope_memory.memory_tools.access import MemoryAccess, ServiceAccess
from agentscope_memory.memory_tools.connection import Connection
from agentscope_memory.memory_tools.tools import (
    MemoryTools,
    ToolDefinition,
    tool_definitions,
)

__all__ = ["Connection", "MemoryAccess", "MemoryTools", "ServiceAccess", "ToolDefinition", "tool_definitions"]
