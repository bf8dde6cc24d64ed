"""The server stops while adds sent over `WatchMessages` streams are running: what a client that
pipelines its adds relies on. Every add that was answered is stored (read back after a restart on
the same data dir); every unanswered one, sent again as a unary `AddMessages` with the same
`request_id` to the restarted server (as the Java client's `MessageWatch` does), ends up stored
exactly once and in order; the stream ends with UNAVAILABLE; the drain finishes within its grace
(an add it waited for included); and nothing is logged as an error."""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2 as pb
from agentscope_memory._proto.agentscope.memory.v1 import memory_service_pb2_grpc as pb_grpc
from agentscope_memory.convert.to_proto import msg_to_proto
from agentscope_memory.message import Msg, MsgRole
from conftest import ServerProcess

# Far more adds than can be applied between the first answers and the stop: the stop lands mid-way.
PIPELINED = 400


def adds_for(memory_id: str, n: int) -> list[pb.AddMessagesRequest]:
    # Built once: a message gets its id and timestamp when created, and a resend must be the same add.
    return [pb.AddMessagesRequest(memory_id=memory_id, request_id=f"{memory_id}-r{i}",
                                  messages=[msg_to_proto(Msg.create(MsgRole.USER, f"{memory_id} t{i} 消息"))])
            for i in range(n)]


def texts(messages) -> list[str]:
    return [m.content[0].text.text for m in messages]


def sent_texts(adds: list[pb.AddMessagesRequest]) -> list[str]:
    return [t for a in adds for t in texts(a.messages)]


@dataclass
class PipelinedWatch:
    """One client's watch with its adds sent without waiting for answers, as `pipelinedAdds` does."""

    memory_id: str
    adds: list[pb.AddMessagesRequest]
    answered: list[int] = field(default_factory=list)
    ended: grpc.aio.AioRpcError | None = None

    sent: asyncio.Event = field(default_factory=asyncio.Event)
    answers_seen: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stub: pb_grpc.MemoryServiceStub, answers_wanted: int = 0) -> None:
        """Sends every add (add_id = its index), reads answers until the stream ends; `sent` and
        `answers_seen` (`answers_wanted` answers read) tell how far it is."""
        call = stub.WatchMessages()
        await call.write(pb.WatchMessagesRequest(memory_id=self.memory_id, renewal=1))
        assert (await call.read()).started.accepts_adds

        async def send() -> None:
            for i, request in enumerate(self.adds):
                await call.write(pb.WatchMessagesRequest(add=request, add_id=i))
            # The server stops only once every add is written: grpcio's asyncio client reports a
            # write failing as the call ends as INTERNAL, hiding the server's status (grpc/grpc#36066).
            self.sent.set()

        sending = asyncio.ensure_future(send())
        try:
            while True:
                answer = await call.read()
                assert answer != grpc.aio.EOF, "the stream ended without a status"
                assert answer.WhichOneof("event") == "added", answer
                added = answer.added
                assert added.WhichOneof("result") == "response", added
                assert added.add_id == len(self.answered), "answers come in the order of the adds"
                self.answered.append(added.add_id)
                if len(self.answered) == answers_wanted:
                    self.answers_seen.set()
        except grpc.aio.AioRpcError as exc:
            self.ended = exc
        finally:
            sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)

    def check_ended_unavailable(self) -> None:
        assert self.ended is not None
        assert self.ended.code() == grpc.StatusCode.UNAVAILABLE, (self.ended.code(), self.ended.details())
        assert "shutting down" in (self.ended.details() or "")


async def resend_unanswered(stub: pb_grpc.MemoryServiceStub, watch: PipelinedWatch) -> int:
    """What the client does with the adds its broken stream left unanswered: each again, in order,
    as `AddMessages` with the same request id. Returns how many the server had already stored."""
    replayed = 0
    for i in range(len(watch.answered), len(watch.adds)):
        reply = await stub.AddMessages(watch.adds[i], timeout=30)
        replayed += reply.replayed
    return replayed


async def stored_texts(stub: pb_grpc.MemoryServiceStub, memory_id: str) -> list[str]:
    """Every message of the memory, page after page."""
    collected: list[str] = []
    token = ""
    while True:
        page = await stub.GetMessages(pb.GetMessagesRequest(memory_id=memory_id, page_size=1000, page_token=token))
        collected += texts(page.messages)
        token = page.next_page_token
        if not token:
            return collected


async def check_after_restart(stub: pb_grpc.MemoryServiceStub, watch: PipelinedWatch) -> int:
    """Answered adds are stored; after the resend every add is stored once, in order. Returns how
    many unanswered adds the stopping server had stored all the same."""
    stored = await stored_texts(stub, watch.memory_id)
    everything = sent_texts(watch.adds)
    answered = sent_texts(watch.adds[:len(watch.answered)])
    # Applied in order: what is stored is a beginning of what was sent, answered ones included.
    assert stored == everything[:len(stored)]
    assert len(stored) >= len(answered), (len(stored), len(answered))
    replayed = await resend_unanswered(stub, watch)
    assert replayed == len(stored) - len(answered), "an add stored without an answer is replayed, not added again"
    assert await stored_texts(stub, watch.memory_id) == everything
    return replayed


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


class GatedStore:
    """Wraps the server's store: write transactions from the one numbered `hold_at` (from 0) on
    wait at a gate, so adds stay in flight (and more queued behind them) while the test stops the
    server."""

    def __init__(self, inner, hold_at: int) -> None:
        self.inner = inner
        self.hold_at = hold_at
        self.writes = 0
        self.gate = asyncio.Event()
        self.holding = asyncio.Event()
        self.closed = False

    async def run(self, tenant, fn, *, write=True, small=False):
        if write:
            number = self.writes
            self.writes += 1
            if number >= self.hold_at:
                self.holding.set()
                await self.gate.wait()
        return await self.inner.run(tenant, fn, write=write, small=small)

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()


async def test_an_add_running_when_the_server_stops_finishes_and_a_resend_is_replayed(
        server_factory, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    data = tmp_path / "data"
    server = await server_factory(data_dir=data, coherent_cache_lease_s=30.0)
    answered_first = 5
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id="m", kind=pb.MEMORY_KIND_IN_MEMORY))
        # The add after the first few is held inside its write while the server begins to stop.
        gated = GatedStore(server.service.memories.store, hold_at=answered_first)
        server.service.memories.store = server.service.store = gated
        watch = PipelinedWatch("m", adds_for("m", 50))
        running = asyncio.ensure_future(watch.run(stub))
        try:
            await asyncio.wait_for(gated.holding.wait(), 30)
            await asyncio.wait_for(watch.sent.wait(), 30)
            # The lease (30 s) outlasts the grace: the add must not wait for its own ended watch.
            stopping = asyncio.ensure_future(server.stop(10))
            # The stream ends at once, UNAVAILABLE, while its add is still running...
            await asyncio.wait_for(running, 30)
            watch.check_ended_unavailable()
            assert watch.answered == list(range(answered_first))
            assert not stopping.done() and not gated.closed and server.drain.in_flight == 1
        finally:
            gated.gate.set()
        # ...and the add finishes before the store closes: the drain waited for it.
        await asyncio.wait_for(stopping, 60)
        assert gated.closed
    _check_drained_within_grace(caplog)

    again = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(again.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        # The add that was running is stored though never answered: its resend is a replay.
        assert await check_after_restart(stub, watch) == 1
    assert errors_logged(caplog) == []


async def test_stopping_mid_pipeline_loses_and_duplicates_no_add(
        server_factory, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    data = tmp_path / "data"
    # A lease longer than the grace: a drain that waited for a lease would overrun it.
    server = await server_factory(data_dir=data, coherent_cache_lease_s=30.0)
    memories = [f"m{i}" for i in range(4)]
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        # Writes pause once the streams have had about 60 adds each (the server runs on this
        # test's event loop and would otherwise apply all 400 before the stop lands).
        for memory_id in memories:
            await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=memory_id, kind=pb.MEMORY_KIND_IN_MEMORY))
        gated = GatedStore(server.service.memories.store, hold_at=4 * 60)
        server.service.memories.store = server.service.store = gated
        watches, running = await _start_pipelines(stub, memories, create=False)
        stopping = asyncio.ensure_future(server.stop(10))
        # The streams end at once, UNAVAILABLE, with adds running (held) and more queued...
        await asyncio.wait_for(asyncio.gather(*running), 30)
        gated.gate.set()
        # ...the running ones finish before the stores close, the queued ones are dropped.
        await asyncio.wait_for(stopping, 60)
    for watch in watches:
        watch.check_ended_unavailable()
        assert 20 <= len(watch.answered) < PIPELINED
    _check_drained_within_grace(caplog)

    again = await server_factory(data_dir=data)
    async with grpc.aio.insecure_channel(again.address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        for watch in watches:
            await check_after_restart(stub, watch)
    assert errors_logged(caplog) == []


@pytest.mark.slow
async def test_sigterm_mid_pipeline_loses_and_duplicates_no_add(tmp_path: Path) -> None:
    data = tmp_path / "data"
    memories = [f"m{i}" for i in range(4)]
    config = tmp_path / "server.toml"
    config.write_text("shutdown_grace_s = 10\ncoherent_cache_lease_s = 30\nlong_term_enabled = false\n")
    server = ServerProcess(data, None, "--config", str(config))
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            watches, running = await _start_pipelines(stub, memories)
            server.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(asyncio.gather(*running), 60)
        assert await asyncio.to_thread(server.proc.wait, 60) == 0
        for watch in watches:
            watch.check_ended_unavailable()
            assert 20 <= len(watch.answered) < PIPELINED
        log = server.log_path.read_text()
        assert " drained" in log and "grace period over" not in log, log[-2000:]
        assert " ERROR " not in log and "Traceback" not in log, log[-4000:]
    finally:
        server.close()

    again = ServerProcess(data, None, "--config", str(config))
    try:
        async with grpc.aio.insecure_channel(again.address) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            for watch in watches:
                await check_after_restart(stub, watch)
        log = again.log_path.read_text()
        assert " ERROR " not in log and "Traceback" not in log, log[-4000:]
    finally:
        again.close()


async def _start_pipelines(stub, memories: list[str], create: bool = True) -> tuple[list[PipelinedWatch], list[asyncio.Future]]:
    """A watch pipelining adds to each new memory of `memories` (created first unless `create` is
    false), returned once every stream has answers and adds still to go (so a stop that begins
    then lands mid-pipeline)."""
    for memory_id in memories if create else []:
        await stub.CreateMemory(pb.CreateMemoryRequest(memory_id=memory_id, kind=pb.MEMORY_KIND_IN_MEMORY))
    watches = [PipelinedWatch(m, adds_for(m, PIPELINED)) for m in memories]
    running = [asyncio.ensure_future(w.run(stub, answers_wanted=20)) for w in watches]
    await asyncio.wait_for(asyncio.gather(*(w.answers_seen.wait() for w in watches), *(w.sent.wait() for w in watches)), 60)
    return watches, running


def _check_drained_within_grace(caplog: pytest.LogCaptureFixture) -> None:
    """The server logged that it drained (no call cancelled at the end of its grace) and no error."""
    messages = [r.getMessage() for r in caplog.records if r.name == "agentscope_memory_server"]
    assert "drained" in messages and "grace period over; cancelling the calls left" not in messages
    assert errors_logged(caplog) == []
