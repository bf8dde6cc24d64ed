"""Errors of the memory library. Each maps to one gRPC status code in the server."""

from __future__ import annotations


class MemoryServiceError(Exception):
    """Base class: a failure the caller can act on, with a message a person can read."""


class InvalidArgumentError(MemoryServiceError, ValueError):
    """An input is malformed; `field` names it (a dotted path such as `messages[2].role`)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class NotFoundError(MemoryServiceError):
    """The addressed memory (or item) does not exist for this tenant."""


class AlreadyExistsError(MemoryServiceError):
    """Something with that id exists already."""


class FailedPreconditionError(MemoryServiceError):
    """The request is valid but not for the target's current state (e.g. wrong memory kind)."""


class AbortedError(MemoryServiceError):
    """A concurrent change won; retry with fresh state."""


class ResourceExhaustedError(MemoryServiceError):
    """A configured limit was exceeded; `field` names the input that exceeded it."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class UnavailableError(MemoryServiceError):
    """A dependency (LLM, embedder, database) could not be reached; retrying may help."""


class DeadlineExceededError(MemoryServiceError):
    """A dependency took longer than allowed."""


class UnimplementedError(MemoryServiceError):
    """The operation is part of the contract but this server does not provide it (yet)."""


class UnauthenticatedError(MemoryServiceError):
    """No valid credentials were presented."""


class PermissionDeniedError(MemoryServiceError):
    """The credentials do not allow this operation."""
