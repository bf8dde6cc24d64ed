"""State entries cut into stream pieces under a byte budget and joined back, unchanged."""

from __future__ import annotations

import pytest

from agentscope_memory._proto.agentscope.memory.v1 import state_service_pb2 as state_pb
from agentscope_memory.convert.state_chunks import join_pieces, split_entries
from agentscope_memory.errors import InvalidArgumentError, ResourceExhaustedError
from agentscope_memory.paging import PageTokens, cut_to_budget, read_within_budget

BUDGET = 4096


def entries() -> list[state_pb.StateEntry]:
    text = "中文😀é" * 3000 + "end"  # 3-, 4- and 2-byte characters: cuts must fall between them
    return [
        state_pb.StateEntry(key="autoContextMemory_workingMessages", list=state_pb.JsonList(
            items=[f'"{i} 消息"' for i in range(50)] + [f'"{text}"'] + ['"after"'])),
        state_pb.StateEntry(key="autoContextMemory_originalMessages", list=state_pb.JsonList(items=[])),
        state_pb.StateEntry(key="autoContextMemory_offloadContext", json='{"u": "' + text * 2 + '"}'),
        state_pb.StateEntry(key="autoContextMemory_compressionEvents", list=state_pb.JsonList(items=['{"a":1}'])),
    ]


def test_pieces_fit_the_budget_and_join_to_the_same_entries() -> None:
    chunks = split_entries(entries(), BUDGET)
    assert len(chunks) > 10
    for chunk in chunks:
        assert sum(e.ByteSize() for e in chunk) <= BUDGET + 256
    assert join_pieces([e for chunk in chunks for e in chunk], 10**9) == entries()


def test_an_empty_state_is_one_empty_piece_and_an_empty_list_survives() -> None:
    assert split_entries([], BUDGET) == [[]]
    empty = [state_pb.StateEntry(key="memory_messages", list=state_pb.JsonList())]
    joined = join_pieces([e for c in split_entries(empty, BUDGET) for e in c], 100)
    assert joined == empty and joined[0].HasField("list")


def test_pieces_that_do_not_fit_together_are_rejected() -> None:
    cut = state_pb.StateEntry(key="a", json="{", partial=True)
    with pytest.raises(InvalidArgumentError, match="partial"):
        join_pieces([cut], 100)
    with pytest.raises(InvalidArgumentError, match="continue"):
        join_pieces([cut, state_pb.StateEntry(key="b", json="}")], 100)
    with pytest.raises(ResourceExhaustedError, match="entries"):
        join_pieces([state_pb.StateEntry(key="a", json="x" * 101)], 100)
    # A partial list piece with no items has no item to cut (it was an IndexError: INTERNAL
    # from StreamLoadState), whether the stream starts with it or it follows a piece of the list.
    empty_cut = state_pb.StateEntry(key="a", list=state_pb.JsonList(), partial=True)
    rest = state_pb.StateEntry(key="a", list=state_pb.JsonList(items=["1"]))
    for pieces in ([empty_cut, rest], [rest, empty_cut, rest]):
        with pytest.raises(InvalidArgumentError, match="cannot be partial") as error:
            join_pieces(pieces, 100)
        assert error.value.field.endswith(".partial")


def test_a_page_keeps_its_first_item_and_stops_at_the_budget() -> None:
    assert cut_to_budget([5000, 1], lambda n: n, 4096) == 1
    assert cut_to_budget([100] * 100, lambda n: n, 1000) == 9
    reads: list[tuple[int, int]] = []

    def fetch(after: int, limit: int) -> list[int]:
        reads.append((after, limit))
        return list(range(after + 1, min(after + 1 + limit, 10_000)))

    got = read_within_budget(fetch, lambda p: p, lambda p: 1000, 0, 1001, 4096)
    # One batch of 16 exceeds the budget: nothing more of the 10 000 items is read.
    assert reads == [(0, 16)] and len(got) == 16


async def test_a_token_of_another_listing_or_binding_does_not_verify() -> None:
    tokens = PageTokens(None, secret="秘密")
    await tokens.ready()
    token = tokens.issue("original", ["t", "记忆", 10], [1, 2, 3])
    assert tokens.read(token, "original", ["t", "记忆", 10], 3) == [1, 2, 3]
    for listing, binding in [("events", ["t", "记忆", 10]), ("original", ["t", "记忆", 11]),
                             ("original", ["t2", "记忆", 10]), ("original", ["t", "记忆", "10"])]:
        with pytest.raises(InvalidArgumentError, match="page_token: invalid or expired"):
            tokens.read(token, listing, binding, 3)
    other = PageTokens(None, secret="另一个秘密")
    await other.ready()
    with pytest.raises(InvalidArgumentError):
        other.read(token, "original", ["t", "记忆", 10], 3)
