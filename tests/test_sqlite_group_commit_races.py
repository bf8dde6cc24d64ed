"""Group commit under hostile concurrency, over real gRPC on the embedded store: adds, deletes and
clears of many callers on one memory and on several, a request id reused inside one burst for
other messages, callers whose deadline passes mid-batch, and another program holding the file's
lock. What each caller was told must be what is stored: the etags the answers carry chain into
one history per memory, and that history replayed is the stored conversation."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import grpc

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.store.sqlite import SqliteStore


def sqlite_of(server: Any) -> SqliteStore:
    store = server.store
    while not isinstance(store, SqliteStore):
        store = store.inner
    return store


def text_msg(text: str) -> Any:
    return msg_to_proto(Msg.create(MsgRole.USER, text))


async def stored_texts(stub: pb_grpc.MemoryServiceStub, memory_id: str) -> tuple[list[str], str]:
    got = await stub.GetMessages(pb.GetMessagesRequest(memory_id=memory_id, page_size=1000))
    assert not got.next_page_token
    return [m.content[0].text.text for m in got.messages], got.etag


async def warm_up(stub: pb_grpc.MemoryServiceStub, store: SqliteStore) -> None:
    """A burst large enough that group commit's probe finds company: from here on writes gather."""
    await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="预热", kind=pb.MEMORY_KIND_IN_MEMORY))
    await asyncio.gather(*(stub.AddMessages(pb.AddMessagesRequest(memory_id="预热", messages=[text_msg(f"热{i}")]))
                           for i in range(40)))
    assert store.group_commit.stats.largest >= 2


async def test_mixed_adds_deletes_and_clears_of_many_callers_chain_into_the_stored_history(server_factory) -> None:
    """Per memory, every change acknowledged names the state before and after it; gathered in
    shared transactions, these must still form one chain from the empty memory to what a read
    answers, with no two changes claiming the same state before them, and replaying the chain
    must give the stored messages. A delete whose message moved is refused (ABORTED) amid them;
    a request id sent twice in one burst with other messages is
    refused for `request_id`, the first stored once."""
    server = await server_factory(long_term_enabled=False)
    store = sqlite_of(server)
    memories = [f"会话{k}" for k in range(4)]
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await warm_up(stub, store)
        start: dict[str, str] = {}
        for memory_id in memories:
            await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=memory_id, kind=pb.MEMORY_KIND_IN_MEMORY))
            start[memory_id] = (await stored_texts(stub, memory_id))[1]
        batches_before = store.group_commit.stats.batches

        # (memory, what, text, call)
        ops: list[tuple[str, str, str, Any]] = []
        for round_ in range(3):
            for memory_id in memories:
                for i in range(10):
                    text = f"{memory_id}·第{round_}轮·{i}"
                    ops.append((memory_id, "add", text, stub.AddMessages(pb.AddMessagesRequest(
                        memory_id=memory_id, request_id=f"m{memories.index(memory_id)}-{round_}-{i}", messages=[text_msg(text)]))))
                for i in range(2):
                    ops.append((memory_id, "delete", str(i), stub.DeleteMessage(
                        pb.DeleteMessageRequest(memory_id=memory_id, index=i))))
                # A delete of a message that is not where the caller thinks: refused, nothing done.
                ops.append((memory_id, "stale delete", "", stub.DeleteMessage(pb.DeleteMessageRequest(
                    memory_id=memory_id, index=0, expected_message_id="早已不在"))))
                # The same request id twice in one burst, for other messages.
                for variant in ("甲", "乙"):
                    text = f"{memory_id}·重复{round_}·{variant}"
                    ops.append((memory_id, "add", text, stub.AddMessages(pb.AddMessagesRequest(
                        memory_id=memory_id, request_id=f"m{memories.index(memory_id)}-again-{round_}", messages=[text_msg(text)]))))
                if round_ == 1:
                    ops.append((memory_id, "clear", "", stub.ClearMessages(pb.ClearMessagesRequest(memory_id=memory_id))))
        outcomes = await asyncio.gather(*(call for *_, call in ops), return_exceptions=True)
        assert store.group_commit.stats.batches - batches_before < len(ops) // 2, "the burst was not gathered"

        # A reused request id: one of the pair stored, the other refused, naming the field.
        for k in range(0, len(ops)):
            memory_id, what, text, _ = ops[k]
            if "重复" in text and text.endswith("甲"):
                first, second = outcomes[k], outcomes[k + 1]
                refused = [o for o in (first, second) if isinstance(o, grpc.aio.AioRpcError)]
                assert len(refused) == 1, (first, second)
                assert refused[0].code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "request_id" in (refused[0].details() or "")

        for (_, what, _, _), outcome in zip(ops, outcomes, strict=True):
            if what == "stale delete":
                assert isinstance(outcome, grpc.aio.AioRpcError) and outcome.code() == grpc.StatusCode.ABORTED, outcome

        for memory_id in memories:
            changes: dict[str, tuple[str, str, str]] = {}  # previous etag -> (etag, what, text)
            for (mid, what, text, _), outcome in zip(ops, outcomes, strict=True):
                if mid != memory_id or isinstance(outcome, grpc.aio.AioRpcError):
                    continue
                assert not isinstance(outcome, BaseException), outcome
                if what == "delete" and not outcome.deleted:
                    assert outcome.etag == outcome.previous_etag
                    continue
                assert outcome.etag and outcome.previous_etag and outcome.etag != outcome.previous_etag
                assert outcome.previous_etag not in changes, f"two changes of {memory_id} claim one state before them"
                changes[outcome.previous_etag] = (outcome.etag, what, text)
            replay: list[str] = []
            etag = start[memory_id]
            while etag in changes:
                etag, what, text = changes.pop(etag)
                if what == "add":
                    replay.append(text)
                elif what == "delete":
                    del replay[int(text)]
                else:
                    replay.clear()
            assert not changes, f"{len(changes)} acknowledged changes of {memory_id} are off the chain"
            texts, final = await stored_texts(stub, memory_id)
            assert final == etag
            assert texts == replay


async def test_callers_whose_deadline_passes_mid_burst_leave_nothing_acknowledged_lost(server_factory) -> None:
    """Adds to one memory, a third of them with a deadline that passes while their batch is
    gathered or waits for the lock another program holds: every acknowledged add is stored
    exactly once, one that timed out at most once, the count read equals what is stored, and the
    memory takes writes again once the lock is let go."""
    server = await server_factory(long_term_enabled=False)
    store = sqlite_of(server)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await warm_up(stub, store)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="限时", kind=pb.MEMORY_KIND_IN_MEMORY))

        built = {i: text_msg(f"限时·{i}") for i in range(120)}  # a retry sends the same message

        def add(i: int, timeout: float) -> Any:
            return stub.AddMessages(pb.AddMessagesRequest(memory_id="限时", request_id=f"deadline-{i}",
                                                          messages=[built[i]]), timeout=timeout)

        # Deadlines passing while batches gather (a millisecond or two).
        first = await asyncio.gather(*(add(i, 0.002 if i % 3 == 0 else 10) for i in range(60)),
                                     return_exceptions=True)
        other = sqlite3.connect(store.path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            held = asyncio.ensure_future(asyncio.gather(
                *(add(i, 0.3 if i % 3 == 0 else 20) for i in range(60, 120)), return_exceptions=True))
            await asyncio.sleep(0.6)
            assert not held.done()  # the others wait for the lock
            other.execute("COMMIT")
        finally:
            other.close()
        second = await asyncio.wait_for(held, 30)

        acked, unsure = set(), set()
        for i, outcome in enumerate([*first, *second]):
            if isinstance(outcome, grpc.aio.AioRpcError):
                assert outcome.code() == grpc.StatusCode.DEADLINE_EXCEEDED, outcome
                unsure.add(f"限时·{i}")
            else:
                assert not isinstance(outcome, BaseException), outcome
                acked.add(f"限时·{i}")
        assert len(acked) >= 80 and unsure
        texts, _ = await stored_texts(stub, "限时")
        assert len(texts) == len(set(texts))
        assert acked <= set(texts) <= acked | unsure
        counts = sorted(o.message_count for o in [*first, *second] if not isinstance(o, BaseException))
        assert len(set(counts)) == len(counts) and counts[-1] <= len(texts)

        # Retried, a timed-out add lands once: one its batch committed after all is replayed.
        landed = set(texts) & unsure
        retried = await asyncio.gather(*(add(i, 10) for i in range(120) if f"限时·{i}" in unsure))
        assert sum(r.replayed for r in retried) == len(landed)
        texts, _ = await stored_texts(stub, "限时")
        assert sorted(texts) == sorted(f"限时·{i}" for i in range(120))


async def test_two_tenants_writing_one_memory_id_in_shared_transactions_stay_apart(server_factory) -> None:
    """Two tenants' adds and deletes of a memory both call "共享", gathered into the same
    transactions: each tenant holds only its own messages, in the counts it was told."""
    keys = {"key-for-tenant-jia-0001": "jia", "key-for-tenant-yi-00001": "yi"}
    server = await server_factory(long_term_enabled=False, api_keys=keys)
    store = sqlite_of(server)
    clients = {tenant: AsyncMemoryClient(server.address, api_key=key, timeout=20) for key, tenant in keys.items()}
    try:
        for client in clients.values():
            await client.create_memory("共享")
        before = store.group_commit.stats.largest
        for round_ in range(3):
            calls = []
            for i in range(20):
                for tenant, client in clients.items():
                    calls.append(client.add_messages("共享", [Msg.create(MsgRole.USER, f"{tenant}·{round_}·{i}")]))
            for client in clients.values():
                calls.append(client.delete_message("共享", 0))
            outcomes = await asyncio.gather(*calls)
            assert all(o is True for o in outcomes[-2:])
        assert store.group_commit.stats.largest >= 2 and store.group_commit.stats.largest >= before
        for tenant, client in clients.items():
            texts = [m.text_content for m in await client.get_messages("共享")]
            assert len(texts) == 3 * 20 - 3 and all(t.startswith(f"{tenant}·") for t in texts), (tenant, texts[:3])
    finally:
        for client in clients.values():
            await client.close()


async def test_a_copy_kept_from_etags_stays_current_while_another_client_writes_concurrently(server_factory) -> None:
    """A client keeps a copy of a conversation from its own adds' etags and delta reads, while a
    second client adds and deletes at the same moments (gathered with its adds): extended only
    from answers whose previous etag is the copy's, and brought up to date by a conditional
    read, the copy is after every round what a fresh read gives."""
    server = await server_factory(long_term_enabled=False)
    async with AsyncMemoryClient(server.address, timeout=20) as mine, \
            AsyncMemoryClient(server.address, timeout=20) as theirs:
        await mine.create_memory("副本")
        read = await mine.read_messages("副本")
        copy, etag = [m.text_content for m in read.messages], read.etag
        deltas = full_reads = 0
        for round_ in range(6):
            sent = [f"我·{round_}·{i}" for i in range(8)]
            calls: list[Any] = [mine.add_messages_with_etags("副本", [Msg.create(MsgRole.USER, t)]) for t in sent]
            if round_ % 2:
                calls += [theirs.delete_message("副本", 0)]
            calls += [theirs.add_messages("副本", [Msg.create(MsgRole.ASSISTANT, f"他·{round_}·{i}")]) for i in range(3)]
            outcomes = await asyncio.gather(*calls)
            # Follow my own adds along the chain from the copy's state, as far as it goes.
            mine_added = dict(zip(sent, outcomes[:len(sent)], strict=True))
            moved = True
            while moved:
                moved = False
                for text, added in list(mine_added.items()):
                    if added.previous_etag == etag:
                        copy.append(text)
                        etag = added.etag
                        del mine_added[text]
                        moved = True
            read = await mine.read_messages("副本", if_none_match=etag, accept_delta=True)
            if read.delta:
                deltas += 1
                copy += [m.text_content for m in read.messages]
            elif not read.not_modified:
                full_reads += 1
                copy = [m.text_content for m in read.messages]
            etag = read.etag if not read.not_modified else etag
            fresh = await theirs.read_messages("副本")
            assert (copy, etag) == ([m.text_content for m in fresh.messages], fresh.etag), round_
        # Rounds with their deletes need a whole read; those with only adds came as deltas.
        assert full_reads <= 3 and deltas >= 1
