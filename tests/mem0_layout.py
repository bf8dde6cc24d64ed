"""The data layout of earlier versions (the mem0 engine's embedded Qdrant and history under
`<data_dir>/mem0`), written by that engine itself, for the tests of its migration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentscope_memory.long_term import LongTermItem, Scope
from agentscope_memory.message import Msg, MsgRole


@dataclass
class Mem0Layout:
    # Alice's two memories ("I like green tea" after an update, "好的，记住了"), tenant default.
    kept: list[LongTermItem]
    # Bob's one memory, tenant "tenant-b".
    other: list[LongTermItem]


async def write_mem0_layout(data: Path) -> Mem0Layout:
    """Writes it under `data / "mem0"`; a third memory (carol's) is deleted before the migration."""
    from agentscope_memory.long_term.mem0 import Mem0Backend, Mem0Config, Mem0Engine

    old = Mem0Engine(Mem0Backend(Mem0Config(data_dir=data)))
    kept = await old.record("default", Scope(agent_name="Assistant", user_id="alice"),
                            [Msg.create(MsgRole.USER, "I like tea"), Msg.create(MsgRole.ASSISTANT, "好的，记住了")],
                            {"source": "chat"})
    other = await old.record("tenant-b", Scope(user_id="bob"), [Msg.create(MsgRole.USER, "Bob sails")])
    await old.update("default", kept[0].id, text="I like green tea")
    gone = await old.record("default", Scope(user_id="carol"), [Msg.create(MsgRole.USER, "forgotten")])
    await old.delete("default", gone[0].id)
    await old.close()
    return Mem0Layout(kept, other)
