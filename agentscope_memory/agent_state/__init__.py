"""AgentScope-Java 2.x agent state: JSON values and lists under (tenant, user, session, key),
versioned for compare-and-set, and the JsonFileAgentStateStore directory layout."""

from agentscope_memory.agent_state.engine import (
    AgentStateEngine,
    AgentStateLimits,
    KeyPage,
    ListPage,
    ListWrite,
    SessionIdPage,
    Slot,
    StateConflictError,
    StoredValue,
    ValueTooLargeError,
)

__all__ = [
    "AgentStateEngine",
    "AgentStateLimits",
    "KeyPage",
    "ListPage",
    "ListWrite",
    "SessionIdPage",
    "Slot",
    "StateConflictError",
    "StoredValue",
    "ValueTooLargeError",
]
