"""What the job runner hands out and takes in: jobs, settings, the permanent-failure signal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentscope_memory.store.base import JobRecord

# A job as `JobRunner.list_jobs` shows it: the stored row, state and last error included.
JobInfo = JobRecord


@dataclass(frozen=True)
class Job:
    """What a handler receives."""

    job_id: str
    tenant: str
    kind: str
    payload: dict[str, Any]
    # Runs started so far, this one included (1 on the first run).
    attempts: int


@dataclass(frozen=True)
class JobSettings:
    # A claimed job is its runner's for this long; renewed while its handler runs. A runner that
    # dies keeps its jobs this long before another runner takes them over.
    lease_s: float = 30.0
    # How often an idle runner looks for due jobs when nothing woke it.
    poll_interval_s: float = 1.0
    # Runs before a failing job is dead (kept, with its last error, for someone to look at).
    max_attempts: int = 8
    # Retry n waits min(backoff_base_s * 2**(n-1), backoff_max_s), plus up to 10% jitter so
    # that jobs failing together do not retry together.
    backoff_base_s: float = 1.0
    backoff_max_s: float = 300.0
    # Handlers running at once in this process.
    concurrency: int = 4

    def __post_init__(self) -> None:
        if self.lease_s <= 0 or self.poll_interval_s <= 0:
            raise ValueError("lease_s and poll_interval_s must be positive")
        if self.max_attempts < 1 or self.concurrency < 1:
            raise ValueError("max_attempts and concurrency must be at least 1")
        if self.backoff_base_s < 0 or self.backoff_max_s < 0:
            raise ValueError("backoff_base_s and backoff_max_s must not be negative")


class PermanentJobError(Exception):
    """Raised by a handler for a failure that retrying cannot fix: the job is dead at once."""
