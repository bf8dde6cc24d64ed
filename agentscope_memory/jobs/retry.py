"""What happens to a job whose handler failed: retry when, or give up."""

from __future__ import annotations

import random

from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from agentscope_memory.jobs.model import JobSettings, PermanentJobError

# Failures that will fail the same way next time: the library's "your request is wrong" errors.
_PERMANENT = (PermanentJobError, InvalidArgumentError, NotFoundError, FailedPreconditionError)

# Longest error text kept with a job.
_MAX_ERROR_CHARS = 4000


def is_permanent(exc: BaseException) -> bool:
    return isinstance(exc, _PERMANENT)


def backoff_s(attempts: int, settings: JobSettings, rng: random.Random) -> float:
    """The wait before the next run of a job that has failed `attempts` times."""
    # The exponent is capped so that a large max_attempts cannot overflow a float.
    delay = min(settings.backoff_base_s * 2.0 ** min(attempts - 1, 60), settings.backoff_max_s)
    return delay + rng.uniform(0.0, delay * 0.1)


def describe(exc: BaseException) -> str:
    # Kept in a text column, so what one cannot hold is shown escaped: NUL (PostgreSQL refuses
    # it; the job could be neither retried nor given up) and lone surrogates (no UTF-8 form).
    text = f"{type(exc).__name__}: {exc}".replace("\x00", "\\x00")
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 1] + "…"
