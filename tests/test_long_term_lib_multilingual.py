"""`long_term_embedder=e5-small`: the engine really embeds with the multilingual model (the
`multilingual` extra), records it as each memory's model and finds Chinese memories by meaning."""

from __future__ import annotations

from pathlib import Path

from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service

SCOPE = Scope(agent_name="助手", user_id="用户-1")
FACTS = ["我对花生过敏", "我每天早上跑步五公里", "我的女儿今年上小学一年级", "我在上海的一家银行工作"]


async def test_e5_small_finds_chinese_memories_by_meaning(tmp_path: Path) -> None:
    service = build_service(ServiceSettings(data_dir=tmp_path, long_term_embedder="e5-small", long_term_scoring=False))
    async with service, AsyncLongTermClient.local(service) as ltm:
        await ltm.record(SCOPE, [Msg.create(MsgRole.USER, fact) for fact in FACTS])
        assert "e5" in service.long_term.embedding_model  # type: ignore[union-attr]
        stored = await ltm.list(SCOPE)
        assert {item.text for item in stored} == set(FACTS)
        # Paraphrases share few characters with the stored facts: the dense leg must carry them.
        assert (await ltm.retrieve(SCOPE, Msg.create(MsgRole.USER, "哪些食物不能吃"), limit=1)) == "我对花生过敏"
        assert (await ltm.retrieve(SCOPE, Msg.create(MsgRole.USER, "孩子多大了"), limit=1)) == "我的女儿今年上小学一年级"
