"""What every Python client shares: defaults, channels, credentials and the status mapping."""

from __future__ import annotations

import uuid

import grpc

from agentscope_memory import errors

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT_S = 30.0
# The tenant of an in-process (local mode) service: there are no API keys to name another.
LOCAL_TENANT = "default"
# Responses can be pages of several MiB; the gRPC default receive limit (4 MiB) is too small.
# A lost server is redialled soon: gRPC's default reconnect backoff starts at 1 s and grows to
# 120 s, and every call in between fails at once, however early the server is back.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def blocking_channel(target: str, root_certificates: bytes | None) -> grpc.Channel:
    if root_certificates is not None:
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates), options=CHANNEL_OPTIONS)
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def async_channel(target: str, root_certificates: bytes | None) -> grpc.aio.Channel:
    if root_certificates is not None:
        return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(root_certificates), options=CHANNEL_OPTIONS)
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)


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
        field_cls = (
            errors.InvalidArgumentError
            if code == grpc.StatusCode.INVALID_ARGUMENT
            else errors.ResourceExhaustedError
        )
        return field_cls(field_name, reason) if sep else field_cls("", details)
    cls = _ERRORS.get(code, errors.MemoryServiceError)
    error = cls(details)
    error.grpc_code = code  # type: ignore[attr-defined]
    return error
