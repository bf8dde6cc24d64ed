"""mem0's REST API over the long-term engine: request models and the operations behind the
server's mem0-compatible HTTP facade (AgentScope's Mem0LongTermMemory works against it)."""

from agentscope_memory.mem0_api.facade import (
    ListPage,
    Mem0Api,
    memory_json,
    split_filters,
    utc_timestamp,
)
from agentscope_memory.mem0_api.models import (
    AddRequest,
    Ids,
    ListRequest,
    Mem0Message,
    SearchRequest,
    UpdateRequest,
)

__all__ = [
    "AddRequest", "Ids", "ListPage", "ListRequest", "Mem0Api", "Mem0Message", "SearchRequest", "UpdateRequest",
    "memory_json", "split_filters", "utc_timestamp",
]
