"""The bad-input corpus: hostile requests for every RPC of every service, each with the status
and the field its answer must name. Used by test_bad_input_grpc_corpus.py (over sqlite and
PostgreSQL) and by the raw-bytes fuzz test.

Requests are built as protos and sent serialized, so undecodable byte strings travel the same
way. Every case runs against one fixed data set (`SEED` below) that no case may change.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2 as lpb,
)
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as mpb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as spb

INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
MEMORY = "agentscope.memory.v1.MemoryService"
LONG_TERM = "agentscope.memory.v1.LongTermMemoryService"
STATE = "agentscope.memory.v1.StateService"
STREAMING = {"WatchCompressionEvents"}

# The seed data every case runs against (ids in Chinese, with spaces and dots on purpose).
IN_MEMORY_ID = "对话 1.json"
AUTO_CONTEXT_ID = "自动/上下文 ..ac"
SESSION_ID = "会话 s1"
SCOPE = lpb.Scope(agent_name="助手", user_id="用户-1")
STATIC = lpb.LONG_TERM_MEMORY_MODE_STATIC_CONTROL
# An enum number the contract does not define (typed Any: the stubs only admit known values).
UNKNOWN_ENUM: Any = 77


@dataclass(frozen=True)
class Case:
    name: str
    service: str
    method: str
    request: bytes
    code: grpc.StatusCode
    field: str

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.method}"


def text_msg(text: str = "好的 fine", role: Any = mpb.ROLE_USER, **fields: Any) -> mpb.Msg:
    return mpb.Msg(role=role, content=[mpb.ContentBlock(text=mpb.TextBlock(text=text))], **fields)


# Identifiers no RPC accepts: empty, blank, control characters (NUL included) and over 256 bytes.
BAD_IDS: list[tuple[str, str]] = [
    ("empty", ""),
    ("blank", "   "),
    ("nul", "a\x00b"),
    ("only-nul", "\x00"),
    ("tab", "tab\tid"),
    ("newline", "line\nbreak"),
    ("c0", "x\x1fy"),
    ("del", "del\x7f"),
    ("c1", "c1\x85"),
    ("257-ascii", "x" * 257),
    ("258-bytes-chinese", "会" * 86),
    ("emoji-over", "😀" * 65),
]

# JSON no `*_json` field accepts, with a word the reason must contain.
DEEP_CLOSED = '{"a":' + "[" * 300 + "]" * 300 + "}"
DEEP_OPEN = '{"a":' + "[" * 5000
BAD_JSON: list[tuple[str, str]] = [
    ("deep-closed", DEEP_CLOSED),
    ("deep-open", DEEP_OPEN),
    ("deep-objects", '{"a":' + '{"b":' * 400 + "1" + "}" * 400 + "}"),
    ("lone-high-surrogate", '{"a":"\\ud800"}'),
    ("lone-low-surrogate", '{"a":"x\\udc00"}'),
    ("surrogate-key", '{"\\ud800":1}'),
    ("inf", '{"a":1e999}'),
    ("minus-inf", '{"a":-1e999}'),
    ("nan-token", '{"a":NaN}'),
    ("infinity-token", '{"a":Infinity}'),
    ("long-number", '{"a":' + "9" * 1001 + "}"),
    ("not-json", "{not json"),
    ("truncated", '{"a":'),
    ("array", "[1,2]"),
    ("string", '"text"'),
]


def _ser(message: object) -> bytes:
    return message.SerializeToString()  # type: ignore[attr-defined]


def _with_metadata(where: str, text: str) -> tuple[mpb.Msg, str]:
    """A message carrying `text` in the JSON field `where`, and that field's path in the message."""
    if where == "metadata_json":
        return text_msg(metadata_json=text), "metadata_json"
    if where == "thinking":
        block = mpb.ContentBlock(thinking=mpb.ThinkingBlock(thinking="嗯", metadata_json=text))
        return mpb.Msg(role=mpb.ROLE_ASSISTANT, content=[block]), "content[0].thinking.metadata_json"
    if where == "tool_use.input":
        block = mpb.ContentBlock(tool_use=mpb.ToolUseBlock(id="c1", name="f", input_json=text))
        return mpb.Msg(role=mpb.ROLE_ASSISTANT, content=[block]), "content[0].tool_use.input_json"
    if where == "tool_use.metadata":
        block = mpb.ContentBlock(tool_use=mpb.ToolUseBlock(id="c1", name="f", input_json="{}", metadata_json=text))
        return mpb.Msg(role=mpb.ROLE_ASSISTANT, content=[block]), "content[0].tool_use.metadata_json"
    block = mpb.ContentBlock(tool_result=mpb.ToolResultBlock(id="c1", name="f", metadata_json=text))
    return mpb.Msg(role=mpb.ROLE_TOOL, content=[block]), "content[0].tool_result.metadata_json"


JSON_PLACES = ["metadata_json", "thinking", "tool_use.input", "tool_use.metadata", "tool_result.metadata"]


def _memory_id_requests(memory_id: str) -> list[tuple[str, str, Any, str]]:
    """(service, method, request, field) for every RPC that takes a memory id."""
    ok = [text_msg()]
    entry = spb.StateEntry(key="memory_messages", list=spb.JsonList(items=[]))
    return [
        (MEMORY, "CreateMemory", pb.CreateMemoryRequest(memory_id=memory_id, kind=pb.MEMORY_KIND_IN_MEMORY), "memory_id"),
        (MEMORY, "GetMemory", pb.GetMemoryRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "DeleteMemory", pb.DeleteMemoryRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "AddMessages", pb.AddMessagesRequest(memory_id=memory_id, messages=ok), "memory_id"),
        (MEMORY, "GetMessages", pb.GetMessagesRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "DeleteMessage", pb.DeleteMessageRequest(memory_id=memory_id, index=0), "memory_id"),
        (MEMORY, "ClearMessages", pb.ClearMessagesRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "DeleteMessages", pb.DeleteMessagesRequest(memory_id=memory_id, message_ids=["m"]), "memory_id"),
        (MEMORY, "UpdateMessageMarks", pb.UpdateMessageMarksRequest(memory_id=memory_id, all_messages=True,
                                                                    new_mark="重要"), "memory_id"),
        (MEMORY, "CompressIfNeeded", pb.CompressIfNeededRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "PrepareReasoningInput", pb.PrepareReasoningInputRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "GetOriginalMessages", pb.GetOriginalMessagesRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "GetInteractionMessages", pb.GetInteractionMessagesRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "ReloadContext", pb.ReloadContextRequest(memory_id=memory_id, working_context_offload_uuid="u"), "memory_id"),
        (MEMORY, "ListCompressionEvents", pb.ListCompressionEventsRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "WatchCompressionEvents", pb.WatchCompressionEventsRequest(memory_id=memory_id), "memory_id"),
        (MEMORY, "AttachPlanNote", pb.AttachPlanNoteRequest(memory_id=memory_id), "memory_id"),
        (LONG_TERM, "BeginTurn", lpb.BeginTurnRequest(memory_id=memory_id, scope=SCOPE, mode=STATIC, input=ok), "memory_id"),
        (LONG_TERM, "EndTurn", lpb.EndTurnRequest(memory_id=memory_id, scope=SCOPE, mode=STATIC), "memory_id"),
        (STATE, "SaveState", spb.SaveStateRequest(memory_id=memory_id), "memory_id"),
        (STATE, "LoadState", spb.LoadStateRequest(memory_id=memory_id, entries=[entry]), "memory_id"),
        (STATE, "ImportSession", spb.ImportSessionRequest(session_id=SESSION_ID, memory_id=memory_id), "memory_id"),
        (STATE, "ExportSession", spb.ExportSessionRequest(session_id=SESSION_ID, memory_ids=[memory_id]), "memory_ids[0]"),
    ]


def _scope_requests(scope: lpb.Scope) -> list[tuple[str, Any]]:
    ok = [text_msg()]
    return [
        ("Record", lpb.RecordRequest(scope=scope, messages=ok)),
        ("Retrieve", lpb.RetrieveRequest(scope=scope, message=text_msg())),
        ("RecordToMemory", lpb.RecordToMemoryRequest(scope=scope, thinking="t", content=["c"])),
        ("RetrieveFromMemory", lpb.RetrieveFromMemoryRequest(scope=scope, keywords=["k"])),
        ("ListLongTermMemories", lpb.ListLongTermMemoriesRequest(scope=scope)),
        ("DeleteScope", lpb.DeleteScopeRequest(scope=scope)),
        ("BeginTurn", lpb.BeginTurnRequest(memory_id=IN_MEMORY_ID, scope=scope, mode=STATIC, input=ok)),
        ("EndTurn", lpb.EndTurnRequest(memory_id=IN_MEMORY_ID, scope=scope, mode=STATIC)),
    ]


def _message_carriers(msg: mpb.Msg) -> list[tuple[str, str, Any, str]]:
    """Every RPC that carries a client message, with the prefix its field path gets."""
    system = mpb.Msg()
    system.CopyFrom(msg)
    system.role = mpb.ROLE_SYSTEM
    return [
        (MEMORY, "AddMessages", pb.AddMessagesRequest(memory_id=IN_MEMORY_ID, messages=[text_msg(), msg]), "messages[1]."),
        (LONG_TERM, "Record", lpb.RecordRequest(scope=SCOPE, messages=[msg]), "messages[0]."),
        (LONG_TERM, "Retrieve", lpb.RetrieveRequest(scope=SCOPE, message=msg), "message."),
        (LONG_TERM, "BeginTurn", lpb.BeginTurnRequest(memory_id=IN_MEMORY_ID, scope=SCOPE, mode=STATIC, input=[msg]), "input[0]."),
        (MEMORY, "PrepareReasoningInput",
         pb.PrepareReasoningInputRequest(memory_id=AUTO_CONTEXT_ID, system_message=system), "system_message."),
    ]


def _state_json_cases() -> list[Case]:
    """JSON state through LoadState, for both kinds of memory: the same rules as AddMessages."""
    cases: list[Case] = []
    for name, text in BAD_JSON:
        if name in ("array", "string"):
            continue  # valid JSON values; a state item may be any JSON
        item = spb.LoadStateRequest(
            memory_id=IN_MEMORY_ID, entries=[spb.StateEntry(key="memory_messages", list=spb.JsonList(items=[text]))])
        cases.append(Case(f"load-state-item-{name}", STATE, "LoadState", _ser(item), INVALID, "entries[0].list.items[0]"))
        single = spb.LoadStateRequest(
            memory_id=AUTO_CONTEXT_ID, entries=[spb.StateEntry(key="autoContextMemory_offloadContext", json=text)])
        cases.append(Case(f"load-state-json-{name}", STATE, "LoadState", _ser(single), INVALID, "entries[0].json"))
        # The bad JSON inside a message's metadata, as AgentScope's JSON of a message.
        inner = '{"role":"USER","content":[{"type":"text","text":"x"}],"metadata":' + text + "}"
        nested = spb.LoadStateRequest(
            memory_id=IN_MEMORY_ID, entries=[spb.StateEntry(key="memory_messages", list=spb.JsonList(items=[inner]))])
        cases.append(Case(f"load-state-msg-metadata-{name}", STATE, "LoadState", _ser(nested), INVALID, "entries[0].list.items[0]"))
    return cases


def _msg_json(msg: dict) -> str:
    return json.dumps(msg, ensure_ascii=False)


def _write_rule_cases() -> list[Case]:
    """One write validation: what AddMessages refuses, LoadState refuses too (issue 20 item 3)."""
    cases: list[Case] = []
    bad_image = {"role": "USER", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "not base64!!"}}]}
    deep: dict = {"type": "text", "text": "x"}
    for _ in range(40):
        deep = {"type": "tool_result", "id": "c", "name": "f", "output": [deep]}
    deep_msg = {"role": "TOOL", "content": [deep]}
    long_name = {"role": "USER", "name": "名" * 400, "content": [{"type": "text", "text": "x"}]}
    for label, msg, code, field in [
        ("bad-base64", bad_image, INVALID, "memory_messages[0].content[0].image.source.base64.data"),
        ("tool-result-depth-40", deep_msg, INVALID, "memory_messages[0].content[0]"),
        ("name-over-1kib", long_name, EXHAUSTED, "memory_messages[0].name"),
    ]:
        request = spb.LoadStateRequest(memory_id=IN_MEMORY_ID, entries=[
            spb.StateEntry(key="memory_messages", list=spb.JsonList(items=[_msg_json(msg)]))])
        cases.append(Case(f"load-state-{label}", STATE, "LoadState", _ser(request), code, field))
        ac = spb.LoadStateRequest(memory_id=AUTO_CONTEXT_ID, entries=[
            spb.StateEntry(key="autoContextMemory_workingMessages", list=spb.JsonList(items=[_msg_json(msg)]))])
        cases.append(Case(f"load-state-ac-{label}", STATE, "LoadState", _ser(ac), code,
                          field.replace("memory_messages", "autoContextMemory_workingMessages")))
        offload = spb.LoadStateRequest(memory_id=AUTO_CONTEXT_ID, entries=[spb.StateEntry(
            key="autoContextMemory_offloadContext", json=json.dumps({"offloadContext": {"u-1": [msg]}}))])
        cases.append(Case(f"load-state-offload-{label}", STATE, "LoadState", _ser(offload), code,
                          "autoContextMemory_offloadContext.offloadContext.u-1"))
    image = mpb.ContentBlock(image=mpb.ImageBlock(source=mpb.Source(
        base64=mpb.Base64Source(media_type="image/png", data="not base64!!"))))
    for service, method, request, prefix in _message_carriers(mpb.Msg(role=mpb.ROLE_USER, content=[image])):
        if method == "PrepareReasoningInput":
            continue  # a system message carries no image here; covered by the other carriers
        cases.append(Case(f"bad-base64-{method}", service, method, _ser(request), INVALID,
                          prefix + "content[0].image.source.base64.data"))
    # Nesting through proto: 40 levels of tool results stay under protobuf's own limit.
    block = mpb.ContentBlock(text=mpb.TextBlock(text="x"))
    for _ in range(40):
        block = mpb.ContentBlock(tool_result=mpb.ToolResultBlock(id="c", name="f", output=[block]))
    for service, method, request, prefix in _message_carriers(mpb.Msg(role=mpb.ROLE_TOOL, content=[block])):
        if method == "PrepareReasoningInput":
            continue
        cases.append(Case(f"tool-result-depth-40-{method}", service, method, _ser(request), INVALID, prefix + "content[0]"))
    for service, method, request, prefix in _message_carriers(text_msg(name="名" * 400)):
        cases.append(Case(f"name-over-1kib-{method}", service, method, _ser(request), EXHAUSTED, prefix + "name"))
    for label, fields in (("id", {"id": "a\x00b"}), ("name", {"name": "\x00"})):
        for service, method, request, prefix in _message_carriers(text_msg(**fields)):
            cases.append(Case(f"{label}-nul-{method}", service, method, _ser(request), INVALID, prefix + label))
            if method == "AddMessages":
                request.memory_id = AUTO_CONTEXT_ID
                cases.append(Case(f"{label}-nul-{method}-auto-context", service, method, _ser(request), INVALID,
                                  prefix + label))
    tool_nul = mpb.Msg(role=mpb.ROLE_ASSISTANT, content=[mpb.ContentBlock(tool_use=mpb.ToolUseBlock(id="c\x00", name="f"))])
    for service, method, request, prefix in _message_carriers(tool_nul):
        if method != "PrepareReasoningInput":
            cases.append(Case(f"tool-id-nul-{method}", service, method, _ser(request), INVALID, prefix + "content[0].tool_use.id"))
    for service, method, request, prefix in _message_carriers(text_msg(id="i" * 1025)):
        cases.append(Case(f"id-over-1kib-{method}", service, method, _ser(request), EXHAUSTED, prefix + "id"))
    tool = mpb.Msg(role=mpb.ROLE_ASSISTANT, content=[mpb.ContentBlock(tool_use=mpb.ToolUseBlock(id="c", name="名" * 400))])
    for service, method, request, prefix in _message_carriers(tool):
        if method == "PrepareReasoningInput":
            continue
        cases.append(Case(f"tool-name-over-1kib-{method}", service, method, _ser(request), EXHAUSTED,
                          prefix + "content[0].tool_use.name"))
    for service, method, request, prefix in _message_carriers(text_msg(role=42)):
        if method == "PrepareReasoningInput":
            continue  # the carrier sets the SYSTEM role itself
        cases.append(Case(f"unknown-role-{method}", service, method, _ser(request), INVALID, prefix + "role"))
    no_type = mpb.Msg(role=mpb.ROLE_USER, content=[mpb.ContentBlock()])
    for service, method, request, prefix in _message_carriers(no_type):
        cases.append(Case(f"block-no-type-{method}", service, method, _ser(request), INVALID, prefix + "content[0]"))
    return cases


def _limit_cases() -> list[Case]:
    big = 64 * 1024 + 1
    cases: list[Case] = []
    for prompt in ("previous_round_tool_compress_prompt", "previous_round_summary_prompt",
                   "current_round_large_message_prompt", "current_round_compress_prompt"):
        config = pb.AutoContextConfig(custom_prompt=pb.PromptConfig(**{prompt: "提" * (big // 3 + 1)}))
        request = pb.CreateMemoryRequest(memory_id="新的", kind=pb.MEMORY_KIND_AUTO_CONTEXT, auto_context_config=config)
        cases.append(Case(f"custom-prompt-{prompt}", MEMORY, "CreateMemory", _ser(request), EXHAUSTED,
                          f"auto_context_config.custom_prompt.{prompt}"))
    plan_cases = [
        ("description", pb.PlanNote(description="d" * big), "plan.description"),
        ("expected-outcome", pb.PlanNote(expected_outcome="e" * big), "plan.expected_outcome"),
        ("subtasks", pb.PlanNote(subtasks=[pb.PlanSubtask(name="s")] * 1001), "plan.subtasks"),
        ("subtask-name", pb.PlanNote(subtasks=[pb.PlanSubtask(name="n" * 1025)]), "plan.subtasks[0].name"),
        ("subtask-state", pb.PlanNote(subtasks=[pb.PlanSubtask(name="n", state="s" * 1025)]), "plan.subtasks[0].state"),
        ("name", pb.PlanNote(name="n" * 1025), "plan.name"),
        ("state", pb.PlanNote(state="s" * 1025), "plan.state"),
        ("subtask-description", pb.PlanNote(subtasks=[pb.PlanSubtask(name="n", description="d" * big)]),
         "plan.subtasks[0].description"),
        ("subtask-expected-outcome", pb.PlanNote(subtasks=[pb.PlanSubtask(name="n", expected_outcome="e" * big)]),
         "plan.subtasks[0].expected_outcome"),
    ]
    for label, plan, field in plan_cases:
        request = pb.AttachPlanNoteRequest(memory_id=AUTO_CONTEXT_ID, plan=plan)
        cases.append(Case(f"plan-{label}", MEMORY, "AttachPlanNote", _ser(request), EXHAUSTED, field))
    cases.append(Case("system-prompt-over-1mib", MEMORY, "PrepareReasoningInput", _ser(pb.PrepareReasoningInputRequest(
        memory_id=AUTO_CONTEXT_ID, system_prompt="s" * (1024 * 1024 + 1))), EXHAUSTED, "system_prompt"))
    lt = [
        ("thinking", lpb.RecordToMemoryRequest(scope=SCOPE, thinking="t" * big, content=["c"]), EXHAUSTED, "thinking"),
        ("content-item", lpb.RecordToMemoryRequest(scope=SCOPE, thinking="t", content=["c" * big]), EXHAUSTED, "content[0]"),
        ("content-count", lpb.RecordToMemoryRequest(scope=SCOPE, thinking="t", content=["c"] * 1001), EXHAUSTED, "content"),
        ("content-nul", lpb.RecordToMemoryRequest(scope=SCOPE, thinking="t", content=["a\x00b"]), INVALID, "content[0]"),
        ("thinking-nul", lpb.RecordToMemoryRequest(scope=SCOPE, thinking="a\x00", content=["c"]), INVALID, "thinking"),
    ]
    for label, request, code, field in lt:
        cases.append(Case(f"record-to-memory-{label}", LONG_TERM, "RecordToMemory", _ser(request), code, field))
    kw = [
        ("keyword-long", lpb.RetrieveFromMemoryRequest(scope=SCOPE, keywords=["k" * 1025]), EXHAUSTED, "keywords[0]"),
        ("keyword-count", lpb.RetrieveFromMemoryRequest(scope=SCOPE, keywords=["k"] * 101), EXHAUSTED, "keywords"),
        ("keyword-nul", lpb.RetrieveFromMemoryRequest(scope=SCOPE, keywords=["a\x00"]), INVALID, "keywords[0]"),
    ]
    for label, request, code, field in kw:
        cases.append(Case(f"retrieve-from-memory-{label}", LONG_TERM, "RetrieveFromMemory", _ser(request), code, field))
    record_meta = lpb.RecordRequest(scope=SCOPE, messages=[text_msg()], metadata_json=json.dumps({"a": "x" * big}))
    cases.append(Case("record-metadata-over-64kib", LONG_TERM, "Record", _ser(record_meta), EXHAUSTED, "metadata_json"))
    for label, meta in (("value", {"k": "a\x00"}), ("key", {"k\x00": 1}), ("nested", {"k": ["\x00"]})):
        request = lpb.RecordRequest(scope=SCOPE, messages=[text_msg()], metadata_json=json.dumps(meta))
        cases.append(Case(f"record-metadata-nul-{label}", LONG_TERM, "Record", _ser(request), INVALID, "metadata_json"))
    record_nul = lpb.RecordRequest(scope=SCOPE, messages=[text_msg("a\x00b")])
    cases.append(Case("record-text-nul", LONG_TERM, "Record", _ser(record_nul), INVALID, "messages[0].content"))
    for name, text in BAD_JSON:
        request = lpb.RecordRequest(scope=SCOPE, messages=[text_msg()], metadata_json=text)
        cases.append(Case(f"record-metadata-{name}", LONG_TERM, "Record", _ser(request), INVALID, "metadata_json"))
    labels = [
        ("key-empty", {"": "v"}, "labels"),
        ("key-nul", {"k\x00": "v"}, "labels"),
        ("key-64-bytes", {"键" * 22: "v"}, "labels"),
        ("value-nul", {"k": "v\x00"}, "labels"),
        ("value-control", {"k": "v\x1b[31m"}, "labels"),
        ("value-257-bytes", {"k": "值" * 86}, "labels"),
        ("too-many", {f"k{i}": "v" for i in range(65)}, "labels"),
    ]
    for label, values, field in labels:
        request = pb.CreateMemoryRequest(memory_id="新的", kind=pb.MEMORY_KIND_IN_MEMORY, labels=values)
        cases.append(Case(f"labels-{label}", MEMORY, "CreateMemory", _ser(request), INVALID, field))
    return cases


def _other_cases() -> list[Case]:
    cases: list[Case] = []

    def add(name: str, service: str, method: str, request: Any, code: grpc.StatusCode, field: str) -> None:
        cases.append(Case(name, service, method, _ser(request), code, field))

    add("kind-unspecified", MEMORY, "CreateMemory", pb.CreateMemoryRequest(memory_id="新的"), INVALID, "kind")
    add("kind-unknown", MEMORY, "CreateMemory", pb.CreateMemoryRequest(memory_id="新的", kind=UNKNOWN_ENUM), INVALID, "kind")
    add("profile-unknown", MEMORY, "CreateMemory", pb.CreateMemoryRequest(
        memory_id="新的", kind=pb.MEMORY_KIND_AUTO_CONTEXT, auto_context_config=pb.AutoContextConfig(profile=UNKNOWN_ENUM)),
        INVALID, "auto_context_config.profile")
    add("token-ratio-zero", MEMORY, "CreateMemory", pb.CreateMemoryRequest(
        memory_id="新的", kind=pb.MEMORY_KIND_AUTO_CONTEXT, auto_context_config=pb.AutoContextConfig(token_ratio=0)),
        INVALID, "auto_context_config.token_ratio")
    add("token-ratio-nan", MEMORY, "CreateMemory", pb.CreateMemoryRequest(
        memory_id="新的", kind=pb.MEMORY_KIND_AUTO_CONTEXT, auto_context_config=pb.AutoContextConfig(token_ratio=float("nan"))),
        INVALID, "auto_context_config.token_ratio")
    add("msg-threshold-negative", MEMORY, "CreateMemory", pb.CreateMemoryRequest(
        memory_id="新的", kind=pb.MEMORY_KIND_AUTO_CONTEXT, auto_context_config=pb.AutoContextConfig(msg_threshold=-1)),
        INVALID, "auto_context_config.msg_threshold")
    add("exists", MEMORY, "CreateMemory", pb.CreateMemoryRequest(memory_id=IN_MEMORY_ID, kind=pb.MEMORY_KIND_IN_MEMORY),
        grpc.StatusCode.ALREADY_EXISTS, IN_MEMORY_ID)
    add("no-messages", MEMORY, "AddMessages", pb.AddMessagesRequest(memory_id=IN_MEMORY_ID), INVALID, "messages")
    add("request-id-space", MEMORY, "AddMessages", pb.AddMessagesRequest(
        memory_id=IN_MEMORY_ID, messages=[text_msg()], request_id="has space"), INVALID, "request_id")
    add("request-id-chinese", MEMORY, "AddMessages", pb.AddMessagesRequest(
        memory_id=IN_MEMORY_ID, messages=[text_msg()], request_id="请求"), INVALID, "request_id")
    add("request-id-long", MEMORY, "AddMessages", pb.AddMessagesRequest(
        memory_id=IN_MEMORY_ID, messages=[text_msg()], request_id="r" * 129), INVALID, "request_id")
    add("too-many-messages", MEMORY, "AddMessages", pb.AddMessagesRequest(
        memory_id=IN_MEMORY_ID, messages=[text_msg()] * 1001), EXHAUSTED, "messages")
    add("url-empty", MEMORY, "AddMessages", pb.AddMessagesRequest(memory_id=IN_MEMORY_ID, messages=[mpb.Msg(
        role=mpb.ROLE_USER, content=[mpb.ContentBlock(image=mpb.ImageBlock(source=mpb.Source(url=mpb.UrlSource())))])]),
        INVALID, "messages[0].content[0].image.source.url.url")
    add("audio-no-source", MEMORY, "AddMessages", pb.AddMessagesRequest(memory_id=IN_MEMORY_ID, messages=[mpb.Msg(
        role=mpb.ROLE_USER, content=[mpb.ContentBlock(audio=mpb.AudioBlock())])]), INVALID, "messages[0].content[0].audio.source")
    add("media-type-empty", MEMORY, "AddMessages", pb.AddMessagesRequest(memory_id=IN_MEMORY_ID, messages=[mpb.Msg(
        role=mpb.ROLE_USER, content=[mpb.ContentBlock(image=mpb.ImageBlock(source=mpb.Source(
            base64=mpb.Base64Source(data="aGk="))))])]), INVALID, "messages[0].content[0].image.source.base64.media_type")
    add("delete-index-negative", MEMORY, "DeleteMessage", pb.DeleteMessageRequest(memory_id=IN_MEMORY_ID, index=-1),
        INVALID, "index")
    # Deletes and mark changes by id (AgentScope-Python's delete, delete_by_mark, update_messages_mark).
    deletes, marks = pb.DeleteMessagesRequest, pb.UpdateMessageMarksRequest
    add("delete-ids-empty", MEMORY, "DeleteMessages", deletes(memory_id=IN_MEMORY_ID), INVALID, "message_ids")
    add("delete-ids-and-marks", MEMORY, "DeleteMessages", deletes(memory_id=IN_MEMORY_ID, message_ids=["甲"], marks=["乙"]),
        INVALID, "marks")
    add("delete-ids-too-many", MEMORY, "DeleteMessages", deletes(memory_id=IN_MEMORY_ID, message_ids=["甲"] * 1001),
        EXHAUSTED, "message_ids")
    add("delete-id-empty", MEMORY, "DeleteMessages", deletes(memory_id=IN_MEMORY_ID, message_ids=["甲", ""]),
        INVALID, "message_ids[1]")
    add("delete-id-unknown", MEMORY, "DeleteMessages", deletes(memory_id=IN_MEMORY_ID, message_ids=["没有这条"]),
        grpc.StatusCode.NOT_FOUND, "message_ids[0]")
    add("delete-mark-huge", MEMORY, "DeleteMessages", deletes(memory_id=IN_MEMORY_ID, marks=["标" * 400]),
        EXHAUSTED, "marks[0]")
    add("delete-marks-too-many", MEMORY, "DeleteMessages", deletes(memory_id=IN_MEMORY_ID, marks=["标"] * 1001),
        EXHAUSTED, "marks")
    add("delete-not-in-memory", MEMORY, "DeleteMessages", deletes(memory_id=AUTO_CONTEXT_ID, marks=["标"]),
        grpc.StatusCode.FAILED_PRECONDITION, "IN_MEMORY")
    add("marks-no-selection", MEMORY, "UpdateMessageMarks", marks(memory_id=IN_MEMORY_ID, new_mark="标"),
        INVALID, "message_ids")
    add("marks-ids-and-all", MEMORY, "UpdateMessageMarks", marks(
        memory_id=IN_MEMORY_ID, message_ids=["甲"], all_messages=True, new_mark="标"), INVALID, "message_ids")
    add("marks-neither-mark", MEMORY, "UpdateMessageMarks", marks(memory_id=IN_MEMORY_ID, all_messages=True),
        INVALID, "new_mark")
    add("marks-new-huge", MEMORY, "UpdateMessageMarks", marks(memory_id=IN_MEMORY_ID, all_messages=True,
                                                              new_mark="标" * 400), EXHAUSTED, "new_mark")
    add("marks-old-huge", MEMORY, "UpdateMessageMarks", marks(memory_id=IN_MEMORY_ID, all_messages=True,
                                                              old_mark="x" * 1025), EXHAUSTED, "old_mark")
    add("marks-ids-too-many", MEMORY, "UpdateMessageMarks", marks(memory_id=IN_MEMORY_ID, message_ids=["甲"] * 1001,
                                                                  new_mark="标"), EXHAUSTED, "message_ids")
    add("marks-id-unknown", MEMORY, "UpdateMessageMarks", marks(memory_id=IN_MEMORY_ID, message_ids=["没有这条"],
                                                                new_mark="标"), grpc.StatusCode.NOT_FOUND, "message_ids[0]")
    add("marks-not-in-memory", MEMORY, "UpdateMessageMarks", marks(memory_id=AUTO_CONTEXT_ID, all_messages=True,
                                                                   new_mark="标"), grpc.StatusCode.FAILED_PRECONDITION,
        "IN_MEMORY")
    for method, request in [
        ("ListMemories", pb.ListMemoriesRequest(page_size=-1)),
        ("GetMessages", pb.GetMessagesRequest(memory_id=IN_MEMORY_ID, page_size=-1)),
        ("GetOriginalMessages", pb.GetOriginalMessagesRequest(memory_id=AUTO_CONTEXT_ID, page_size=-1)),
    ]:
        add(f"page-size-negative-{method}", MEMORY, method, request, INVALID, "page_size")
    tokens = [
        ("garbage", "!!!not a token"),
        ("nul", "\x00"),
        ("base64-json-nul", base64.urlsafe_b64encode(json.dumps(["messages", IN_MEMORY_ID, "\x00"]).encode()).decode()),
        ("huge-position", base64.urlsafe_b64encode(json.dumps(["messages", IN_MEMORY_ID, "9" * 40]).encode()).decode()),
        ("arabic-digits", base64.urlsafe_b64encode(json.dumps(["messages", IN_MEMORY_ID, "١٢"]).encode()).decode()),
        ("deep-json", base64.urlsafe_b64encode(("[" * 5000).encode()).decode()),
        ("other-memory", base64.urlsafe_b64encode(json.dumps(["messages", AUTO_CONTEXT_ID, "1"]).encode()).decode()),
        ("long", "A" * 5000),
    ]
    for label, token in tokens:
        add(f"page-token-{label}-GetMessages", MEMORY, "GetMessages",
            pb.GetMessagesRequest(memory_id=IN_MEMORY_ID, page_token=token), INVALID, "page_token")
        add(f"page-token-{label}-GetOriginalMessages", MEMORY, "GetOriginalMessages",
            pb.GetOriginalMessagesRequest(memory_id=AUTO_CONTEXT_ID, page_token=token), INVALID, "page_token")
        if label not in ("huge-position", "arabic-digits", "other-memory"):
            add(f"page-token-{label}-ListMemories", MEMORY, "ListMemories",
                pb.ListMemoriesRequest(page_token=token), INVALID, "page_token")
    list_token_nul = base64.urlsafe_b64encode(json.dumps(["memories", "default", "a\x00"]).encode()).decode()
    add("page-token-list-nul-position", MEMORY, "ListMemories", pb.ListMemoriesRequest(page_token=list_token_nul),
        INVALID, "page_token")
    # A forged or foreign `if_none_match` is no error: like HTTP's If-None-Match it simply does not
    # match, and the page is sent (tests/test_paging_grpc_tokens.py).
    add("if-none-match-with-token", MEMORY, "GetMessages", pb.GetMessagesRequest(
        memory_id=IN_MEMORY_ID, if_none_match="x", page_token="y"), INVALID, "if_none_match")
    for uuid_label, uuid in [("nul", "u\x00"), ("control", "u\x01"), ("long", "u" * 300)]:
        add(f"reload-uuid-{uuid_label}", MEMORY, "ReloadContext", pb.ReloadContextRequest(
            memory_id=AUTO_CONTEXT_ID, working_context_offload_uuid=uuid), INVALID, "working_context_offload_uuid")
        offload = spb.LoadStateRequest(memory_id=AUTO_CONTEXT_ID, entries=[spb.StateEntry(
            key="autoContextMemory_offloadContext", json=json.dumps({"offloadContext": {uuid: []}}))])
        add(f"load-state-offload-uuid-{uuid_label}", STATE, "LoadState", offload, INVALID, "autoContextMemory_offloadContext")
    for method in ("CompressIfNeeded", "PrepareReasoningInput", "GetOriginalMessages", "GetInteractionMessages",
                   "ListCompressionEvents", "AttachPlanNote"):
        request = getattr(pb, f"{method}Request")(memory_id=IN_MEMORY_ID)
        add(f"wrong-kind-{method}", MEMORY, method, request, grpc.StatusCode.FAILED_PRECONDITION, IN_MEMORY_ID)
    add("system-message-not-system", MEMORY, "PrepareReasoningInput", pb.PrepareReasoningInputRequest(
        memory_id=AUTO_CONTEXT_ID, system_message=text_msg()), INVALID, "system_message.role")
    add("system-both", MEMORY, "PrepareReasoningInput", pb.PrepareReasoningInputRequest(
        memory_id=AUTO_CONTEXT_ID, system_prompt="p", system_message=text_msg(role=mpb.ROLE_SYSTEM)), INVALID, "system_message")
    add("events-negative", MEMORY, "ListCompressionEvents", pb.ListCompressionEventsRequest(
        memory_id=AUTO_CONTEXT_ID, after_sequence=-1), INVALID, "after_sequence")
    for label, entries, field in [
        ("unknown-key", [spb.StateEntry(key="nope", json="{}")], "nope"),
        ("empty-key", [spb.StateEntry(key="", json="{}")], "entries[0].key"),
        ("no-value", [spb.StateEntry(key="memory_messages")], "entries[0]"),
        ("single-not-list", [spb.StateEntry(key="memory_messages", json="[]")], "memory_messages"),
        ("twice", [spb.StateEntry(key="memory_messages", list=spb.JsonList())] * 2, "memory_messages"),
        ("item-not-object", [spb.StateEntry(key="memory_messages", list=spb.JsonList(items=["1"]))], "memory_messages[0]"),
        ("unknown-role", [spb.StateEntry(key="memory_messages", list=spb.JsonList(items=['{"role":"user"}']))],
         "memory_messages[0].role"),
    ]:
        add(f"load-state-{label}", STATE, "LoadState", spb.LoadStateRequest(memory_id=IN_MEMORY_ID, entries=entries),
            INVALID, field)
    for label, event in (("timestamp-text", {"eventType": "x", "timestamp": "soon"}),
                         ("count-list", {"eventType": "x", "compressedMessageCount": [1]}),
                         ("not-object", 5)):
        request = spb.LoadStateRequest(memory_id=AUTO_CONTEXT_ID, entries=[spb.StateEntry(
            key="autoContextMemory_compressionEvents", list=spb.JsonList(items=[json.dumps(event)]))])
        add(f"load-state-event-{label}", STATE, "LoadState", request, INVALID, "autoContextMemory_compressionEvents[0]")
    add("load-state-stale-version", STATE, "LoadState", spb.LoadStateRequest(
        memory_id=IN_MEMORY_ID, entries=[spb.StateEntry(key="memory_messages", list=spb.JsonList())], expected_version=999),
        grpc.StatusCode.ABORTED, "999")
    add("import-missing-session", STATE, "ImportSession", spb.ImportSessionRequest(
        session_id="没有这个会话", memory_id=IN_MEMORY_ID), grpc.StatusCode.NOT_FOUND, "没有这个会话")
    add("export-too-many", STATE, "ExportSession", spb.ExportSessionRequest(
        session_id=SESSION_ID, memory_ids=[IN_MEMORY_ID] * 101), EXHAUSTED, "memory_ids")
    add("export-unlabelled", STATE, "ExportSession", spb.ExportSessionRequest(session_id="无标签"),
        grpc.StatusCode.NOT_FOUND, "无标签")
    add("retrieve-limit-negative", LONG_TERM, "Retrieve", lpb.RetrieveRequest(scope=SCOPE, message=text_msg(), limit=-1),
        INVALID, "limit")
    add("list-page-size", LONG_TERM, "ListLongTermMemories", lpb.ListLongTermMemoriesRequest(scope=SCOPE, page_size=-5),
        INVALID, "page_size")
    add("begin-turn-mode", LONG_TERM, "BeginTurn", lpb.BeginTurnRequest(memory_id=IN_MEMORY_ID, scope=SCOPE),
        INVALID, "mode")
    add("end-turn-mode", LONG_TERM, "EndTurn", lpb.EndTurnRequest(memory_id=IN_MEMORY_ID, scope=SCOPE, mode=UNKNOWN_ENUM),
        INVALID, "mode")
    add("begin-turn-missing-memory", LONG_TERM, "BeginTurn", lpb.BeginTurnRequest(
        memory_id="不存在", scope=SCOPE, mode=STATIC, input=[text_msg()]), grpc.StatusCode.NOT_FOUND, "不存在")
    for label, lt_id in BAD_IDS:
        add(f"get-long-term-{label}", LONG_TERM, "GetLongTermMemory", lpb.GetLongTermMemoryRequest(id=lt_id), INVALID, "id")
        add(f"delete-long-term-{label}", LONG_TERM, "DeleteLongTermMemory", lpb.DeleteLongTermMemoryRequest(id=lt_id),
            INVALID, "id")
    add("get-long-term-missing", LONG_TERM, "GetLongTermMemory", lpb.GetLongTermMemoryRequest(id="不存在"),
        grpc.StatusCode.NOT_FOUND, "不存在")
    for method in ("GetMemory", "DeleteMemory", "GetMessages", "ClearMessages"):
        add(f"missing-memory-{method}", MEMORY, method, getattr(pb, f"{method}Request")(memory_id="不存在的记忆"),
            grpc.StatusCode.NOT_FOUND, "不存在的记忆")
    return cases


# Raw bytes no request message decodes from.
UNDECODABLE: list[tuple[str, bytes]] = [
    ("invalid-utf8-field-1", b"\x0a\x02\xff\xfe"),
    ("overlong-utf8", b"\x0a\x02\xc0\xaf"),
    ("garbage", b"\xff\xff\xff\xff\xff"),
    ("truncated-length", b"\x0a\x10abc"),
    ("truncated-varint", b"\x08\x80"),
    ("bad-wire-type", b"\x0f"),
    ("field-zero", b"\x00\x01"),
]


def _deep_tool_result(levels: int) -> bytes:
    block = mpb.ContentBlock(text=mpb.TextBlock(text="x"))
    # Built as bytes: the Python protobuf runtime refuses to build this deep a message itself.
    data = block.SerializeToString()
    for _ in range(levels):
        result = b"\x1a" + _varint(len(data)) + data  # ToolResultBlock.output (field 3)
        data = b"\x22" + _varint(len(result)) + result  # ContentBlock.tool_result (field 4)
    return data


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _undecodable_cases() -> list[Case]:
    cases: list[Case] = []
    for service_name, module in ((MEMORY, pb), (LONG_TERM, lpb), (STATE, spb)):
        service = module.DESCRIPTOR.services_by_name[service_name.rsplit(".", 1)[1]]
        for method in service.methods:
            strings = [f.number for f in method.input_type.fields if f.type == f.TYPE_STRING]
            for label, data in UNDECODABLE:
                if label in ("invalid-utf8-field-1", "overlong-utf8"):
                    if not strings:
                        continue  # no string field to carry invalid UTF-8
                    data = _varint(strings[0] << 3 | 2) + data[1:]
                cases.append(Case(f"undecodable-{label}-{method.name}", service_name, method.name, data, INVALID, "request"))
    deep_block = _deep_tool_result(200)
    msg = b"\x18\x01" + b"\x22" + _varint(len(deep_block)) + deep_block  # Msg{role=USER, content=[deep]}
    for service, method, field_tag in [
        (MEMORY, "AddMessages", b"\x12"), (LONG_TERM, "Record", b"\x12"), (LONG_TERM, "BeginTurn", b"\x22"),
    ]:
        data = field_tag + _varint(len(msg)) + msg
        cases.append(Case(f"undecodable-nested-200-{method}", service, method, data, INVALID, "request"))
    return cases


def corpus() -> list[Case]:
    cases: list[Case] = []
    for label, bad in BAD_IDS:
        for service, method, request, field in _memory_id_requests(bad):
            cases.append(Case(f"memory-id-{label}-{method}", service, method, _ser(request), INVALID, field))
    for label, bad in BAD_IDS:
        for attr in ("agent_name", "user_id", "run_name"):
            scope = lpb.Scope(user_id="用户-1")
            setattr(scope, attr, bad)
            if label == "empty":
                continue  # an empty part is allowed when another is set
            for method, request in _scope_requests(scope):
                cases.append(Case(f"scope-{attr}-{label}-{method}", LONG_TERM, method, _ser(request), INVALID, f"scope.{attr}"))
    for method, request in _scope_requests(lpb.Scope()):
        cases.append(Case(f"scope-empty-{method}", LONG_TERM, method, _ser(request), INVALID, "scope"))
    for label, bad in BAD_IDS + [("too-long-encoded", "会" * 64)]:
        export = spb.ExportSessionRequest(session_id=bad, memory_ids=[IN_MEMORY_ID])
        cases.append(Case(f"session-id-{label}-ExportSession", STATE, "ExportSession", _ser(export), INVALID, "session_id"))
        import_ = spb.ImportSessionRequest(session_id=bad, memory_id=IN_MEMORY_ID)
        cases.append(Case(f"session-id-{label}-ImportSession", STATE, "ImportSession", _ser(import_), INVALID, "session_id"))
    for place in JSON_PLACES:
        for label, text in BAD_JSON:
            msg, suffix = _with_metadata(place, text)
            for service, method, request, prefix in _message_carriers(msg):
                if method == "PrepareReasoningInput" and place != "metadata_json":
                    continue  # a system message holds text and metadata only
                cases.append(Case(f"json-{place}-{label}-{method}", service, method, _ser(request), INVALID, prefix + suffix))
    cases += _state_json_cases()
    cases += _write_rule_cases()
    cases += _limit_cases()
    cases += _other_cases()
    cases += _undecodable_cases()
    names = [c.name for c in cases]
    assert len(names) == len(set(names)), "case names must be unique"
    return cases


def _seeds() -> dict[str, list[bytes]]:
    """Per method, requests to mutate when fuzzing: the corpus's own, near-valid ones."""
    seeds: dict[str, list[bytes]] = {}
    for case in corpus():
        if len(case.request) <= 4096:
            seeds.setdefault(case.method, []).append(case.request)
    return seeds


CORPUS_SEEDS = _seeds()
