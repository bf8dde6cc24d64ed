"""AgentScope-Python 2.x with the server's context compression (`v2_context`) and agent state
(`v2_state`): the real 2.0.10 `Agent` in its own virtualenv, a real server, the scripted model.
Each process of a story is a new Python process, as an application restarted between turns."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from agentscope_python import AGENTSCOPE_2, agentscope_python
from scripted_llm import ScriptedLLM, ScriptedReply

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.client import AsyncMemoryClient, AsyncPoolClient
from agentscope_memory.short_term.auto_context.config import AutoContextConfig

SCRIPT = Path(__file__).parent / "agentscope_scripts" / "agentscope2_context.py"
KEY = "agentscope2-context-key-0001"
MARKER = re.compile(r"CONTEXT_OFFLOAD: uuid=[0-9a-f]")

pytestmark = pytest.mark.slow


async def _run(phase: str, target: str, llm: ScriptedLLM, **extra: str) -> dict[str, Any]:
    python = await asyncio.to_thread(agentscope_python, AGENTSCOPE_2)
    env = {**os.environ, "GRPC_TARGET": target, "LLM_URL": llm.base_url, "MEM0_KEY": KEY, "PHASE": phase, **extra}
    proc = await asyncio.create_subprocess_exec(str(python), str(SCRIPT), env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 600)
    assert proc.returncode == 0, err.decode()[-6000:]
    result = dict(json.loads(out.decode().strip().splitlines()[-1]))
    result["stderr"] = err.decode()
    return result


def _agent_calls(llm: ScriptedLLM) -> list[dict[str, Any]]:
    """The agents' requests (the server's summariser asks the same model)."""
    return [r.body for r in llm.chat_requests if "你是一个助手。" in json.dumps(r.body["messages"][0], ensure_ascii=False)]


def _texts(request: dict[str, Any]) -> str:
    return json.dumps(request.get("messages", []), ensure_ascii=False)


async def _originals(client: AsyncMemoryClient, memory_id: str) -> int:
    request = pb.GetOriginalMessagesRequest(memory_id=memory_id, page_size=1)
    return int((await client._call(client._stub.GetOriginalMessages, request)).total_size)


async def _events(client: AsyncMemoryClient, memory_id: str) -> list[str]:
    request = pb.ListCompressionEventsRequest(memory_id=memory_id)
    return [e.event_type async for page in client._paged(client._stub.ListCompressionEvents, request)
            for e in page.events]


async def test_agentscope2_agent_compressed_by_the_server_saved_loaded_and_reloading(server_factory) -> None:
    with ScriptedLLM(default=ScriptedReply.text("好的。")) as llm:
        server = await server_factory(api_keys={KEY: "python-tenant"}, llm_base_url=llm.base_url, llm_max_retries=0)
        async with AsyncMemoryClient(server.address, api_key=KEY) as client, \
                AsyncPoolClient(server.address, api_key=KEY) as pools:
            # The session's memory exists already (as the script's configuration), with a
            # shared pool attached: the agent's system prompt carries the pool's entries.
            await client.create_memory("agentscope2/Friday/会话-1", "AUTO_CONTEXT", auto_context_config=AutoContextConfig(
                msg_threshold=10, last_keep=2, min_compression_token_threshold=0, profile="improved"))
            await pools.write("团队", "发布", "周五发布", writer="planner")
            await pools.set_memory_pools("agentscope2/Friday/会话-1", ["团队"], max_tokens=500)
            # Four rounds: two with a tool call each (the second plants a fact), two plain ones;
            # before the fourth, the server's summariser is asked for the summary.
            llm.push(ScriptedReply.tool_call("lookup", {"city": "杭州"}), ScriptedReply.text("杭州晴。"),
                     ScriptedReply.tool_call("lookup", {"city": "上海"}), ScriptedReply.text("记住了，上海也晴。"),
                     ScriptedReply.text("不客气。"), ScriptedReply.text("用户问了杭州和上海的天气，都是晴天。"),
                     ScriptedReply.text("再见。"))
            first = await _run("first", server.address, llm)
            calls = _agent_calls(llm)
            memory_id = first["memory_id"]
            originals = await _originals(client, memory_id)
            events = await _events(client, memory_id)

            # The last request (round four) holds the server's summary and fewer messages than the
            # one before: the first two rounds after their first user message are one summary.
            last, before = calls[-1]["messages"], calls[-2]["messages"]
            assert MARKER.search(_texts(calls[-1])) and not MARKER.search(_texts(calls[-2]))
            assert len(last) < len(before), (len(last), len(before))
            assert "E12345678" in _texts(calls[-2]) and "E12345678" not in _texts(calls[-1])
            assert "杭州天气怎么样？" in _texts(calls[-1])  # the first user message is kept
            assert events and "PREVIOUS_ROUND_CONVERSATION_SUMMARY" in " ".join(events), events
            # The offload instruction is in the system prompt (as AgentScope-Java's hook adds it).
            assert last[0]["role"] == "system" and "call the context_reload tool" in json.dumps(last[0], ensure_ascii=False)
            assert "[SHARED:发布] 周五发布" in json.dumps(last[0], ensure_ascii=False)
            # The agent's context is the server's working history: the summary is one message.
            assert first["sizes"][-1] < first["sizes"][-2] + 2 and len(first["uuids"]) == 1, first
            uuid = first["uuids"][0]

            # A new process loads the saved state and goes on: the model gets the compressed
            # context, calls context_reload with the marker's uuid and reads the planted fact.
            llm.push(ScriptedReply.tool_call("context_reload", {"working_context_offload_uuid": uuid}),
                     ScriptedReply.text("E12345678"), ScriptedReply.text("你好！"), ScriptedReply.text("记得。"))
            seen = len(_agent_calls(llm))
            second = await _run("second", server.address, llm)
            calls = _agent_calls(llm)[seen:]
            assert second["loaded"] == first["texts"]
            assert MARKER.search(_texts(calls[0]))
            tool_results = [m for m in calls[1]["messages"] if m.get("role") == "tool"]
            assert any("我的护照号码是E12345678" in json.dumps(m, ensure_ascii=False) for m in tool_results), tool_results
            assert second["reply"] == "E12345678"
            # Nothing of the history was sent again: the server received the new user message,
            # the tool call, its result and the answer (and the last agent's two messages below).
            assert await _originals(client, memory_id) == originals + 4 + 2
            # The other session has its own memory, holding none of the first one's.
            other = second["other_memory_id"]
            assert (memory_id, other) == ("agentscope2/Friday/会话-1", "agentscope2/Friday/会话-2")
            assert "E12345678" not in _texts(calls[-2]) and "你好，我是新的会话。" in _texts(calls[-2])
            assert "杭州" not in _texts(calls[-2])
            assert second["other_texts"] == ["你好，我是新的会话。", "你好！"]
            # A save from a stale load is refused, naming the slot, and the newer state stays.
            name, message, current, loaded = second["stale"]
            assert name == "AgentStateConflictError" and "会话-1" in message and "小明" in message
            assert current == loaded + 1 and second["after_stale"]
            assert second["big_round_trip"]
            # An agent with an empty state of that session continues the server's conversation,
            # its messages whole (the metadata the application gave them, their ids).
            assert MARKER.search(_texts(calls[-1])) and "杭州天气怎么样？" in _texts(calls[-1])
            assert second["fresh_texts"] == second["texts"] + ["还记得我们聊过什么吗？", "记得。"]
            assert second["fresh_first"] == [{"来源": "第1轮"}, True]


async def test_agentscope2_agent_compressed_in_the_middle_of_a_reply(server_factory) -> None:
    """2.x keeps a whole reply (its tool calls and results) in one message: the server offloads
    one result of it while the reply goes on, and the agent's message keeps its other blocks,
    its id (so the reply's next blocks join it) and a result for every call."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    with ScriptedLLM(default=ScriptedReply.text("完成。")) as llm:
        llm.push(ScriptedReply.tool_call("fetch_report", {"name": "季度"}), ScriptedReply.tool_call("lookup", {"city": "北京"}))
        result = await _run("tools", server.address, llm)
        calls = _agent_calls(llm)
    assert len(calls) == 3
    results = {m["tool_call_id"]: m["content"] for m in calls[2]["messages"] if m.get("role") == "tool"}
    assert set(results) == {"call_1_0", "call_2_0"}, calls[2]["messages"]
    # The long result was in the second request whole, and is an offload stub in the third.
    assert "R-42" in _texts(calls[1]) and "R-42" not in _texts(calls[2])
    assert MARKER.search(json.dumps(results["call_1_0"], ensure_ascii=False))
    assert "北京：晴，二十五度。" in json.dumps(results["call_2_0"], ensure_ascii=False)
    assert result["reply"] == "完成。" and result["reply_id"] == [True, True]
    assert result["blocks"] == ["tool_call", "tool_result", "tool_call", "tool_result", "text"], result
    assert [state for _, state in result["calls"]] == ["finished", "finished"]
    assert [offloaded for _, offloaded, _ in result["results"]] == [True, False] and result["results"][0][2] < 600
    assert result["sent_again"] == 0


async def test_agentscope2_two_processes_of_one_saved_state_send_its_unsent_answer_once(server_factory,
                                                                                         tmp_path: Path) -> None:
    """Two processes load one saved state whose last answer the memory lacks and go on with the
    session at once: the answer is stored once (the second process's batch, the same answer and
    its own question, is refused under the first's request id, and it sends only its question),
    no process's context holds a message twice, and the second save is a conflict saying what
    to do."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with ScriptedLLM(default=ScriptedReply.text("第一个回答")) as llm:
        setup = await _run("twice-setup", server.address, llm)
        llm.default = ScriptedReply.text("好的。")
        both = await asyncio.gather(*(_run("twice", server.address, llm, QUESTION=q, BARRIER=str(barrier)) for q in ("甲的问题", "乙的问题")))
    async with AsyncMemoryClient(server.address, api_key=KEY) as client:
        stored = [m.text_content for m in await client.get_messages(setup["memory_id"])]
    assert stored.count("第一个问题") == 1 and sum(t.endswith("第一个回答") for t in stored) == 1, stored
    assert stored.count("甲的问题") == 1 and stored.count("乙的问题") == 1, stored
    for result in both:
        assert len(result["ids"]) == len(set(result["ids"])), result["ids"]
    saved = sorted((r["saved"] for r in both), key=str)
    assert saved[0] == setup["version"] + 1, saved
    assert "两个进程" in saved[1] and "load it again, then save" in saved[1], saved
    # Doing so loses neither turn: the state loaded again is the other's, and its compression
    # brings this process's turn back from the memory.
    loser = next(r for r in both if "again" in r)
    again, version = loser["again"]
    assert "甲的问题" in again and "乙的问题" in again and again.count("第一个问题") == 1, again
    assert version == setup["version"] + 2


async def test_agentscope2_messages_beyond_the_message_limit_are_sent_and_rebuilt(server_factory) -> None:
    """A 2.7 MB tool result: its piece carries its text once (it carried it twice, in the library
    block and in the 2.x JSON, so was refused as beyond 4 MiB at every compression), and an agent
    with only the memory rebuilds the result whole from it. A 6 MB one is sent cut to 3 MiB,
    saying so (the server stores no message beyond 4 MiB): the agent's own stays whole."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    with ScriptedLLM(default=ScriptedReply.text("好的。")) as llm:
        result = await _run("big", server.address, llm)
    assert result["own"][:2] == [["call_大", True], ["call_更大", True]], result
    assert result["rebuilt"][:2] == [["call_大", True, True, False, False], ["call_更大", False, True, True, True]], result
    # Tool calls' arguments likewise: 2.4 MB sent once (not twice) and rebuilt whole, 4.8 MB cut.
    assert result["calls"] == [True, True, True, True, True], result
    assert result["texts"] == ["查一下", "lookup"] and result["stderr"] == "", result


async def test_agentscope2_memory_deleted_by_another_client_is_made_again_from_the_context(server_factory) -> None:
    """The process remembered it had made the memory, so every later step failed NOT_FOUND (the
    agent uncompressed for the rest of the process); now it is made again, holding the context."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    with ScriptedLLM(default=ScriptedReply.text("好的。")) as llm:
        result = await _run("deleted", server.address, llm)
    assert result["texts"] == ["删除之前", "好的。", "删除之后", "好的。"], result
    assert result["stored"][0] == "删除之前" and result["stored"][2] == "删除之后", result
    assert len(result["stored"]) == 4 and result["stderr"] == "", result


async def test_agentscope2_long_conversation_goes_in_batches_and_comes_back_in_pages(server_factory) -> None:
    """1500 messages are more than one AddMessages call takes (the adapter sends 500 at a time)
    and than one PrepareReasoningInput page holds (1000): the context comes back whole, the
    agent's own objects, in order."""
    server = await server_factory(api_keys={KEY: "python-tenant"})
    with ScriptedLLM(default=ScriptedReply.text("收到。")) as llm:
        result = await _run("many", server.address, llm)
        calls = _agent_calls(llm)
    assert result == {"same_objects": True, "size": 1502, "last": ["最后一条", "收到。"], "stderr": ""}
    assert len(calls[0]["messages"]) > 1501 and "第0条" in _texts(calls[0])


async def test_agentscope2_agent_without_a_server_keeps_working_uncompressed() -> None:
    from conftest import free_port

    with ScriptedLLM(default=ScriptedReply.text("我很好。")) as llm:
        result = await _run("down", f"127.0.0.1:{free_port()}", llm)
    assert result["reply"] == "我很好。"
    assert result["texts"] == ["服务器不在，你好吗？", "我很好。"]
    assert "compressing agent 'Friday'" in result["stderr"] and "left as it was" in result["stderr"]
    assert result["strict"] == "UnavailableError"


async def test_agentscope2_memory_id_offload_instruction_and_send_after_reply_options(server_factory) -> None:
    with ScriptedLLM(default=ScriptedReply.text("好的。")) as llm:
        server = await server_factory(api_keys={KEY: "python-tenant"}, llm_base_url=llm.base_url, llm_max_retries=0)
        llm.push(ScriptedReply.text("第一个回答"), ScriptedReply.text("第二个回答"))
        result = await _run("options", server.address, llm)
        calls = _agent_calls(llm)
        async with AsyncMemoryClient(server.address, api_key=KEY) as client:
            named = [m.text_content for m in await client.get_messages("自定义/Friday")]
            fixed = [m.text_content for m in await client.get_messages("固定的记忆")]
    assert (result["named"], result["fixed"]) == ("自定义/Friday", "固定的记忆")
    # send_after_reply=False: the reply's answer waits for the next compression; by default it
    # is sent when the reply ends.
    assert named == ["第一个问题"]
    assert len(fixed) == 2 and fixed[0] == "第二个问题" and fixed[1].endswith("第二个回答")  # after the agent's hints
    # offload_instruction=False leaves AgentScope-Java's offload instruction out of the prompt.
    assert "call the context_reload tool" not in json.dumps(calls[0]["messages"][0], ensure_ascii=False)
    assert "call the context_reload tool" in json.dumps(calls[1]["messages"][0], ensure_ascii=False)
