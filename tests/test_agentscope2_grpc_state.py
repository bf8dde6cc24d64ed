"""AgentScope-Python 2.x agent state in the server (`v2_state.RemoteAgentState`) without the 2.x
package: `save` needs only `model_dump_json()`, which a pydantic model stands in for here (the
real `AgentState` is saved and loaded in test_agentscope2_grpc_context.py)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from pydantic import BaseModel

from agentscope_memory.agent_state import Slot
from agentscope_memory.agentscope_adapters.v2_state import DEFAULT_KEY, AgentStateConflictError, RemoteAgentState
from agentscope_memory.client import AsyncAgentStateClient


class State(BaseModel):
    session_id: str
    context: list[str] = []


class LosesReplies:
    """PutValue, whose next `lose` replies are lost after the server stored the value (the
    connection dropped on the way back): the client sees UNAVAILABLE and retries."""

    def __init__(self, method: Any, lose: int) -> None:
        self.method, self.lose = method, lose

    async def __call__(self, request: Any, **kwargs: Any) -> Any:
        response = await self.method(request, **kwargs)
        if self.lose:
            self.lose -= 1
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       "connection reset on the way back")
        return response


async def test_a_save_whose_reply_was_lost_is_not_a_conflict_with_itself(server) -> None:
    async with AsyncAgentStateClient(server.address, timeout=10) as client:
        slot = RemoteAgentState(client, "小明", "会话-丢失")
        client._stub.PutValue = LosesReplies(client._stub.PutValue, lose=1)
        # The first save of a slot never loaded (a create), its reply lost: the retry finds the
        # value there, its own.
        first = State(session_id="会话-丢失", context=["你好"])
        assert await slot.save(first) == 1
        # A later save, its reply lost too, goes on from that version.
        client._stub.PutValue.lose = 1
        second = State(session_id="会话-丢失", context=["你好", "再见"])
        assert await slot.save(second) == 2 and slot.version == 2
        stored = await client.get_value(Slot("小明", "会话-丢失"), DEFAULT_KEY)
        assert (stored.version, stored.json) == (2, second.model_dump_json())


async def test_a_save_after_another_writers_is_a_conflict_saying_what_to_do(server) -> None:
    async with AsyncAgentStateClient(server.address, timeout=10) as client:
        mine, theirs = RemoteAgentState(client, "小明", "会话-冲突"), RemoteAgentState(client, "小明", "会话-冲突")
        assert await theirs.save(State(session_id="会话-冲突", context=["他们的"])) == 1
        # Even after a lost reply, a save over another writer's value is a conflict.
        client._stub.PutValue = LosesReplies(client._stub.PutValue, lose=1)
        with pytest.raises(AgentStateConflictError) as caught:
            await mine.save(State(session_id="会话-冲突", context=["我的"]))
        error = caught.value
        assert (error.loaded_version, error.current_version) == (0, 1)
        assert "小明" in str(error) and "会话-冲突" in str(error) and "load it again, then save" in str(error)
        stored = await client.get_value(Slot("小明", "会话-冲突"), DEFAULT_KEY)
        assert stored.json == State(session_id="会话-冲突", context=["他们的"]).model_dump_json()


async def test_the_same_state_saved_by_another_writer_is_still_a_conflict(server) -> None:
    """Only a save sent again after a lost reply may find its own state: another writer's save
    of an equal state, the reply not lost, is the other writer's turn and a conflict."""
    async with AsyncAgentStateClient(server.address, timeout=10) as client:
        mine, theirs = RemoteAgentState(client, "小红", "会话-相同"), RemoteAgentState(client, "小红", "会话-相同")
        state = State(session_id="会话-相同", context=["一样的"])
        assert await theirs.save(state) == 1
        with pytest.raises(AgentStateConflictError):
            await mine.save(state)
