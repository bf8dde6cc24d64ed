"""uvicorn's h11 protocol with the two limits it lacks, for every HTTP surface.

uvicorn (0.54, h11) starts no timer when a connection opens, and cancels its keep-alive timer
on any byte received: a client that connects and sends nothing, or trickles its request's
headers a byte at a time (slowloris), holds its connection, a file descriptor of the server's
process, for ever; enough of them and the process cannot open its own files. Its
`limit_concurrency` does not help: it counts those connections too, and answers the next real
request 503.

So a connection must deliver a complete request head within `HEADER_TIMEOUT_S` of opening, or
of its previous response, or is closed; and a surface holding `max_connections` open
connections answers a new one 503 and closes it at once. What a request's body and its
response take is not limited here (uploads are bounded by size, `BodyLimit`; MCP's SSE streams
are long-lived by design).
"""

from __future__ import annotations

import asyncio
import logging
import time

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("agentscope_memory_server.http")

# Generous for a person on a slow link; a request head is at most 16 KiB (h11's limit).
HEADER_TIMEOUT_S = 10.0
# Between two warnings that a surface is full, so a flood does not flood the log too.
_WARN_EVERY_S = 60.0

_BUSY_TEXT = b"too many open connections to this port; retry later\n"
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
         b"retry-after: 1\r\ncontent-length: " + str(len(_BUSY_TEXT)).encode() + b"\r\n\r\n" + _BUSY_TEXT)


class GuardedH11Protocol(H11Protocol):
    """Subclassed per surface (`guarded_protocol`) with its connection limit."""

    max_connections = 512
    _last_warning = 0.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            now = time.monotonic()
            if now - type(self)._last_warning > _WARN_EVERY_S:
                type(self)._last_warning = now
                log.warning("refusing HTTP connections: %d open, the limit (http_max_connections)",
                            self.max_connections)
            transport.write(_BUSY)
            transport.close()
            return
        self._await_request_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_request_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def _await_request_head(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT_S, self._request_head_late)

    def _request_head_late(self) -> None:
        self._header_timer = None
        # IDLE: h11 has not seen a complete request head since the timer was set (a request in
        # progress has moved on to its body or is done).
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(max_connections: int) -> type[GuardedH11Protocol]:
    """The protocol class for one surface, allowing `max_connections` open connections."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"max_connections": max_connections})
