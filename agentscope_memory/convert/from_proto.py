"""Wire -> library: every conversion from protobuf messages to library types, in one place.

Used by the server (requests) and the Python clients (responses) alike; `to_proto` is the other
direction. Reading validates everything a client could get wrong and names the offending field
(`messages[2].content[0].tool_use.input_json: is not valid JSON`).
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from typing import Any

from google.protobuf.unknown_fields import UnknownFieldSet

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory.convert import enums
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.long_term.engine import HistoryEntry, LongTermItem, Scope
from agentscope_memory.long_term.hybrid.ranking import MAX_TOP_K, RankOptions
from agentscope_memory.long_term.tools import ToolSchema
from agentscope_memory.long_term.modes import Mode
from agentscope_memory.message import (
    AudioBlock,
    Base64Source,
    ContentBlock,
    ImageBlock,
    MessageError,
    Msg,
    MsgRole,
    Source,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLSource,
    VideoBlock,
)
from agentscope_memory.session.state import StateEntry
from agentscope_memory.validation.json_text import MAX_STATE_DEPTH, parse_json, parse_json_object
from agentscope_memory.validation.text import MAX_NAME_BYTES, MAX_PLAN_SUBTASKS, MAX_PLAN_TEXT_BYTES, check_text
from agentscope_memory.store.base import LongTermFilter
from agentscope_memory.short_term.auto_context.config import AutoContextConfig, PromptConfig
from agentscope_memory.short_term.auto_context.engine import PlanNote, PlanSubtask
from agentscope_memory.short_term.description import MemoryDescription


# ---------------------------------------------------------------------------------------------
# Messages


def float32_shortest(value: float) -> float:
    # A proto `float` arrives widened to double; recover the shortest decimal that maps to the
    # same float32, which is what Java's Float.toString prints.
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        try:
            if struct.pack("<f", candidate) == packed:
                return candidate
        except OverflowError:  # rounded past the float32 range; try more digits
            continue
    return value


def _source_from_proto(source: pb.Source, field: str) -> Source:
    kind = source.WhichOneof("source")
    if kind == "url":
        if not source.url.url:
            raise MessageError(f"{field}.url.url", "is required")
        return URLSource(source.url.url)
    if kind == "base64":
        if not source.base64.media_type:
            raise MessageError(f"{field}.base64.media_type", "is required")
        data = source.base64.data
        if not data:
            raise MessageError(f"{field}.base64.data", "is required")
        # Whether the data is valid base64 is a write rule (validation.messages), not a
        # conversion one: a client reading a stored message never rejects it.
        return Base64Source(source.base64.media_type, data)
    raise MessageError(field, "has no kind: set url or base64")


# The metadata key under which a reading client keeps the number of a role a newer server has
# (the message itself is read as USER). Java: `MsgConverter.UNKNOWN_ROLE_KEY`.
UNKNOWN_ROLE_KEY = "agentscope_memory_unknown_role"


class _NewerKind(Exception):
    """A block (or its media source) of a kind a newer server has: a reading client leaves it out."""


def _newer_kind(message: Any, what: str) -> bool:
    """Whether the block or source `message` holds only fields this version does not know (a
    kind a newer server added; warned once per kind). False when it holds nothing at all, which
    is an error however new the server."""
    unknown = sorted({f.field_number for f in UnknownFieldSet(message)})
    if not unknown:
        return False
    warnings.warn(f"{what} of a kind this client does not know (field {unknown[0]}) was left out of what it "
                  "read: the server is newer; upgrade agentscope-memory to see it", RuntimeWarning, stacklevel=4)
    return True


def _media_source(source: pb.Source, field: str, newer_kinds: bool) -> Source:
    if newer_kinds and source.WhichOneof("source") is None and _newer_kind(source, "a media source"):
        raise _NewerKind(field)
    return _source_from_proto(source, field)


def block_from_proto(block: pb.ContentBlock, field: str, newer_kinds: bool = False) -> ContentBlock:
    """The library's block. A client reading what a server stored passes `newer_kinds`: a block
    of a kind a newer server has (or a media block whose source is) raises `_NewerKind`, which
    `msg_from_proto` answers by leaving the block out; the server, reading a request, refuses it."""
    kind = block.WhichOneof("block")
    if kind == "text":
        return TextBlock(block.text.text)
    if kind == "thinking":
        thinking = block.thinking
        metadata = (
            parse_json_object(thinking.metadata_json, f"{field}.thinking.metadata_json")
            if thinking.HasField("metadata_json")
            else None
        )
        return ThinkingBlock(thinking.thinking, metadata)
    if kind == "tool_use":
        tool_use = block.tool_use
        return ToolUseBlock(
            id=tool_use.id if tool_use.HasField("id") else None,
            name=tool_use.name if tool_use.HasField("name") else None,
            input=parse_json_object(tool_use.input_json, f"{field}.tool_use.input_json"),
            content=tool_use.content if tool_use.HasField("content") else None,
            metadata=parse_json_object(tool_use.metadata_json, f"{field}.tool_use.metadata_json"),
        )
    if kind == "tool_result":
        result = block.tool_result
        metadata = parse_json_object(result.metadata_json, f"{field}.tool_result.metadata_json")
        for key, value in metadata.items():
            if value is None:
                raise MessageError(
                    f"{field}.tool_result.metadata_json", f"value of {key!r} must not be null"
                )
        return ToolResultBlock(
            id=result.id if result.HasField("id") else None,
            name=result.name if result.HasField("name") else None,
            output=_blocks(result.output, f"{field}.tool_result.output", newer_kinds),
            metadata=metadata,
        )
    if kind == "image":
        image = block.image
        if not image.HasField("source"):
            raise MessageError(f"{field}.image.source", "is required")
        return ImageBlock(
            _media_source(image.source, f"{field}.image.source", newer_kinds),
            image.min_pixels if image.HasField("min_pixels") else None,
            image.max_pixels if image.HasField("max_pixels") else None,
        )
    if kind == "audio":
        if not block.audio.HasField("source"):
            raise MessageError(f"{field}.audio.source", "is required")
        return AudioBlock(_media_source(block.audio.source, f"{field}.audio.source", newer_kinds))
    if kind == "video":
        video = block.video
        return VideoBlock(
            _media_source(video.source, f"{field}.video.source", newer_kinds)
            if video.HasField("source")
            else None,
            float32_shortest(video.fps) if video.HasField("fps") else None,
            video.max_frames if video.HasField("max_frames") else None,
            video.min_pixels if video.HasField("min_pixels") else None,
            video.max_pixels if video.HasField("max_pixels") else None,
            video.total_pixels if video.HasField("total_pixels") else None,
        )
    if newer_kinds and _newer_kind(block, "a content block"):
        raise _NewerKind(field)
    raise MessageError(
        field, "has no type: set one of text, thinking, tool_use, tool_result, image, audio, video"
    )


def _blocks(blocks: Any, field: str, newer_kinds: bool) -> list[ContentBlock]:
    out: list[ContentBlock] = []
    for i, b in enumerate(blocks):
        try:
            out.append(block_from_proto(b, f"{field}[{i}]", newer_kinds))
        except _NewerKind:
            continue
    return out


def msg_from_proto(msg: pb.Msg, field: str = "message", newer_kinds: bool = False) -> Msg:
    """The library's message. `newer_kinds`: a client reading what a server stored; blocks of a
    kind a newer server has are left out (with a warning), as the Java client does, instead of
    failing the whole read of a conversation that other, newer agents share."""
    role = enums.ROLE_FROM_PB.get(msg.role, ...)
    metadata = parse_json_object(msg.metadata_json, f"{field}.metadata_json")
    if role is ... and newer_kinds:
        # A role a newer server has: the message is kept, as USER (AgentScope's default role,
        # which every formatter handles), with the number in the metadata for a reader that
        # knows it; the Java client does the same.
        warnings.warn(f"{field}: a role this client does not know ({msg.role}) was read as USER, its number kept in "
                      f"metadata[{UNKNOWN_ROLE_KEY!r}]: the server is newer; upgrade agentscope-memory to see it",
                      RuntimeWarning, stacklevel=3)
        role, metadata = MsgRole.USER, {**metadata, UNKNOWN_ROLE_KEY: msg.role}
    if role is ...:
        raise MessageError(
            f"{field}.role", f"unknown role {msg.role} (ROLE_USER, ROLE_ASSISTANT, ROLE_SYSTEM, ROLE_TOOL)"
        )
    return Msg(
        id=msg.id if msg.HasField("id") else None,
        name=msg.name if msg.HasField("name") else None,
        role=role,
        content=_blocks(msg.content, f"{field}.content", newer_kinds),
        metadata={k: v for k, v in metadata.items() if v is not None},
        timestamp=msg.timestamp if msg.HasField("timestamp") else None,
    )


def msgs_from_proto(msgs: Any, field: str = "messages", newer_kinds: bool = False) -> list[Msg]:
    return [msg_from_proto(m, f"{field}[{i}]", newer_kinds) for i, m in enumerate(msgs)]



# ---------------------------------------------------------------------------------------------
# Session state entries


def entry_from_proto(entry: state_pb.StateEntry, index: int) -> StateEntry:
    field = f"entries[{index}]"
    if not entry.key:
        raise MessageError(f"{field}.key", "is required")
    kind = entry.WhichOneof("value")
    if kind == "list":
        items = [parse_json(t, f"{field}.list.items[{i}]", MAX_STATE_DEPTH) for i, t in enumerate(entry.list.items)]
        return StateEntry(entry.key, items=items)
    if kind == "json":
        return StateEntry(entry.key, value=parse_json(entry.json, f"{field}.json", MAX_STATE_DEPTH))
    raise MessageError(field, f"state {entry.key!r} has no value: set json or list")


# ---------------------------------------------------------------------------------------------
# Short-term memories


def kind_from_proto(value: int, field: str = "kind") -> str:
    kind = enums.KIND_FROM_PB.get(value)
    if kind is None:
        raise InvalidArgumentError(field, "must be MEMORY_KIND_IN_MEMORY, MEMORY_KIND_AUTO_CONTEXT or MEMORY_KIND_TIERED")
    return kind


def auto_context_config_from_proto(
    config: mem_pb.AutoContextConfig, field: str = "auto_context_config"
) -> AutoContextConfig:
    """A validated config; fields left unset take Java's defaults."""
    if config.profile not in enums.PROFILE_FROM_PB:
        raise InvalidArgumentError(f"{field}.profile", f"unknown profile {config.profile}")
    if config.token_counter not in enums.COUNTER_FROM_PB:
        raise InvalidArgumentError(f"{field}.token_counter", f"unknown token counter {config.token_counter}")
    numbers = {name: getattr(config, name) for name in enums.AUTO_CONTEXT_NUMBERS if config.HasField(name)}
    prompts = {name: getattr(config.custom_prompt, name) or None for name in enums.AUTO_CONTEXT_PROMPTS}
    return AutoContextConfig(
        custom_prompt=PromptConfig(**prompts),
        profile=enums.PROFILE_FROM_PB[config.profile],
        token_counter=enums.COUNTER_FROM_PB[config.token_counter],
        **numbers,
    ).validate()


def memory_from_proto(memory: mem_pb.Memory) -> MemoryDescription:
    from agentscope_memory.convert.tiered import tiered_config_from_proto

    return MemoryDescription(
        memory_id=memory.memory_id,
        kind=enums.KIND_FROM_PB.get(memory.kind, "UNSPECIFIED"),
        message_count=memory.message_count,
        version=memory.version,
        labels=dict(memory.labels),
        create_time=memory.create_time.ToNanoseconds() / 1e9,
        update_time=memory.update_time.ToNanoseconds() / 1e9,
        auto_context_config=(
            auto_context_config_from_proto(memory.auto_context_config)
            if memory.HasField("auto_context_config")
            else None
        ),
        tiered_config=tiered_config_from_proto(memory.tiered_config) if memory.HasField("tiered_config") else None,
    )


def plan_from_proto(plan: mem_pb.PlanNote) -> PlanNote:
    # Fields the plan hint does not read are still bounded, so no field is unlimited.
    check_text(plan.name, "plan.name", MAX_NAME_BYTES)
    check_text(plan.state, "plan.state", MAX_NAME_BYTES)
    for i, subtask in enumerate(plan.subtasks[:MAX_PLAN_SUBTASKS]):
        check_text(subtask.description, f"plan.subtasks[{i}].description", MAX_PLAN_TEXT_BYTES)
        check_text(subtask.expected_outcome, f"plan.subtasks[{i}].expected_outcome", MAX_PLAN_TEXT_BYTES)
    return PlanNote(
        plan.description, plan.expected_outcome, [PlanSubtask(s.name, s.state or "todo") for s in plan.subtasks]
    )


# ---------------------------------------------------------------------------------------------
# Long-term memory


def scope_from_proto(scope: ltm_pb.Scope, field: str = "scope") -> Scope:
    return Scope(scope.agent_name, scope.user_id, scope.run_name).validate(field)


_RANKINGS = {
    ltm_pb.LONG_TERM_RANKING_SHIPPED: "shipped",
    ltm_pb.LONG_TERM_RANKING_SEMANTIC: "semantic",
    ltm_pb.LONG_TERM_RANKING_DENSE: "dense",
    ltm_pb.LONG_TERM_RANKING_LEXICAL: "lexical",
    ltm_pb.LONG_TERM_RANKING_RRF: "rrf",
    ltm_pb.LONG_TERM_RANKING_SEED: "seed",
}


def search_options_from_proto(request: ltm_pb.SearchLongTermMemoriesRequest, defaults: RankOptions) -> RankOptions:
    """The ranking options of a search request: its fields over the server's defaults, validated
    (a bad field is INVALID_ARGUMENT naming it)."""
    if request.ranking and request.ranking not in _RANKINGS:
        raise InvalidArgumentError("ranking", f"unknown value {request.ranking}")
    for name in ("top_k", "top_k_semantic"):
        if getattr(request, name) < 0:
            raise InvalidArgumentError(name, "must not be negative")
    for name in ("created_after", "created_before"):
        value = getattr(request, name)
        if not math.isfinite(value) or value < 0:
            raise InvalidArgumentError(name, "must be a time in seconds since the epoch (0 for no bound)")
    metadata = parse_json_object(request.metadata_filter_json, "metadata_filter_json")
    where = LongTermFilter(
        memory_types=tuple(request.memory_types), domains=tuple(request.domains),
        created_after=request.created_after or None, created_before=request.created_before or None,
        metadata=metadata,
    )
    optional = {name: getattr(request, name) for name in ("alpha", "beta", "gamma", "delta", "decay_rate", "dense_weight")
                if request.HasField(name)}
    # Unset, the candidates are at least top_k: the legs' default would cut a larger top_k to it.
    # (A top_k over the limit is refused under its own name.)
    top_k_semantic = request.top_k_semantic or max(defaults.top_k_semantic, min(request.top_k, MAX_TOP_K))
    return defaults.with_overrides(
        top_k=request.top_k or None, top_k_semantic=top_k_semantic,
        ranking=_RANKINGS.get(request.ranking), where=where, **optional,
    )


def mode_from_proto(value: int, field: str = "mode") -> Mode:
    mode = enums.MODE_FROM_PB.get(value)
    if mode is None:
        raise InvalidArgumentError(field, "must be AGENT_CONTROL, STATIC_CONTROL or BOTH")
    return mode


def long_term_item_from_proto(item: ltm_pb.LongTermMemoryItem) -> LongTermItem:
    return LongTermItem(
        id=item.id,
        text=item.memory,
        scope=Scope(item.scope.agent_name, item.scope.user_id, item.scope.run_name),
        metadata=parse_json_object(item.metadata_json, "metadata_json"),
        score=item.score if item.HasField("score") else None,
        created_at=item.created_at,
        updated_at=item.updated_at,
        memory_type=item.memory_type or "message",
        domain=item.domain,
        importance=item.importance,
        importance_method=item.importance_method,
        last_accessed_at=item.last_accessed_at,
        access_count=item.access_count,
        source=parse_json_object(item.source_json, "source_json"),
        # Parent/child scopes (visibility.proto: 2 SHARED, 3 GLOBAL, else LOCAL).
        visibility={2: "SHARED", 3: "GLOBAL"}.get(item.visibility, "LOCAL"),
        inherited=item.inherited,
        pinned=item.pinned,
    )


def tool_schema_from_proto(tool: ltm_pb.ToolSchema) -> ToolSchema:
    return ToolSchema(tool.name, tool.description, json.loads(tool.parameters_json_schema or "{}"))


def long_term_history_from_proto(entry: ltm_pb.LongTermHistoryEntry) -> HistoryEntry:
    return HistoryEntry(
        memory_id=entry.memory_id,
        event=entry.event,
        old_text=entry.old_text if entry.HasField("old_text") else None,
        new_text=entry.new_text if entry.HasField("new_text") else None,
        created_at=entry.created_at,
        updated_at=entry.created_at,
        detail=parse_json_object(entry.detail_json, "detail_json") if entry.detail_json else {},
    )


def long_term_result_from_proto(result: ltm_pb.LongTermSearchResult) -> LongTermItem:
    """A ranked search result: the memory with every component of its score in `scores`."""
    from agentscope_memory.long_term.hybrid.ranking import Scores

    item = long_term_item_from_proto(result.memory)
    s = result.scores
    item.scores = Scores(semantic=s.semantic, dense=s.dense, lexical=s.lexical, decay=s.decay,
                         importance=s.importance, frequency=s.frequency, final=s.final)
    return item
