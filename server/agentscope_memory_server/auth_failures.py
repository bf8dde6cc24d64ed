"""A per-client-address limit on failed authentications, shared by gRPC and every HTTP surface.

An address that presents `limit` unknown keys or forged sessions within a minute (a missing key
guesses nothing and is not counted) is refused for a minute (gRPC `RESOURCE_EXHAUSTED`, HTTP 429
with `Retry-After`), whatever it
presents meanwhile, a valid key included: otherwise a guesser would learn which guess was right
from the one answer that is not a refusal. Keys are at least 16 characters, so guessing one is
hopeless anyway; the limit keeps a weak key from being guessed and a flood of failures out of
the logs. Behind a reverse proxy every client has the proxy's address: raise the limit, or set
it to 0 (no limit).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable

from agentscope_memory.errors import ResourceExhaustedError

WINDOW_S = 60.0
BLOCK_S = 60.0
# The most addresses remembered at once (failures or refusals): a flood from many addresses
# forgets the oldest, never grows the server's memory without bound.
MAX_TRACKED = 10_000


class TooManyFailedAuthentications(ResourceExhaustedError):
    """The caller's address failed to authenticate too often; `retry_after` in whole seconds."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = max(1, int(retry_after + 0.999))
        super().__init__("", f"too many failed authentications from this address; retry in {self.retry_after} s")


class FailedAuthLimiter:
    """Counts failed authentications per client address; `limit` 0 turns it off."""

    def __init__(self, limit: int, *, window_s: float = WINDOW_S, block_s: float = BLOCK_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._window_s = window_s
        self._block_s = block_s
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._blocked: dict[str, float] = {}

    @property
    def blocking(self) -> bool:
        """Whether any address is refused now: when none is (the usual case), a successful
        authentication need not look up its caller's address at all."""
        if self._blocked:
            now = self._clock()
            for address in [a for a, until in self._blocked.items() if until <= now]:
                del self._blocked[address]
        return bool(self._blocked)

    def check(self, address: str | None) -> None:
        """Raises `TooManyFailedAuthentications` while `address` is refused."""
        if address is None or not self._blocked:
            return
        until = self._blocked.get(address)
        if until is None:
            return
        left = until - self._clock()
        if left <= 0:
            del self._blocked[address]
            return
        raise TooManyFailedAuthentications(left)

    def failed(self, address: str | None) -> None:
        """Counts a failed authentication from `address`; raises `TooManyFailedAuthentications`
        if it is refused now (this failure was one too many, or it already was)."""
        if address is None or self.limit <= 0:
            return
        self.check(address)
        now = self._clock()
        times = self._failures.pop(address, None) or deque()
        while times and times[0] <= now - self._window_s:
            times.popleft()
        times.append(now)
        if len(times) >= self.limit:
            self._blocked[address] = now + self._block_s
            _forget_oldest(self._blocked)
            raise TooManyFailedAuthentications(self._block_s)
        self._failures[address] = times  # re-inserted: the dict's order is least recently failed first
        _forget_oldest(self._failures)


def _forget_oldest(table: dict[str, Any]) -> None:
    while len(table) > MAX_TRACKED:
        del table[next(iter(table))]


def grpc_peer_address(peer: str) -> str:
    """The host of a gRPC peer string (`ipv4:10.0.0.1:5000`, `ipv6:[::1]:5000`, `unix:...`), as
    an HTTP surface sees the same client, so both count against one address."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        rest = rest.replace("%5B", "[").replace("%5D", "]")
        if rest.startswith("["):
            return rest[1:rest.find("]")]
        return rest.rpartition(":")[0] or rest
    return peer
