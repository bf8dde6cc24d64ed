"""AUTO_CONTEXT memories through gRPC: Java's behaviour end to end, with a scripted LLM."""

from __future__ import annotations

import dataclasses

import asyncio
import json

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.message import MsgRole
from agentscope_memory.convert.from_proto import msg_from_proto
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from auto_context_helpers import A, TR, TU, U
from scripted_llm import ScriptedLLM, ScriptedReply

D3_CONFIG = AutoContextConfig(msg_threshold=10, last_keep=5, min_consecutive_tool_messages=3,
                                 min_compression_token_threshold=0)


def d3_messages():
    msgs = [U("User query")]
    for i in range(5):
        msgs += [TU("test_tool", f"call_{i}"), TR("test_tool", f"call_{i}", f"Result {i}")]
    return msgs + [A("Assistant response")] + [U(f"Message {i}") for i in range(10)]


@pytest.fixture
def llm():
    stub = ScriptedLLM(default=ScriptedReply.text("SUMMARY"))
    yield stub
    stub.close()


@pytest.fixture
async def setup(server_factory, llm):
    async def make(config=D3_CONFIG, memory_id="ac", **settings):
        settings.setdefault("llm_base_url", llm.base_url)
        settings.setdefault("llm_max_retries", 0)
        server = await server_factory(**settings)
        client = AsyncMemoryClient(server.address)
        channel = grpc.aio.insecure_channel(server.address)
        await client.create_memory(memory_id, "AUTO_CONTEXT", auto_context_config=config)
        return server, client, pb_grpc.MemoryServiceStub(channel), channel

    opened = []

    async def factory(*args, **kwargs):
        result = await make(*args, **kwargs)
        opened.append(result)
        return result

    yield factory
    for _, client, _, channel in opened:
        await client.close()
        await channel.close()


async def test_config_is_validated_and_reported(setup) -> None:
    server, client, stub, _ = await setup()
    got = (await stub.GetMemory(pb.GetMemoryRequest(memory_id="ac"))).memory
    assert got.kind == pb.MEMORY_KIND_AUTO_CONTEXT
    assert (got.auto_context_config.msg_threshold, got.auto_context_config.max_token) == (10, 131072)
    assert got.auto_context_config.token_ratio == 0.75 and got.auto_context_config.large_payload_threshold == 5120
    for config, field in [(AutoContextConfig(token_ratio=1.5), "token_ratio"),
                          (AutoContextConfig(msg_threshold=-1), "msg_threshold"),
                          (AutoContextConfig(current_round_compression_ratio=0), "current_round_compression_ratio"),
                          (AutoContextConfig(last_keep=-3), "last_keep"),
                          (AutoContextConfig(token_counter="cl100k"), "token_counter")]:
        with pytest.raises(InvalidArgumentError) as err:
            await client.create_memory("bad", "AUTO_CONTEXT", auto_context_config=config)
        assert f"auto_context_config.{field}" in str(err.value)


async def test_d3_through_grpc(setup, llm) -> None:
    _, client, stub, _ = await setup()
    msgs = d3_messages()
    await client.add_messages("ac", msgs)
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    assert out.compressed and out.message_count == 13 and out.tokens_after < out.tokens_before
    (event,) = out.events
    assert (event.event_type, event.compressed_message_count, event.sequence) == ("TOOL_INVOCATION_COMPRESS", 10, 1)
    assert event.previous_message_id == msgs[0].id and event.next_message_id == msgs[11].id
    assert json.loads(event.metadata_json) == {"inputToken": 10, "outputToken": 20, "time": pytest.approx(json.loads(event.metadata_json)["time"])}
    working = await client.get_messages("ac")
    assert len(working) == 13 and working[1].text_content.startswith("SUMMARY\n<!-- CONTEXT_OFFLOAD: uuid=")
    uuid = working[1].metadata["_compress_meta"]["offloaduuid"]
    reloaded = await stub.ReloadContext(pb.ReloadContextRequest(memory_id="ac", working_context_offload_uuid=uuid))
    assert reloaded.found and [msg_from_proto(m) for m in reloaded.messages] == msgs[1:11]
    original = await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="ac", page_size=20))
    assert original.total_size == 22 and len(original.messages) == 20 and original.next_page_token
    rest = await stub.GetOriginalMessages(pb.GetOriginalMessagesRequest(memory_id="ac", page_size=20, page_token=original.next_page_token))
    assert len(rest.messages) == 2
    interaction = await stub.GetInteractionMessages(pb.GetInteractionMessagesRequest(memory_id="ac"))
    assert len(interaction.messages) == 12  # 11 user messages and the final answer
    listed = await stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id="ac"))
    assert [e.event_type for e in listed.events] == ["TOOL_INVOCATION_COMPRESS"]
    body = llm.requests[0].body
    assert "expert content compression specialist" in body["messages"][0]["content"]
    assert body["messages"][-1]["content"] == "Above is the message list that needs to be compressed."


async def test_reload_texts_are_javas(setup) -> None:
    _, _, stub, _ = await setup()
    blank = await stub.ReloadContext(pb.ReloadContextRequest(memory_id="ac", working_context_offload_uuid="   "))
    assert not blank.found and msg_from_proto(blank.messages[0]).text_content == "Error: UUID cannot be null or empty."
    missing = await stub.ReloadContext(pb.ReloadContextRequest(memory_id="ac", working_context_offload_uuid="nope"))
    only = msg_from_proto(missing.messages[0])
    assert only.role is MsgRole.USER and only.name is None
    assert only.text_content == "No messages found for UUID: nope, The context may have been cleared or the UUID is invalid."


async def test_below_threshold_nothing_happens(setup, llm) -> None:
    _, client, stub, _ = await setup()
    await client.add_messages("ac", [U(f"m{i}") for i in range(5)])
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    assert not out.compressed and not out.events and out.message_count == 5 and not llm.requests


async def test_fallback_summariser_without_an_llm(setup) -> None:
    _, client, stub, _ = await setup(llm_base_url=None)
    await client.add_messages("ac", d3_messages())
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    assert out.compressed
    summary = (await client.get_messages("ac"))[1]
    assert summary.metadata["agentscope_memory_summarizer"] == "extractive-fallback"
    assert summary.text_content.startswith("[extractive summary] ") and "test_tool" in summary.text_content


@pytest.mark.parametrize(("reply", "code"), [(ScriptedReply.error(500), grpc.StatusCode.UNAVAILABLE),
                                             (ScriptedReply.text(""), grpc.StatusCode.UNAVAILABLE),
                                             (ScriptedReply.text("x").after(2.0), grpc.StatusCode.DEADLINE_EXCEEDED)])
@pytest.mark.parametrize("profile", ["parity", "improved"])
async def test_llm_faults_leave_the_memory_consistent(setup, llm, reply, code, profile) -> None:
    llm.default = reply
    config = dataclasses.replace(D3_CONFIG, profile=profile)
    _, client, stub, _ = await setup(config, llm_timeout_s=0.5)
    msgs = d3_messages()
    await client.add_messages("ac", msgs)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    assert err.value.code() == code and "LLM" in err.value.details()
    assert await client.get_messages("ac") == msgs
    entries, _ = await client.save_state("ac")
    keys = [e.key for e in entries]
    assert "autoContextMemory_compressionEvents" not in keys
    # Java leaves the offload made just before the failing call (Q7); the improved profile does not.
    assert ("autoContextMemory_offloadContext" in keys) is (profile == "parity")


async def test_restart_keeps_everything(setup, tmp_path) -> None:
    data = tmp_path / "restart"
    server, client, stub, _ = await setup(data_dir=data)
    await client.add_messages("ac", d3_messages())
    await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    await stub.AttachPlanNote(pb.AttachPlanNoteRequest(memory_id="ac", plan=pb.PlanNote(description="Ship it")))
    before, _ = await client.save_state("ac")
    await server.stop(0)
    from agentscope_memory_server.app import start_server
    from conftest import make_settings

    restarted = await start_server(make_settings(data))
    try:
        async with AsyncMemoryClient(restarted.address) as again:
            after, _ = await again.save_state("ac")
            assert after == before
            assert [e.key for e in after] == ["autoContextMemory_workingMessages", "autoContextMemory_originalMessages",
                                              "autoContextMemory_offloadContext", "autoContextMemory_compressionEvents"]
    finally:
        await restarted.stop(0)


async def test_concurrent_compressions_do_not_overlap(setup, llm) -> None:
    llm.default = ScriptedReply.text("SUMMARY").after(0.2)
    _, client, stub, _ = await setup()
    await client.add_messages("ac", d3_messages())
    results = await asyncio.gather(*(stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac")) for _ in range(3)))
    events = (await stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id="ac"))).events
    assert sum(len(r.events) for r in results) == len(events)
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    working = await client.get_messages("ac")
    assert len(working) == results[-1].message_count
    # Each call saw the previous one's result: never two summaries of the same tool run.
    assert sum(1 for e in events if e.event_type == "TOOL_INVOCATION_COMPRESS") == 1


async def test_appends_during_a_compression_are_kept(setup, llm) -> None:
    llm.default = ScriptedReply.text("SUMMARY").after(0.5)
    _, client, stub, _ = await setup()
    await client.add_messages("ac", d3_messages())
    compress = asyncio.ensure_future(stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac")))
    await asyncio.sleep(0.2)
    late = U("arrived during compression")
    await client.add_message("ac", late)
    await compress
    working = await client.get_messages("ac")
    assert len(working) == 14 and working[-1] == late


async def test_prepare_reasoning_input_is_the_hooks(setup) -> None:
    _, client, stub, _ = await setup(AutoContextConfig(msg_threshold=100))
    msgs = [U("Message 0"), U("Message 1"), U("Message 2")]
    await client.add_messages("ac", msgs)
    out = await stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id="ac", system_prompt="Base system prompt"))
    got = [msg_from_proto(m) for m in out.messages]
    assert got[0].role is MsgRole.SYSTEM and got[0].text_content.startswith("Base system prompt\n\n")
    assert "context_reload" in got[0].text_content and got[1:] == msgs and not out.compressed
    bare = await stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id="ac"))
    assert msg_from_proto(bare.messages[0]).name == "system" and "context_reload" in msg_from_proto(bare.messages[0]).text_content


async def test_plan_note_reaches_the_summariser(setup, llm) -> None:
    _, client, stub, _ = await setup()
    plan = pb.PlanNote(description="Test Description", expected_outcome="Test Outcome",
                       subtasks=[pb.PlanSubtask(name="Task 1", state="in_progress"), pb.PlanSubtask(name="Task 2", state="todo")])
    await stub.AttachPlanNote(pb.AttachPlanNoteRequest(memory_id="ac", plan=plan))
    await client.add_messages("ac", d3_messages())
    await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    assert llm.requests[0].body["messages"][-1]["content"] == (
        "<plan_aware_hint>\nGoal: Test Description\nCurrent Progress: Task 1\nProgress: 0/2 subtasks completed\n"
        "Expected Outcome: Test Outcome\n\n</plan_aware_hint>")


async def test_session_state_round_trip_with_offloads_and_events(setup) -> None:
    _, client, stub, _ = await setup()
    msgs = d3_messages()
    await client.add_messages("ac", msgs)
    await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    entries, _ = await client.save_state("ac")
    offload = next(e for e in entries if e.key == "autoContextMemory_offloadContext").value
    assert list(offload) == ["offloadContext"] and len(next(iter(offload["offloadContext"].values()))) == 10
    event = next(e for e in entries if e.key == "autoContextMemory_compressionEvents").items[0]
    assert event["eventType"] == "TOOL_INVOCATION_COMPRESS" and "compressInputToken" in event
    await client.create_memory("copy", "AUTO_CONTEXT", auto_context_config=D3_CONFIG)
    await client.load_state("copy", entries)
    assert await client.get_messages("copy") == await client.get_messages("ac")
    assert (await client.save_state("copy"))[0] == entries
    # Loading a session without offloads keeps the memory's own; events are cleared (as Java).
    plain = [e for e in entries if e.key in ("autoContextMemory_workingMessages", "autoContextMemory_originalMessages")]
    await client.load_state("copy", plain)
    keys = [e.key for e in (await client.save_state("copy"))[0]]
    assert "autoContextMemory_offloadContext" in keys and "autoContextMemory_compressionEvents" not in keys
    with pytest.raises(InvalidArgumentError, match="memory_messages"):
        await client.load_state("copy", [e for e in entries] + [type(entries[0])("memory_messages", items=[])])


async def test_watch_streams_new_events(setup) -> None:
    _, client, stub, _ = await setup()
    stream = stub.WatchCompressionEvents(pb.WatchCompressionEventsRequest(memory_id="ac"))
    await client.add_messages("ac", d3_messages())
    await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    first = await asyncio.wait_for(stream.read(), 10)
    assert first.event.event_type == "TOOL_INVOCATION_COMPRESS" and first.event.sequence == 1
    stream.cancel()


async def test_event_sequences_are_never_reused(setup) -> None:
    # A session load replaces the events; the new ones get new sequences, so a watcher resuming
    # after the last sequence it saw misses nothing and sees nothing twice.
    _, client, stub, _ = await setup()
    await client.add_messages("ac", d3_messages())
    await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    entries, _ = await client.save_state("ac")
    [seen] = (await stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id="ac"))).events
    stream = stub.WatchCompressionEvents(pb.WatchCompressionEventsRequest(memory_id="ac", after_sequence=seen.sequence))
    await client.load_state("ac", entries)
    loaded = (await stub.ListCompressionEvents(pb.ListCompressionEventsRequest(memory_id="ac"))).events
    assert [e.sequence for e in loaded] == [seen.sequence + 1]
    replayed = await asyncio.wait_for(stream.read(), 10)
    assert replayed.event.sequence == seen.sequence + 1
    assert replayed.event.event_type == seen.event_type
    stream.cancel()


async def test_auto_context_rpcs_refuse_other_kinds(setup) -> None:
    _, client, stub, _ = await setup()
    await client.create_memory("plain")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="plain"))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not AUTO_CONTEXT" in err.value.details()


async def test_d26_hook_input_rebuild(setup) -> None:
    _, client, stub, _ = await setup(AutoContextConfig(msg_threshold=100))
    await client.add_messages("ac", [U("Message 0"), U("Message 1"), U("Message 2")])
    with_prompt = await stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id="ac", system_prompt="Base system prompt"))
    first = msg_from_proto(with_prompt.messages[0])
    assert first.text_content.startswith("Base system prompt\n\n") and "context_reload" in first.text_content
    assert len(with_prompt.messages) == 4
    without = await stub.PrepareReasoningInput(pb.PrepareReasoningInputRequest(memory_id="ac"))
    assert msg_from_proto(without.messages[0]).name == "system" and len(without.messages) == 4


async def test_d27_context_reload_after_d3(setup) -> None:
    _, client, stub, _ = await setup()
    msgs = d3_messages()
    await client.add_messages("ac", msgs)
    out = await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    uuid = (await client.get_messages("ac"))[1].metadata["_compress_meta"]["offloaduuid"]
    assert out.compressed and len(uuid) == 36
    reloaded = await stub.ReloadContext(pb.ReloadContextRequest(memory_id="ac", working_context_offload_uuid=uuid))
    assert [msg_from_proto(m) for m in reloaded.messages] == msgs[1:11]
    blank = await stub.ReloadContext(pb.ReloadContextRequest(memory_id="ac", working_context_offload_uuid="   "))
    assert msg_from_proto(blank.messages[0]).text_content == "Error: UUID cannot be null or empty."


async def test_d28_session_round_trip_through_a_jsonsession_directory(setup, tmp_path) -> None:
    from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb
    from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2_grpc as sgrpc
    from agentscope_memory.session import JsonSession

    server, client, stub, channel = await setup(data_dir=tmp_path / "data")
    await client.add_messages("ac", d3_messages())
    await stub.CompressIfNeeded(pb.CompressIfNeededRequest(memory_id="ac"))
    state_stub = sgrpc.StateServiceStub(channel)
    exported = await state_stub.ExportSession(spb.ExportSessionRequest(session_id="d28", memory_ids=["ac"]))
    files = sorted(p.name for p in (tmp_path / "data" / "sessions" / "default" / "d28").iterdir())
    assert files == ["autoContextMemory_compressionEvents.hash", "autoContextMemory_compressionEvents.jsonl",
                     "autoContextMemory_offloadContext.json", "autoContextMemory_originalMessages.hash",
                     "autoContextMemory_originalMessages.jsonl", "autoContextMemory_workingMessages.hash",
                     "autoContextMemory_workingMessages.jsonl"]
    session = JsonSession(tmp_path / "data" / "sessions" / "default")
    assert len(session.get_list("d28", "autoContextMemory_workingMessages")) == 13
    assert len(session.get_list("d28", "autoContextMemory_originalMessages")) == 22
    assert list(session.get("d28", "autoContextMemory_offloadContext")) == ["offloadContext"]
    await client.create_memory("fresh", "AUTO_CONTEXT", auto_context_config=D3_CONFIG)
    imported = await state_stub.ImportSession(spb.ImportSessionRequest(session_id="d28", memory_id="fresh"))
    assert list(imported.keys) == ["autoContextMemory_workingMessages", "autoContextMemory_originalMessages",
                                   "autoContextMemory_offloadContext", "autoContextMemory_compressionEvents"]
    assert (await client.save_state("fresh"))[0] == (await client.save_state("ac"))[0]
    assert exported.keys
