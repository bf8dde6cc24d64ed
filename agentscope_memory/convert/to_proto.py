"""Library -> wire: every conversion from library types to protobuf messages, in one place.

Used by the server (responses) and the Python clients (requests) alike; `from_proto` is the
other direction. Free-form maps travel as JSON text written with the Jackson-compatible writer,
so ints, floats and nesting survive unchanged (a `google.protobuf.Struct` would turn every
number into a double).
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from agentscope_memory._proto.agentscope.memory.v1 import long_term_memory_service_pb2 as ltm_pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory._proto.agentscope.memory.v1 import message_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory.convert import enums
from agentscope_memory.long_term.engine import HistoryEntry, LongTermItem, Scope
from agentscope_memory.long_term.tools import ToolSchema
from agentscope_memory.long_term.modes import Mode
from agentscope_memory.message import (
    AudioBlock,
    ContentBlock,
    ImageBlock,
    Msg,
    Source,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLSource,
    VideoBlock,
    to_json_text,
)
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.auto_context.config import AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import CompressionEvent
from agentscope_memory.short_term.description import MemoryDescription


# ---------------------------------------------------------------------------------------------
# Messages


def _json_or_empty(value: dict[str, Any]) -> str:
    return to_json_text(value) if value else ""


def _source_to_proto(source: Source) -> pb.Source:
    if isinstance(source, URLSource):
        return pb.Source(url=pb.UrlSource(url=source.url))
    return pb.Source(base64=pb.Base64Source(media_type=source.media_type, data=source.data))


def block_to_proto(block: ContentBlock) -> pb.ContentBlock:
    if isinstance(block, TextBlock):
        return pb.ContentBlock(text=pb.TextBlock(text=block.text))
    if isinstance(block, ThinkingBlock):
        thinking = pb.ThinkingBlock(thinking=block.thinking)
        if block.metadata is not None:
            thinking.metadata_json = to_json_text(block.metadata)
        return pb.ContentBlock(thinking=thinking)
    if isinstance(block, ToolUseBlock):
        tool_use = pb.ToolUseBlock(
            input_json=_json_or_empty(block.input), metadata_json=_json_or_empty(block.metadata)
        )
        if block.id is not None:
            tool_use.id = block.id
        if block.name is not None:
            tool_use.name = block.name
        if block.content is not None:
            tool_use.content = block.content
        return pb.ContentBlock(tool_use=tool_use)
    if isinstance(block, ToolResultBlock):
        result = pb.ToolResultBlock(
            output=[block_to_proto(b) for b in block.output],
            metadata_json=_json_or_empty(block.metadata),
        )
        if block.id is not None:
            result.id = block.id
        if block.name is not None:
            result.name = block.name
        return pb.ContentBlock(tool_result=result)
    if isinstance(block, ImageBlock):
        image = pb.ImageBlock(source=_source_to_proto(block.source))
        if block.min_pixels is not None:
            image.min_pixels = block.min_pixels
        if block.max_pixels is not None:
            image.max_pixels = block.max_pixels
        return pb.ContentBlock(image=image)
    if isinstance(block, AudioBlock):
        return pb.ContentBlock(audio=pb.AudioBlock(source=_source_to_proto(block.source)))
    if isinstance(block, VideoBlock):
        video = pb.VideoBlock()
        if block.source is not None:
            video.source.CopyFrom(_source_to_proto(block.source))
        for name in ("fps", "max_frames", "min_pixels", "max_pixels", "total_pixels"):
            value = getattr(block, name)
            if value is not None:
                setattr(video, name, value)
        return pb.ContentBlock(video=video)
    raise TypeError(f"not a content block: {type(block).__name__}")


def msg_to_proto(msg: Msg) -> pb.Msg:
    out = pb.Msg(
        role=enums.ROLE_TO_PB[msg.role],
        content=[block_to_proto(b) for b in msg.content],
        metadata_json=_json_or_empty(msg.metadata),
    )
    if msg.id is not None:
        out.id = msg.id
    if msg.name is not None:
        out.name = msg.name
    if msg.timestamp is not None:
        out.timestamp = msg.timestamp
    return out


def msgs_to_proto(msgs: list[Msg]) -> list[pb.Msg]:
    return [msg_to_proto(m) for m in msgs]



# ---------------------------------------------------------------------------------------------
# Session state entries: JSON values travel as JSON text.


def entry_to_proto(entry: StateEntry) -> state_pb.StateEntry:
    if entry.items is not None:
        return state_pb.StateEntry(
            key=entry.key, list=state_pb.JsonList(items=[to_json_text(i) for i in entry.items])
        )
    return state_pb.StateEntry(key=entry.key, json=to_json_text(entry.value))




# ---------------------------------------------------------------------------------------------
# Short-term memories


def timestamp_to_proto(seconds: float) -> Timestamp:
    ts = Timestamp()
    ts.FromNanoseconds(int(seconds * 1e9))
    return ts


def kind_to_proto(kind: str) -> mem_pb.MemoryKind:
    """A memory kind name (`IN_MEMORY`, `AUTO_CONTEXT`; any case) as the wire enum."""
    value = enums.KIND_TO_PB.get(kind.upper())
    if value is None:
        raise ValueError(f"unknown memory kind {kind!r} ({' or '.join(enums.KIND_TO_PB)})")
    return value


def auto_context_config_to_proto(config: AutoContextConfig) -> mem_pb.AutoContextConfig:
    prompts = config.custom_prompt
    return mem_pb.AutoContextConfig(
        custom_prompt=mem_pb.PromptConfig(**{n: getattr(prompts, n) or "" for n in enums.AUTO_CONTEXT_PROMPTS}),
        profile=enums.PROFILE_TO_PB[config.profile],
        token_counter=enums.COUNTER_TO_PB[config.token_counter],
        **{n: getattr(config, n) for n in enums.AUTO_CONTEXT_NUMBERS},
    )


def memory_to_proto(memory: MemoryDescription) -> mem_pb.Memory:
    out = mem_pb.Memory(
        memory_id=memory.memory_id,
        kind=enums.KIND_TO_PB.get(memory.kind, mem_pb.MEMORY_KIND_UNSPECIFIED),
        message_count=memory.message_count,
        labels=memory.labels,
        create_time=timestamp_to_proto(memory.create_time),
        update_time=timestamp_to_proto(memory.update_time),
        version=memory.version,
    )
    if memory.auto_context_config is not None:
        out.auto_context_config.CopyFrom(auto_context_config_to_proto(memory.auto_context_config))
    if memory.tiered_config is not None:
        from agentscope_memory.convert.tiered import tiered_config_to_proto

        out.tiered_config.CopyFrom(tiered_config_to_proto(memory.tiered_config))
    return out


def event_to_proto(seq: int, event: CompressionEvent) -> mem_pb.CompressionEvent:
    out = mem_pb.CompressionEvent(
        event_type=event.event_type, timestamp=event.timestamp,
        compressed_message_count=event.compressed_message_count,
        metadata_json=to_json_text(event.metadata) if event.metadata else "", sequence=seq,
    )
    for name in ("previous_message_id", "next_message_id", "compressed_message_id"):
        value = getattr(event, name)
        if value is not None:
            setattr(out, name, value)
    return out


# ---------------------------------------------------------------------------------------------
# Long-term memory


def scope_to_proto(scope: Scope) -> ltm_pb.Scope:
    return ltm_pb.Scope(agent_name=scope.agent_name, user_id=scope.user_id, run_name=scope.run_name)


def mode_to_proto(mode: Mode | str) -> ltm_pb.LongTermMemoryMode:
    try:
        return enums.MODE_TO_PB[Mode(mode.upper() if isinstance(mode, str) else mode)]
    except ValueError:
        raise ValueError(f"unknown mode {mode!r} (AGENT_CONTROL, STATIC_CONTROL or BOTH)") from None


def ranking_to_proto(ranking: str) -> ltm_pb.LongTermRanking:
    """A ranking's name (`shipped`, `seed`, `semantic`, `dense`, `lexical`, `rrf`; "" for the
    server's default) as the wire enum."""
    if not ranking:
        return ltm_pb.LONG_TERM_RANKING_UNSPECIFIED
    name = f"LONG_TERM_RANKING_{ranking.upper()}"
    if ranking != ranking.lower() or name not in ltm_pb.LongTermRanking.keys() or name.endswith("_UNSPECIFIED"):
        raise ValueError(f"unknown ranking {ranking!r} (shipped, seed, semantic, dense, lexical or rrf)")
    return ltm_pb.LongTermRanking.Value(name)


def long_term_item_to_proto(item: LongTermItem) -> ltm_pb.LongTermMemoryItem:
    out = ltm_pb.LongTermMemoryItem(
        id=item.id,
        memory=item.text,
        metadata_json=to_json_text(item.metadata) if item.metadata else "",
        scope=scope_to_proto(item.scope),
        created_at=item.created_at,
        updated_at=item.updated_at,
        memory_type=item.memory_type,
        domain=item.domain,
        importance=item.importance if item.importance is not None else 0.0,
        importance_method=item.importance_method,
        last_accessed_at=item.last_accessed_at,
        access_count=item.access_count,
        source_json=to_json_text(item.source) if item.source else "",
        # Parent/child scopes: LOCAL = 1, SHARED = 2, GLOBAL = 3 (visibility.proto).
        visibility={"LOCAL": 1, "SHARED": 2, "GLOBAL": 3}.get(item.visibility, 1),  # type: ignore[arg-type]
        inherited=item.inherited,
        pinned=item.pinned,
    )
    if item.score is not None:
        out.score = item.score
    return out


def long_term_result_to_proto(item: LongTermItem) -> ltm_pb.LongTermSearchResult:
    """A ranked search result: the memory and every component of its score."""
    s = item.scores
    scores = ltm_pb.LongTermScores()
    if s is not None:
        scores = ltm_pb.LongTermScores(final=s.final, semantic=s.semantic, dense=s.dense, lexical=s.lexical,
                                       decay=s.decay, importance=s.importance, frequency=s.frequency)
    return ltm_pb.LongTermSearchResult(memory=long_term_item_to_proto(item), scores=scores)


def long_term_history_to_proto(entry: HistoryEntry) -> ltm_pb.LongTermHistoryEntry:
    out = ltm_pb.LongTermHistoryEntry(memory_id=entry.memory_id, event=entry.event, created_at=entry.created_at,
                                      detail_json=to_json_text(entry.detail) if entry.detail else "")
    if entry.old_text is not None:
        out.old_text = entry.old_text
    if entry.new_text is not None:
        out.new_text = entry.new_text
    return out


def tool_schema_to_proto(tool: ToolSchema) -> ltm_pb.ToolSchema:
    return ltm_pb.ToolSchema(
        name=tool.name, description=tool.description, parameters_json_schema=json.dumps(tool.parameters)
    )
