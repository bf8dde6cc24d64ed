"""The memory AgentScope-Python 2.x compression (`v2_context`) uses for an agent's session when
none is given: any agent name and session id 2.x takes gives one the server takes."""

from __future__ import annotations

from agentscope_memory.agentscope_adapters.v2_context import default_memory_id
from agentscope_memory.client import AsyncAutoContextClient

HOSTILE = ["会" * 90, "x" * 300, "第一行\n第二行", "制表\t符", "a\x00b", " ", "\ud800孤"]


async def test_every_session_id_gives_a_memory_the_server_creates(server) -> None:
    ids = {(name, session): default_memory_id(name, session)
           for name in ("Friday", "助手" * 60) for session in ["客服/会话 1", "", *HOSTILE]}
    # A readable id where it can be one; one memory per agent and session.
    assert ids[("Friday", "客服/会话 1")] == "agentscope2/Friday/客服/会话 1"
    assert ids[("Friday", "")] == "agentscope2/Friday/"
    assert len(set(ids.values())) == len(ids)
    async with AsyncAutoContextClient(server.address, timeout=10) as client:
        for memory_id in ids.values():
            assert (await client.create_memory(memory_id)).memory_id == memory_id
    assert default_memory_id("Friday", "x" * 300) == ids[("Friday", "x" * 300)]  # the same at every call
