"""The inspector's login sessions: a signed, expiring token in the cookie, never the API key.

A token is `<expiry>.<nonce>.<key id>.<signature>`: the Unix second it expires, a random
nonce (two logins in one second are two sessions, so ending one leaves the other, and a login
right after a logout is not the ended session again), a keyed hash of the key's digest (which
names the key without revealing it), and an HMAC over the rest with the server's session key. A stolen cookie is good for `SESSION_S` at most, for no longer than its
key stays configured (each request finds the key again by its id), and not after a logout
(`end`) on this server.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from typing import Callable

# How long a login lasts.
SESSION_S = 12 * 3600
# Longer than any token we issue: anything longer is refused unread.
_MAX_TOKEN_CHARS = 160
# Ended sessions remembered one by one, per key, before that key's are folded into one cut-off.
ENDED_PER_KEY = 1000


class Sessions:
    def __init__(self, secret: bytes, *, ttl_s: int = SESSION_S, clock: Callable[[], float] = time.time,
                 ended_per_key: int = ENDED_PER_KEY) -> None:
        self._secret = secret
        self.ttl_s = ttl_s
        self._clock = clock
        self._ended_per_key = ended_per_key
        # Sessions logged out before they expired, by key id: their signatures with their
        # expiry, and a cut-off (every session of that key expiring at or before it is ended).
        # An entry is dropped once its session would have expired anyway; a key with more than
        # `ended_per_key` of them has them folded into its cut-off, which may end that key's
        # other sessions issued no later (a logout too many ends more, never fewer). So this
        # holds at most `ended_per_key` + 1 entries per configured key, whatever is posted.
        self._ended: dict[str, dict[str, int]] = {}
        self._ended_until: dict[str, int] = {}

    def key_id(self, digest: bytes) -> str:
        """The id a session names the key with `digest` by."""
        return hmac.new(self._secret, b"key|" + digest, hashlib.sha256).hexdigest()[:32]

    def _signature(self, body: str) -> str:
        return hmac.new(self._secret, b"session|" + body.encode("ascii"), hashlib.sha256).hexdigest()

    def issue(self, digest: bytes) -> str:
        """A session for the key with `digest`, from now for the session's lifetime."""
        body = f"{int(self._clock()) + self.ttl_s}.{os.urandom(8).hex()}.{self.key_id(digest)}"
        return f"{body}.{self._signature(body)}"

    def _parse(self, token: str) -> tuple[int, str, str, str] | None:
        """(expiry, body, key id, signature) of a token of a session's shape, else None."""
        parts = token.split(".") if len(token) <= _MAX_TOKEN_CHARS and token.isascii() else []
        if len(parts) != 4 or not parts[0].isdigit() or not (
                _is_hex(parts[1], 16) and _is_hex(parts[2], 32) and _is_hex(parts[3], 64)):
            return None
        return int(parts[0]), token.rsplit(".", 1)[0], parts[2], parts[3]

    def read(self, token: str) -> tuple[str | None, bool]:
        """(key id, forged): the key id of a valid, unexpired session not ended, else None, with
        whether the token was forged (a session's shape with a wrong signature) rather than
        expired, ended or not a session at all (a cookie of an older version held the key)."""
        parsed = self._parse(token)
        if parsed is None:
            return None, False
        expiry, body, key_id, signature = parsed
        if not hmac.compare_digest(signature, self._signature(body)):
            return None, True
        if expiry <= self._clock() or self._is_ended(key_id, expiry, signature):
            return None, False
        return key_id, False

    def _is_ended(self, key_id: str, expiry: int, signature: str) -> bool:
        return expiry <= self._ended_until.get(key_id, 0) or signature in self._ended.get(key_id, {})

    def end(self, token: str) -> bool:
        """End a valid session now (a logout): it is refused from then on. False if `token` is
        no valid session (forged, expired, ended already): nothing to remember then."""
        key_id, _ = self.read(token)
        if key_id is None:
            return False
        parsed = self._parse(token)
        assert parsed is not None
        expiry, _, _, signature = parsed
        now = self._clock()
        ended = self._ended.setdefault(key_id, {})
        for old in [s for s, e in ended.items() if e <= now]:
            del ended[old]
        ended[signature] = expiry
        if len(ended) > self._ended_per_key:
            self._ended_until[key_id] = max(self._ended_until.get(key_id, 0), *ended.values())
            ended.clear()
        if self._ended_until.get(key_id, 0) <= now:
            self._ended_until.pop(key_id, None)
        return True

    @property
    def ended_count(self) -> int:
        """How many ended sessions are remembered (entries and cut-offs): what `end` bounds."""
        return sum(len(e) for e in self._ended.values()) + len(self._ended_until)


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and all(c in "0123456789abcdef" for c in text)
