"""Long-term memory: mem0 in-process, AgentScope's modes and agent tools."""

from agentscope_memory.long_term.mem0_store import LongTermConfig, Mem0Store
from agentscope_memory.long_term.memory import Mem0LongTermMemory, MemoryItem, Scope
from agentscope_memory.long_term.turns import Mode, Turns

__all__ = ["LongTermConfig", "Mem0LongTermMemory", "Mem0Store", "MemoryItem", "Mode", "Scope", "Turns"]
