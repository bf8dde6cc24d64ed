"""State entries cut into stream pieces that each fit a byte budget, and joined back.

`StreamSaveState` and `StreamLoadState` carry a memory's state as pieces (see
`StateEntry.partial` in state_service.proto): a list is split between items, and a single JSON
document or a list item larger than the budget is cut into strings that are joined again.
Used by the server (save) and by the Python client (load), so both cut the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator

from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory.errors import InvalidArgumentError, ResourceExhaustedError

__all__ = ["join_pieces", "split_entries", "split_text", "split_utf8"]

# The framing of an entry (key, tags, lengths) and of an item, counted generously.
ENTRY_OVERHEAD = 32
ITEM_OVERHEAD = 8
# A piece never carries less than this much of a cut string (unless less is left).
MIN_CUT = 1024


def _cut(data: bytes, limit: int) -> tuple[bytes, bytes]:
    """Cut UTF-8 `data` after at most `limit` bytes, on a character boundary."""
    if len(data) <= limit:
        return data, b""
    end = limit
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end], data[end:]


def split_text(text: str, budget: int) -> list[str]:
    """`text` as pieces of at most `budget` (>= 4) bytes of UTF-8 each, cut between characters,
    so each is a valid proto3 string; joined in order they are `text`. At least one piece (""
    for empty text). For values streamed whole (`StreamPutValue`, `StreamGetValue`)."""
    return list(split_utf8(text.encode("utf-8", "surrogatepass"), budget))


def split_utf8(data: bytes, budget: int) -> Iterator[str]:
    """`split_text` of text already encoded as UTF-8 `data`."""
    start, size = 0, len(data)
    while True:
        end = min(start + budget, size)
        while start < end < size and (data[end] & 0xC0) == 0x80:
            end -= 1
        yield data[start:end].decode("utf-8", "surrogatepass")
        start = end
        if start >= size:
            return


class _Pieces:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.chunks: list[list[state_pb.StateEntry]] = []
        self.current: list[state_pb.StateEntry] = []
        self.used = 0

    def room(self) -> int:
        return self.budget - self.used

    def flush(self) -> None:
        if self.current:
            self.chunks.append(self.current)
        self.current, self.used = [], 0

    def open(self, key: str, is_list: bool) -> state_pb.StateEntry:
        cost = ENTRY_OVERHEAD + len(key.encode("utf-8", "surrogatepass"))
        if self.current and self.room() < cost + MIN_CUT:
            self.flush()
        entry = state_pb.StateEntry(key=key)
        if is_list:
            entry.list.SetInParent()
        self.current.append(entry)
        self.used += cost
        return entry


def split_entries(entries: Iterable[state_pb.StateEntry], budget: int) -> list[list[state_pb.StateEntry]]:
    """The entries as pieces, each list of pieces at most about `budget` bytes."""
    out = _Pieces(budget)
    for entry in entries:
        if entry.WhichOneof("value") == "list":
            piece = out.open(entry.key, True)
            for item in entry.list.items:
                data = item.encode("utf-8", "surrogatepass")
                if len(data) + ITEM_OVERHEAD > out.room() and piece.list.items:
                    out.flush()
                    piece = out.open(entry.key, True)
                while True:
                    head, data = _cut(data, max(out.room() - ITEM_OVERHEAD, MIN_CUT))
                    piece.list.items.append(head.decode("utf-8", "surrogatepass"))
                    out.used += len(head) + ITEM_OVERHEAD
                    if not data:
                        break
                    piece.partial = True
                    out.flush()
                    piece = out.open(entry.key, True)
        else:
            data = entry.json.encode("utf-8", "surrogatepass")
            while True:
                piece = out.open(entry.key, False)
                head, data = _cut(data, max(out.room(), MIN_CUT))
                piece.json = head.decode("utf-8", "surrogatepass")
                out.used += len(head)
                if not data:
                    break
                piece.partial = True
                out.flush()
    out.flush()
    return out.chunks or [[]]


@dataclass
class _Joined:
    key: str
    is_list: bool
    parts: list[str] = field(default_factory=list)  # json pieces, or list items


def join_pieces(pieces: Iterator[state_pb.StateEntry] | Iterable[state_pb.StateEntry], max_bytes: int) -> list[state_pb.StateEntry]:
    """Entries from their pieces; INVALID_ARGUMENT for pieces that do not fit together,
    RESOURCE_EXHAUSTED beyond `max_bytes` in all."""
    joined: list[_Joined] = []
    cut_open = False
    total = 0
    for index, piece in enumerate(pieces):
        field_name = f"entries[{index}]"
        kind = piece.WhichOneof("value")
        if kind is None:
            raise InvalidArgumentError(field_name, f"state {piece.key!r} has no value: set json or list")
        is_list = kind == "list"
        values = list(piece.list.items) if is_list else [piece.json]
        if piece.partial and not values:
            # Nothing to cut: the next piece would have no item to continue.
            raise InvalidArgumentError(f"{field_name}.partial", "a list piece with no items cannot be partial")
        total += sum(len(v) for v in values)
        if total > max_bytes:
            raise ResourceExhaustedError("entries", f"hold more than {max_bytes} bytes in all")
        last = joined[-1] if joined else None
        continues = last is not None and last.key == piece.key and last.is_list == is_list
        if cut_open:
            if not continues or not values:
                raise InvalidArgumentError(field_name, "must continue the partial entry before it (same key and kind)")
            assert last is not None
            last.parts[-1] += values[0]
            last.parts.extend(values[1:])
        elif continues and is_list:
            assert last is not None
            last.parts.extend(values)
        else:
            joined.append(_Joined(piece.key, is_list, values))
        cut_open = piece.partial
    if cut_open:
        raise InvalidArgumentError("entries", "the last piece is partial: the stream ended inside an entry")
    return [
        state_pb.StateEntry(key=j.key, list=state_pb.JsonList(items=j.parts)) if j.is_list
        else state_pb.StateEntry(key=j.key, json=j.parts[0])
        for j in joined
    ]
