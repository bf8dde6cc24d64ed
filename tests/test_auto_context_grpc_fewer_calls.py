"""Through gRPC, with the scripted OpenAI-compatible model as summariser: the improved profile
makes at most a tenth of parity's summariser calls on the same tool conversation, and every
planted fact (English and Chinese) stays answerable via the working context and ReloadContext."""

from __future__ import annotations

import re

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.message import Msg, TextBlock, ToolResultBlock
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from scripted_llm import ScriptedLLM, ScriptedReply
from test_auto_context_lib_fewer_calls import CONFIG, FACTS, conversation

TAG = re.compile(r"CONTEXT_OFFLOAD: uuid=([0-9A-Za-z-]+)")


def _texts(msgs: list[Msg]) -> list[str]:
    out = []
    for m in msgs:
        out.append(m.text_content or "")
        out += [t.text for b in m.content if isinstance(b, ToolResultBlock) for t in b.output if isinstance(t, TextBlock)]
    return out


async def _run(server_factory, profile: str) -> tuple[int, int]:
    with ScriptedLLM(default=ScriptedReply.text("Checked the logs and fixed the build.")) as llm:
        server = await server_factory(llm_base_url=llm.base_url, llm_max_retries=0)
        client = AsyncMemoryClient(server.address)
        channel = grpc.aio.insecure_channel(server.address)
        stub = pb_grpc.MemoryServiceStub(channel)
        try:
            await client.create_memory("记忆-m", "AUTO_CONTEXT", auto_context_config=AutoContextConfig(profile=profile, **CONFIG))
            for msg in conversation(160):
                await client.add_messages("记忆-m", [msg])
                await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="记忆-m"))
            texts = _texts(await client.get_messages("记忆-m"))
            queue, seen = [u for t in texts for u in TAG.findall(t)], set()
            while queue:
                uuid = queue.pop()
                if uuid in seen:
                    continue
                seen.add(uuid)
                out = await stub.ReloadContext(pb.ReloadContextRequest(memory_id="记忆-m", working_context_offload_uuid=uuid))
                assert out.found and not out.next_page_token
                found = _texts([msg_from_proto(m) for m in out.messages])
                texts += found
                queue += [u for t in found for u in TAG.findall(t)]
            joined = "\n".join(texts)
            return len(llm.chat_requests), sum(1 for f in FACTS.values() if f in joined)
        finally:
            await client.close()
            await channel.close()


async def test_improved_calls_the_summariser_a_tenth_as_often_and_recalls_everything(server_factory) -> None:
    parity_calls, parity_recall = await _run(server_factory, "parity")
    calls, recall = await _run(server_factory, "improved")
    assert parity_calls >= 100
    assert 0 < calls * 10 <= parity_calls
    assert recall == parity_recall == len(FACTS)
