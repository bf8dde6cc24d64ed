"""Adapters that plug the agentscope-memory server into AgentScope-Python applications
(`pip install "agentscope-memory[agentscope]"`). Nothing here imports `agentscope` at import
time, so the adapters load in whichever AgentScope release the application has.

- 2.x: `RemoteMem0Client`, the client object for `Mem0Middleware(client=...)`.
"""

from agentscope_memory.agentscope_adapters.mem0_client import (
    Mem0ClientError,
    RemoteMem0Client,
)

__all__ = ["Mem0ClientError", "RemoteMem0Client"]
