"""AgentScope-Python 2.x: an agent's `AgentState` kept in the server, with compare-and-set.

    from agentscope_memory.client import AsyncAgentStateClient
    from agentscope_memory.agentscope_adapters.v2_state import RemoteAgentState

    slot = RemoteAgentState(AsyncAgentStateClient("127.0.0.1:50051", api_key="..."), "alice", "chat-1")
    agent = Agent(..., state=await slot.load())    # a new AgentState when none is stored
    await agent.reply(...)
    await slot.save(agent)                          # AgentStateConflictError if another saved since

2.x leaves persistence to the application; this stores `state.model_dump_json()` as one value
of the server's AgentStateService slot (user, session), key `agentscope_python_agent_state`
(AgentScope-Java 2.x writes `agent_state` in its own JSON, which a Python agent cannot read).
A save names the version the load read: when another process saved the slot meanwhile, it
fails instead of overwriting that turn (a retried save that finds its own state stored, its
first reply lost, does not). States of any size are sent and read in pieces
when they do not fit one gRPC message.
"""

from __future__ import annotations

from typing import Any

from agentscope_memory.agent_state import Slot, StateConflictError
from agentscope_memory.client.agent_state import AsyncAgentStateClient

DEFAULT_KEY = "agentscope_python_agent_state"


class AgentStateConflictError(StateConflictError):
    """The slot was saved by another writer since this one loaded (or, never loaded, it exists)."""

    def __init__(self, user_id: str, session_id: str, loaded_version: int, current_version: int) -> None:
        self.user_id = user_id
        self.session_id = session_id
        self.loaded_version = loaded_version
        what = (f"the agent state of user {user_id!r}, session {session_id!r} (loaded at version {loaded_version})"
                if loaded_version else f"the agent state of user {user_id!r}, session {session_id!r} (never loaded)")
        super().__init__(what, current_version)
        self.args = (f"{self.args[0]}: load it again, then save",)


def _state_of(agent_or_state: Any) -> Any:
    return getattr(agent_or_state, "state", agent_or_state)


class RemoteAgentState:
    """One (user, session) slot's agent state; remembers the version it last read or wrote."""

    def __init__(self, client: AsyncAgentStateClient, user_id: str, session_id: str, *, key: str = DEFAULT_KEY) -> None:
        self.client = client
        self.slot = Slot(user_id, session_id)
        self.key = key
        # 0: nothing stored when last read (a save creates the value, and fails if it exists).
        self.version = 0

    async def load(self) -> Any:
        """The stored `AgentState`, or a new one with this session id when none is stored; give
        it to the agent when it is made (`Agent(..., state=...)`), which builds what it derives
        from the state (its permission engine) from it."""
        from agentscope.state import AgentState

        stored = await self.client.get_value(self.slot, self.key)
        self.version = stored.version if stored.found else 0
        return (AgentState.model_validate_json(stored.json) if stored.found
                else AgentState(session_id=self.slot.session_id))

    async def save(self, agent_or_state: Any) -> int:
        """Stores the state (an `Agent`'s or an `AgentState`) if the slot is still at the version
        last read or written here; returns the new version."""
        text = _state_of(agent_or_state).model_dump_json()
        try:
            self.version = await self.client.put_value(self.slot, self.key, text, expected_version=self.version)
        except StateConflictError as exc:
            if exc.retried:
                # The save was sent again after its reply was lost: the slot may have moved on by
                # this save itself, and when it holds this state, that is no conflict.
                stored = await self.client.get_value(self.slot, self.key)
                if stored.found and stored.json == text:
                    self.version = stored.version
                    return self.version
            raise AgentStateConflictError(self.slot.user_id, self.slot.session_id, self.version,
                                          exc.current_version) from None
        return self.version
