"""What the sync and asyncio clients share: types, status mapping, request building."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
import grpc

from agentscope_memory import errors
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 30.0
# Responses can be pages of several MiB; the gRPC default receive limit (4 MiB) is too small.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]
# Status codes on which a call is retried (it never reached the memory, or it is idempotent).
RETRYABLE = (grpc.StatusCode.UNAVAILABLE,)

_KIND_TO_PB = {"IN_MEMORY": pb.MEMORY_KIND_IN_MEMORY, "AUTO_CONTEXT": pb.MEMORY_KIND_AUTO_CONTEXT}
_KIND_FROM_PB = {v: k for k, v in _KIND_TO_PB.items()}


@dataclass(frozen=True)
class MemoryDescription:
    """A memory as the server describes it."""

    memory_id: str
    kind: str
    message_count: int
    version: int
    labels: dict[str, str] = field(default_factory=dict)
    create_time: float = 0.0
    update_time: float = 0.0


def describe(memory: pb.Memory) -> MemoryDescription:
    return MemoryDescription(
        memory_id=memory.memory_id,
        kind=_KIND_FROM_PB.get(memory.kind, "UNSPECIFIED"),
        message_count=memory.message_count,
        version=memory.version,
        labels=dict(memory.labels),
        create_time=memory.create_time.ToNanoseconds() / 1e9,
        update_time=memory.update_time.ToNanoseconds() / 1e9,
    )


def kind_to_pb(kind: str) -> int:
    try:
        return _KIND_TO_PB[kind.upper()]
    except KeyError:
        raise ValueError(f"unknown memory kind {kind!r} (IN_MEMORY or AUTO_CONTEXT)") from None


def new_request_id() -> str:
    return uuid.uuid4().hex


def metadata(api_key: str | None) -> list[tuple[str, str]] | None:
    return [("x-api-key", api_key)] if api_key else None


_ERRORS: dict[grpc.StatusCode, type[errors.MemoryServiceError]] = {
    grpc.StatusCode.NOT_FOUND: errors.NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: errors.AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: errors.FailedPreconditionError,
    grpc.StatusCode.ABORTED: errors.AbortedError,
    grpc.StatusCode.UNAVAILABLE: errors.UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.DeadlineExceededError,
    grpc.StatusCode.UNIMPLEMENTED: errors.UnimplementedError,
    grpc.StatusCode.UNAUTHENTICATED: errors.UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDeniedError,
}


def translate(exc: grpc.RpcError) -> errors.MemoryServiceError:
    """Turn a gRPC failure into the library's error type, keeping the server's message."""
    code = exc.code()
    details = exc.details() or code.name
    if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
        field_name, sep, reason = details.partition(": ")
        cls = (
            errors.InvalidArgumentError
            if code == grpc.StatusCode.INVALID_ARGUMENT
            else errors.ResourceExhaustedError
        )
        return cls(field_name, reason) if sep else cls("", details)
    cls = _ERRORS.get(code, errors.MemoryServiceError)
    error = cls(details)
    error.grpc_code = code  # type: ignore[attr-defined]
    return error

