"""The byte budget of a page: no response may outgrow a stock client's 4 MiB receive limit."""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")

# What a page's envelope (token, etag, counters, per-item framing) may take beyond its items;
# the default budget leaves this much of gRPC's 4 MiB default receive limit free.
ENVELOPE_RESERVE = 64 * 1024
GRPC_DEFAULT_RECEIVE = 4 * 1024 * 1024
DEFAULT_PAGE_BYTES = GRPC_DEFAULT_RECEIVE - ENVELOPE_RESERVE


def cut_to_budget(items: Sequence[T], size: Callable[[T], int], budget: int, first: int = 0) -> int:
    """How many leading `items` fit in `budget` bytes when `first` bytes are already used.
    The first item always goes (a single item larger than the budget travels alone, which the
    message size limit keeps under the receive limit); 10 bytes per item cover its framing."""
    used = first
    for kept, item in enumerate(items):
        used += size(item) + 10
        if kept and used > budget:
            return kept
    return len(items)


def read_within_budget(
    fetch: Callable[[int, int], list[T]],
    position: Callable[[T], int],
    size: Callable[[T], int],
    after: int,
    limit: int,
    budget: int,
) -> list[T]:
    """Up to `limit` items after position `after`, read in growing batches that stop soon after
    the items exceed `budget` bytes: a page of a few large items does not read the rest of a
    long history (which would make reading N pages cost O(N^2))."""
    out: list[T] = []
    used = 0
    batch = 16
    while len(out) < limit:
        wanted = min(batch, limit - len(out))
        rows = fetch(after, wanted)
        out.extend(rows)
        used += sum(size(r) for r in rows)
        if len(rows) < wanted or used > budget:
            break
        after = position(rows[-1])
        batch = min(batch * 4, 4096)
    return out
