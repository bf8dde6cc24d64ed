"""agentscope-memory: memory for AgentScope agents, as a library and a gRPC service."""

__version__ = "0.1.0"
