"""The default embedder is MiniLM + multilingual-e5-small by script; a data dir written with an
earlier default (MiniLM, then e5-small, both 384-d) stays readable: the first search of a scope
embeds its other-model rows again (in one batch, written back, 768-d), so old memories are found
by meaning, in English and Chinese."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_memory.client import AsyncLongTermClient
from agentscope_memory.long_term import Scope
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service

SCOPE = Scope(agent_name="助手", user_id="user-老用户")
FACTS = ["I am allergic to peanuts", "我在上海的一家银行工作", "My daughter started primary school this year"]


def test_the_default_embedder_is_multilingual() -> None:
    assert ServiceSettings().long_term_embedder == "minilm+e5"


@pytest.mark.parametrize(("earlier", "model"), [("minilm", "MiniLM"), ("e5-small", "e5-small")])
async def test_memories_written_with_an_earlier_default_are_found_after_the_default_changed(
        tmp_path: Path, earlier: str, model: str) -> None:
    old = build_service(ServiceSettings(data_dir=tmp_path, long_term_embedder=earlier, long_term_scoring=False))
    async with old, AsyncLongTermClient.local(old) as ltm:
        await ltm.record(SCOPE, [Msg.create(MsgRole.USER, fact) for fact in FACTS])
        assert model in old.long_term.embedding_model  # type: ignore[union-attr]

    new = build_service(ServiceSettings(data_dir=tmp_path, long_term_scoring=False))
    async with new, AsyncLongTermClient.local(new) as ltm:
        assert {item.text for item in await ltm.list(SCOPE)} == set(FACTS)
        assert new.long_term.embedding_model.startswith("minilm+")  # type: ignore[union-attr]
        assert (await ltm.retrieve(SCOPE, Msg.create(MsgRole.USER, "在哪里上班"), limit=1)) == "我在上海的一家银行工作"
        assert (await ltm.retrieve(SCOPE, Msg.create(MsgRole.USER, "which foods must I avoid"), limit=1)) == FACTS[0]
        rows = await new.long_term.rows("default", [item.id for item in await ltm.list(SCOPE)])  # type: ignore[union-attr]
        assert {row.embedding_model for row in rows} == {new.long_term.embedding_model}  # type: ignore[union-attr]
