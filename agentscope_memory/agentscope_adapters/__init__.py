"""Adapters that plug the agentscope-memory server into AgentScope-Python applications
(`pip install "agentscope-memory[agentscope]"`). Nothing here imports `agentscope` at import
time, so the adapters load in whichever AgentScope release the application has.

- 2.x: `RemoteMem0Client`, the client object for `Mem0Middleware(client=...)`; over gRPC,
  `v2_context.RemoteContextCompression` (a middleware handing the agent's context compression to
  an AUTO_CONTEXT memory, with the `context_reload` tool) and `v2_state.RemoteAgentState` (the
  agent's `AgentState` in the server, compare-and-set); import those modules explicitly.
- 1.0.21: `v1.RemoteLongTermMemory` (a `LongTermMemoryBase`, over the mem0 REST port) and
  `v1_memory.RemoteMemory` (a `MemoryBase`, over gRPC); import those modules explicitly.
"""

from agentscope_memory.agentscope_adapters.mem0_client import (
    Mem0ClientError,
    RemoteMem0Client,
)

__all__ = ["Mem0ClientError", "RemoteMem0Client"]
