"""The inspector's login sessions: a signed, expiring token in the cookie, never the API key.

A token is `<expiry>.<key id>.<signature>`: the Unix second it expires, a keyed hash of the
key's digest (which names the key without revealing it), and an HMAC over both with the
server's session key. A stolen cookie is good for `SESSION_S` at most, and for no longer than
its key stays configured: each request finds the key again by its id.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Callable

# How long a login lasts.
SESSION_S = 12 * 3600
# Longer than any token we issue: anything longer is refused unread.
_MAX_TOKEN_CHARS = 128


class Sessions:
    def __init__(self, secret: bytes, *, ttl_s: int = SESSION_S, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self.ttl_s = ttl_s
        self._clock = clock

    def key_id(self, digest: bytes) -> str:
        """The id a session names the key with `digest` by."""
        return hmac.new(self._secret, b"key|" + digest, hashlib.sha256).hexdigest()[:32]

    def _signature(self, body: str) -> str:
        return hmac.new(self._secret, b"session|" + body.encode("ascii"), hashlib.sha256).hexdigest()

    def issue(self, digest: bytes) -> str:
        """A session for the key with `digest`, from now for the session's lifetime."""
        body = f"{int(self._clock()) + self.ttl_s}.{self.key_id(digest)}"
        return f"{body}.{self._signature(body)}"

    def read(self, token: str) -> tuple[str | None, bool]:
        """(key id, forged): the key id of a valid, unexpired session, else None, with whether
        the token was forged (its signature wrong) rather than merely expired or malformed."""
        if len(token) > _MAX_TOKEN_CHARS or not token.isascii():
            return None, True
        body, _, signature = token.rpartition(".")
        expiry, _, key_id = body.partition(".")
        if not hmac.compare_digest(signature, self._signature(body)):
            return None, True
        if not expiry.isdigit() or int(expiry) <= self._clock():
            return None, False
        return key_id, False
