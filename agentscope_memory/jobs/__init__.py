"""Durable background jobs: queued in the store, run by a `JobRunner` in every server replica.

A job is enqueued inside the transaction of the write that needs it (so both happen or neither
does), claimed by one runner at a time under a lease, retried with backoff when its handler
fails, and kept as `dead` once retrying is pointless. Handlers must be idempotent: a runner that
dies mid-job leaves it to be run again once its lease runs out.
"""

from __future__ import annotations

from agentscope_memory.jobs.model import Job, JobInfo, JobSettings, PermanentJobError
from agentscope_memory.jobs.runner import JobRunner

__all__ = ["Job", "JobInfo", "JobRunner", "JobSettings", "PermanentJobError"]
