"""Shared memory pools: library -> proto (entries, events, renderings) and the render format."""

from __future__ import annotations

import json

from google.protobuf.timestamp_pb2 import Timestamp

from agentscope_memory._proto.agentscope.memory.v1 import shared_pool_service_pb2 as pool_pb
from agentscope_memory.convert.to_proto import msg_to_proto, timestamp_to_proto
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.pool import PoolEntry, PoolEvent, RenderedPools


def entry_to_proto(entry: PoolEntry) -> pool_pb.PoolEntry:
    return pool_pb.PoolEntry(
        pool_id=entry.pool_id, key=entry.key, content_json=entry.content_json, version=entry.version,
        created_by=entry.created_by, updated_by=entry.updated_by, create_time=timestamp_to_proto(entry.created_at),
        update_time=timestamp_to_proto(entry.updated_at), metadata_json=json.dumps(entry.metadata, ensure_ascii=False),
    )


def entry_from_proto(entry: pool_pb.PoolEntry) -> PoolEntry:
    return PoolEntry(entry.pool_id, entry.key, entry.content_json, entry.version, entry.created_by, entry.updated_by,
                     _seconds(entry.create_time), _seconds(entry.update_time),
                     json.loads(entry.metadata_json) if entry.metadata_json else {})


def event_to_proto(event: PoolEvent) -> pool_pb.PoolEvent:
    return pool_pb.PoolEvent(sequence=event.sequence, event_type=event.event_type, pool_id=event.pool_id, key=event.key,
                             version=event.version, writer=event.writer, time=timestamp_to_proto(event.time))


def event_from_proto(event: pool_pb.PoolEvent) -> PoolEvent:
    return PoolEvent(event.sequence, event.event_type, event.pool_id, event.key, event.version, event.writer,
                     _seconds(event.time))


def rendered_to_proto(rendered: RenderedPools, messages: bool) -> pool_pb.RenderPoolContextResponse:
    return pool_pb.RenderPoolContextResponse(
        text="" if messages else rendered.text,
        messages=[msg_to_proto(m) for m in rendered.messages] if messages else [],
        entry_count=rendered.entry_count, omitted_count=rendered.omitted_count, token_count=rendered.token_count,
    )


def render_format_from_proto(value: int) -> bool:
    """True for MESSAGES, False for TEXT (the default)."""
    if value in (pool_pb.POOL_RENDER_FORMAT_UNSPECIFIED, pool_pb.POOL_RENDER_FORMAT_TEXT):
        return False
    if value == pool_pb.POOL_RENDER_FORMAT_MESSAGES:
        return True
    raise InvalidArgumentError("format", f"is {value}; must be POOL_RENDER_FORMAT_TEXT or POOL_RENDER_FORMAT_MESSAGES")


def _seconds(ts: Timestamp) -> float:
    return float(ts.ToNanoseconds()) / 1e9
