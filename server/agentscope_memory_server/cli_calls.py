"""How the command line's clients call a server."""

from __future__ import annotations

from agentscope_memory.errors import UnauthenticatedError

# A command pointed at a server that is not there says so at once, rather than after the
# client's default of retrying for its whole 30 s deadline (which is for applications riding
# out a restart). A few quick retries, well under a second in all, still ride out a blip.
RETRIES = 3


def failure(exc: BaseException, api_key: str | None) -> str:
    """`exc` as the one line a command prints; a refused call without a key says how to give one
    here (the server's own advice names the gRPC headers, which a command line does not show)."""
    if isinstance(exc, UnauthenticatedError) and not api_key:
        return f"{exc}; give the key with --api-key or $AGENTSCOPE_MEMORY_API_KEY"
    return str(exc)
