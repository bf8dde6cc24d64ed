"""The mem0 long-term engine: mem0 in-process (embedded Qdrant, MiniLM), offline by default."""

from agentscope_memory.long_term.mem0.backend import Mem0Backend, Mem0Config
from agentscope_memory.long_term.mem0.engine import Mem0Engine

__all__ = ["Mem0Backend", "Mem0Config", "Mem0Engine"]
