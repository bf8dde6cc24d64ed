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
        the token was forged (a session's shape with a wrong signature) rather than expired or
        not a session at all (a cookie of an older version held the key itself)."""
        parts = token.split(".") if len(token) <= _MAX_TOKEN_CHARS and token.isascii() else []
        if len(parts) != 3 or not parts[0].isdigit() or not (_is_hex(parts[1], 32) and _is_hex(parts[2], 64)):
            return None, False
        expiry, key_id, signature = parts
        if not hmac.compare_digest(signature, self._signature(f"{expiry}.{key_id}")):
            return None, True
        if int(expiry) <= self._clock():
            return None, False
        return key_id, False


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(c in "0123456789abcdef" for c in text)
