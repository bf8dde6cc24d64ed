"""AUTO_CONTEXT answers and requests on the wire, the way the Python client reads and writes
them: compression events and outcomes in, the plan note out (the servicer's direction is in
`to_proto.event_to_proto` and `from_proto.plan_from_proto`)."""

from __future__ import annotations

import json
from typing import Any

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as mem_pb
from agentscope_memory.short_term.auto_context.engine import CompressionEvent, PlanNote
from agentscope_memory.short_term.auto_context.service import CompressOutcome


def event_from_proto(event: mem_pb.CompressionEvent) -> tuple[int, CompressionEvent]:
    """(sequence, event): the sequence is what a caller passes as `after_sequence` to resume."""
    metadata: Any = json.loads(event.metadata_json) if event.metadata_json else {}
    return event.sequence, CompressionEvent(
        event_type=event.event_type,
        timestamp=event.timestamp,
        compressed_message_count=event.compressed_message_count,
        previous_message_id=event.previous_message_id if event.HasField("previous_message_id") else None,
        next_message_id=event.next_message_id if event.HasField("next_message_id") else None,
        compressed_message_id=event.compressed_message_id if event.HasField("compressed_message_id") else None,
        metadata=metadata if isinstance(metadata, dict) else {},
    )


def outcome_from_proto(response: mem_pb.CompressIfNeededResponse) -> CompressOutcome:
    return CompressOutcome(response.compressed, [event_from_proto(e) for e in response.events],
                           response.tokens_before, response.tokens_after, response.message_count)


def plan_to_proto(plan: PlanNote) -> mem_pb.PlanNote:
    return mem_pb.PlanNote(description=plan.description, expected_outcome=plan.expected_outcome,
                           subtasks=[mem_pb.PlanSubtask(name=s.name, state=s.state) for s in plan.subtasks])
