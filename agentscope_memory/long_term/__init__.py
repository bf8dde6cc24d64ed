"""Long-term memory: the engine interface (`engine`), AgentScope's modes (`modes`), agent tools
(`tools`) and turn helpers (`turns`), all written against `LongTermEngine`. Engines live in
their own folders (`mem0/` today)."""

from agentscope_memory.long_term.engine import HistoryEntry, LongTermEngine, LongTermItem, Scope
from agentscope_memory.long_term.modes import Mode

__all__ = ["HistoryEntry", "LongTermEngine", "LongTermItem", "Mode", "Scope"]
