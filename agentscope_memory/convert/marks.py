"""DeleteMessages and UpdateMessageMarks answers: library results <-> proto."""

from __future__ import annotations

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory.short_term.manager import DeleteManyResult, MarksResult

# The deleted ids an answer carries at most (UTF-8 bytes): far below gRPC's 4 MiB default
# receive limit, whatever a deletion by mark removes; past it a client reads again instead.
MAX_DELETED_IDS_BYTES = 1024 * 1024


def delete_messages_to_proto(result: DeleteManyResult) -> pb.DeleteMessagesResponse:
    size = sum(len(i.encode("utf-8")) + 2 for i in result.deleted_ids)
    omitted = size > MAX_DELETED_IDS_BYTES
    return pb.DeleteMessagesResponse(
        deleted_count=len(result.deleted_ids), message_count=result.message_count, etag=result.etag,
        previous_etag=result.previous_etag, deleted_message_ids=[] if omitted else result.deleted_ids,
        deleted_message_ids_omitted=omitted)


def marks_to_proto(result: MarksResult) -> pb.UpdateMessageMarksResponse:
    return pb.UpdateMessageMarksResponse(
        updated_count=result.updated_count, changed_count=result.changed_count, message_count=result.message_count,
        etag=result.etag, previous_etag=result.previous_etag)
