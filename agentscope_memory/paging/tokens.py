"""Page tokens and etags the server signs, so a client can neither forge nor move them.

A token is opaque: base64url of a few decimal integers (where the next page starts and which
snapshot of the memory the listing reads) followed by an HMAC-SHA256 tag. The tag also covers
what the token is bound to but does not carry: the listing, the tenant, the memory (or scope)
and the request's shape (page size and the other parameters that must not change between
pages, AIP-158). Anything that does not verify is `page_token: invalid or expired`, checked
before a single value of it is used, so forged positions never reach a database.

The key comes from the settings (replicas configured alike) or else is generated once and kept
in the store's `meta` table: it survives restarts, and replicas sharing one database agree on it
with no configuration.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Sequence

from agentscope_memory.errors import AbortedError, InvalidArgumentError
from agentscope_memory.store.base import MemoryRecord, Store, Tx

__all__ = ["INVALID_TOKEN", "ListState", "PageTokens", "Snapshot"]

INVALID_TOKEN = "invalid or expired"
META_KEY = "page_token_secret"
# Longest token accepted; ours are shorter (a few integers, at most one id, a 16-byte tag).
MAX_TOKEN_CHARS = 8192
TAG_BYTES = 16
# Positions and versions are 63-bit integers, as in every store.
MAX_VALUE = 2**63 - 1

Binding = Sequence[str | int]


@dataclass(frozen=True)
class Snapshot:
    """Which state of a memory a listing reads: its creation time (a memory deleted and created
    again is another memory) and its version (every change increases it)."""

    created_us: int
    version: int

    @staticmethod
    def of(record: MemoryRecord) -> Snapshot:
        return Snapshot(round(record.create_time * 1_000_000), record.version)


@dataclass(frozen=True)
class ListState:
    """What an etag names: a snapshot of the memory, how many messages it held then, and the seq
    its next appended message would get (0 for a kind whose reads are no append-only list). The
    last two let a later read tell whether the messages then are a prefix of the current ones."""

    created_us: int
    version: int
    count: int
    next_seq: int

    @staticmethod
    def of(record: MemoryRecord, count: int, next_seq: int | None, version: int | None = None) -> ListState:
        """The state of `record` holding `count` messages; `version`: the record's version after a
        change made in the same transaction (the record read before it has the old one)."""
        snapshot = Snapshot.of(record)
        return ListState(snapshot.created_us, snapshot.version if version is None else version, count, next_seq or 0)


# Memories whose last etag is kept (all are forgotten at once past this: a memo, not a record).
_ETAGS_KEPT = 4096


def _frame(parts: Binding) -> bytes:
    # Length-prefixed, so no choice of ids can make two bindings collide.
    out = bytearray()
    for part in parts:
        data = (f"i{part}" if isinstance(part, int) else f"s{part}").encode("utf-8", "surrogatepass")
        out += len(data).to_bytes(4, "big") + data
    return bytes(out)


class PageTokens:
    """Issues and verifies page tokens and etags with the server's key."""

    def __init__(self, store: Store | None, secret: str | None = None) -> None:
        self._store = store
        # The server's key, as an HMAC keyed once (None until `ready`): each tag copies it, since
        # keying costs as much as the rest of a tag.
        self._keyed: hmac.HMAC | None = None
        # The last etag named per memory: an add names the state before it (the last add's
        # after) and the state after it, so a run of adds signs each state once, not twice.
        self._last_etags: dict[tuple[str, str], tuple[ListState, str, hmac.HMAC]] = {}
        if secret is not None:
            self._set_key(hashlib.sha256(secret.encode()).digest())
        self._lock = asyncio.Lock()

    async def ready(self) -> None:
        """Load (or create, once per database) the key; cheap after the first call."""
        if self._keyed is not None:
            return
        async with self._lock:
            if self._keyed is not None:
                return
            if self._store is None:
                self._set_key(secrets.token_bytes(32))
                return
            fresh = secrets.token_hex(32)

            def load(tx: Tx) -> str:
                return tx.meta_setdefault(META_KEY, fresh)

            self._set_key(bytes.fromhex(await self._store.run("", load)))

    def _set_key(self, key: bytes) -> None:
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)
        self._last_etags.clear()

    def derived_key(self, purpose: str) -> bytes:
        """A key of its own for `purpose` (e.g. signing inspector sessions), derived from the
        server's key, so it is as stable as page tokens are and never equals their key."""
        if self._keyed is None:
            raise RuntimeError("PageTokens.ready() was not awaited")
        mac = self._keyed.copy()
        mac.update(b"derived key|" + purpose.encode("utf-8"))
        return mac.digest()

    def _bound(self, listing: str, binding: Binding) -> hmac.HMAC:
        """The key fed with what a token is bound to; a tag copies it and adds the payload."""
        if self._keyed is None:
            raise RuntimeError("PageTokens.ready() was not awaited")
        mac = self._keyed.copy()
        mac.update(_frame([listing, *binding]) + b"|")
        return mac

    def _tag(self, listing: str, binding: Binding, payload: bytes) -> bytes:
        mac = self._bound(listing, binding)
        mac.update(payload)
        return mac.digest()[:TAG_BYTES]

    @staticmethod
    def _sealed(bound: hmac.HMAC, values: Sequence[int], text: str = "") -> str:
        payload = ".".join(str(int(v)) for v in values).encode("ascii") + b":" + text.encode("utf-8", "surrogatepass")
        mac = bound.copy()
        mac.update(payload)
        return base64.urlsafe_b64encode(payload + mac.digest()[:TAG_BYTES]).decode("ascii").rstrip("=")

    def issue(self, listing: str, binding: Binding, values: Sequence[int], text: str = "") -> str:
        """A token for `listing` bound to `binding`, carrying `values` (non-negative ints) and
        optionally one `text` (e.g. the last id listed)."""
        return self._sealed(self._bound(listing, binding), values, text)

    def read(self, token: str, listing: str, binding: Binding, count: int, field: str = "page_token") -> list[int]:
        """The `count` values of a token issued by `issue` with the same listing and binding;
        INVALID_ARGUMENT `page_token: invalid or expired` for anything else."""
        return self.read_with_text(token, listing, binding, count, field)[0]

    def read_with_text(
        self, token: str, listing: str, binding: Binding, count: int, field: str = "page_token"
    ) -> tuple[list[int], str]:
        """As `read`, with the token's text."""
        invalid = InvalidArgumentError(field, INVALID_TOKEN)
        if not token.isascii() or len(token) > MAX_TOKEN_CHARS:
            raise invalid
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (ValueError, binascii.Error):
            raise invalid from None
        payload, tag = raw[:-TAG_BYTES], raw[-TAG_BYTES:]
        if len(raw) <= TAG_BYTES or not hmac.compare_digest(tag, self._tag(listing, binding, payload)):
            raise invalid
        # Signed by us, so well formed; checked anyway, since a leaked key must not mean INTERNAL.
        numbers, _, text = payload.partition(b":")
        parts = numbers.split(b".") if numbers else []
        if len(parts) != count or not all(p.isdigit() and len(p) <= 19 for p in parts):
            raise invalid
        values = [int(p) for p in parts]
        if any(v > MAX_VALUE for v in values):
            raise invalid
        try:
            return values, text.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise invalid from None

    # -- snapshots and etags ----------------------------------------------------------------

    def etag(self, tenant: str, memory_id: str, state: ListState) -> str:
        """Names one state of a memory's messages; opaque and signed, so equal etags mean the
        same state of the same memory of the same tenant."""
        key = (tenant, memory_id)
        last = self._last_etags.get(key)
        if last is not None and last[0] == state:
            return last[1]
        bound = last[2] if last is not None else self._bound("etag", [tenant, memory_id])
        tag = self._sealed(bound, [state.created_us, state.version, state.count, state.next_seq])
        if len(self._last_etags) >= _ETAGS_KEPT:
            self._last_etags.clear()
        self._last_etags[key] = (state, tag, bound)
        return tag

    def read_etag(self, tenant: str, memory_id: str, etag: str) -> ListState | None:
        """The state an etag of ours names, or None for anything else (forged, another memory's
        or tenant's, or of an older format): a client's etag is a hint, never an error."""
        try:
            values = self.read(etag, "etag", [tenant, memory_id], 4, field="if_none_match")
        except InvalidArgumentError:
            return None
        return ListState(*values)

    @staticmethod
    def check_snapshot(memory_id: str, expected: Snapshot, record: MemoryRecord) -> None:
        """ABORTED when the memory changed since the first page: the pages would not be one
        list. The client starts the listing again from the first page."""
        current = Snapshot.of(record)
        if current == expected:
            return
        if current.created_us != expected.created_us:
            change = "was deleted and created again"
        else:
            change = f"changed (version {expected.version} -> {current.version})"
        raise AbortedError(
            f"memory {memory_id!r} {change} between pages; read it again from the first page"
        )
