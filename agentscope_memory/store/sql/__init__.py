"""One SQL implementation of the store protocol, for every SQL database (see `dialect.py`).

`SqlTx` is the `Tx` of both SQL backends: each group of tables keeps its statements in its own
module, written once. A backend (`sqlite.py`, `postgres.py`) only opens connections, runs
transactions on its threads and creates its schema.
"""

from __future__ import annotations

from agentscope_memory.store.sql.agent_state import AgentStateStatements
from agentscope_memory.store.sql.dialect import Dialect
from agentscope_memory.store.sql.jobs import JobStatements
from agentscope_memory.store.sql.lifecycle_forget import LifecycleForgetStatements
from agentscope_memory.store.sql.lifecycle_reflect import LifecycleReflectStatements
from agentscope_memory.store.sql.long_term import LongTermStatements
from agentscope_memory.store.sql.memories import REQUEST_TTL_S, MemoryStatements
from agentscope_memory.store.sql.meta import MetaStatements
from agentscope_memory.store.sql.pool import PoolStatements
from agentscope_memory.store.sql.schema import SHARED_SCHEMA
from agentscope_memory.store.sql.scopes import ScopeStatements
from agentscope_memory.store.sql.tiered import TieredStatements

__all__ = ["Dialect", "REQUEST_TTL_S", "SHARED_SCHEMA", "SqlTx"]


class SqlTx(LifecycleForgetStatements, LifecycleReflectStatements, MemoryStatements, MetaStatements, JobStatements, AgentStateStatements,
            LongTermStatements, ScopeStatements, PoolStatements, TieredStatements):
    """A tenant's view inside one SQL transaction (the `Tx` protocol)."""

    def delete_memory(self, memory_id: str) -> None:
        """A memory goes with its place in the hierarchy and its items' visibility marks,
        whichever path deletes it: its lists' sequence numbers start again at 1 if the id is
        used again, so marks left behind would make the new memory's LOCAL messages SHARED, and
        links left behind would make the old children inherit from it. Agent-state slots
        detached from it as a 1.x memory forget it too: their markers would otherwise outlive it,
        one row per deleted session for ever, and keep a memory made anew under the id from
        being resumed."""
        super().delete_memory(memory_id)
        self.scope_forget_memory(memory_id)
        self.scope_detach_children("memory", memory_id)
        self.state_forget_detachments(memory_id)
