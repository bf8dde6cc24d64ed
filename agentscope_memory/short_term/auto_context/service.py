"""AutoContextMemory operations on stored memories: compress, the hook's reasoning input,
original and interaction histories, context reload, events and the plan note.

A compression reads the working history in one transaction, calls the summariser outside any
transaction, and commits in a second one. Compressions of one memory never overlap (a lock per
memory); messages appended meanwhile are kept after the compressed history, and any other
change in between aborts the commit (ABORTED) rather than losing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
from dataclasses import dataclass, field
from typing import AsyncIterator, Awaitable, Callable, Generic, Sequence, TypeVar

from agentscope_memory.errors import AbortedError, FailedPreconditionError, InvalidArgumentError
from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.messages import check_msg
from agentscope_memory.validation.text import MAX_SYSTEM_PROMPT_BYTES, check_plan, check_text
from agentscope_memory.short_term.auto_context import prompts
from agentscope_memory.short_term.auto_context.config import CL100K, IMPROVED, AutoContextConfig
from agentscope_memory.short_term.auto_context.engine import (
    CompressionEvent, Compressor, ContextState, Identity, PlanNote, Summarizer, interaction_messages,
)
from agentscope_memory.short_term.auto_context.kind import (
    EVENTS, KIND, OFFLOAD_PREFIX, ORIGINAL, WORKING, append_events, get_plan, get_totals, put_offload, read_events,
    set_plan, set_tokens,
)
from agentscope_memory.short_term.auto_context.tokens import Cl100kCounter, JavaEstimate, TokenCounter, estimate_tokens
from agentscope_memory.short_term.manager import MemoryManager
from agentscope_memory.message import Msg, MsgRole, TextBlock, msg_from_dict
from agentscope_memory.paging import Snapshot, cut_to_budget, read_within_budget
from agentscope_memory.store.codec import decode_msg, encode_msg, stored_bytes
from agentscope_memory.store.base import MemoryRecord, Tx


T = TypeVar("T")

DEFAULT_PAGE_SIZE = 1000
MAX_PAGE_SIZE = 10_000


@dataclass(frozen=True)
class Page(Generic[T]):
    """A page of a listing: its items, the next page's token ("" at the end) and, where the
    listing knows it, how many items there are in all."""

    items: list[T]
    next_page_token: str
    total_size: int = 0
    outcome: "CompressOutcome | None" = field(default=None)


# An item read for a page: its position (the key the next page starts after), the item and
# its size in bytes on the wire.
Positioned = tuple[int, T, int]


@dataclass(frozen=True)
class CompressOutcome:
    compressed: bool
    events: list[tuple[int, CompressionEvent]]
    tokens_before: int
    tokens_after: int
    message_count: int


def reload_texts(uuid: str) -> tuple[str, str]:
    """AgentScope-Java's `context_reload` texts: (error for a blank uuid, not-found text)."""
    return (
        "Error: UUID cannot be null or empty.",
        f"No messages found for UUID: {uuid}, The context may have been cleared or the UUID is invalid.",
    )


MAX_UNCHANGED = 10_000


class AutoContextService:
    def __init__(self, manager: MemoryManager, summarizer: Summarizer, identity: Identity | None = None) -> None:
        self._manager = manager
        self._summarizer = summarizer
        self._identity = identity or Identity()
        # Per memory, only while someone uses them (so they do not pile up over many memories):
        # the lock serialising compressions with its user count, and the condition watchers
        # wait on with its watcher count.
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, list[int]]] = {}
        self._changed: dict[tuple[str, str], tuple[asyncio.Condition, list[int]]] = {}
        self._counters: dict[str, TokenCounter] = {}
        # Improved profile: per memory, the digest of the last triggered check that changed
        # nothing. Its outcome is a function of the working messages, the config and the plan
        # only, so the same digest means the same "nothing to do" (skipped, no summariser call).
        # Kept in memory only: after a restart the first check simply runs again.
        self._unchanged: dict[tuple[str, str], bytes] = {}
        # The memory's shared pools rendered as messages (`pool/attachments.py`), set by the
        # service assembly; None: no pools.
        self.shared_context: Callable[[str, str], Awaitable[list[Msg]]] | None = None

    @property
    def store(self):
        return self._manager.store

    @staticmethod
    @contextlib.contextmanager
    def _use(table: dict, key: tuple[str, str], make):
        entry = table.get(key)
        if entry is None:
            entry = table[key] = (make(), [0])
        entry[1][0] += 1
        try:
            yield entry[0]
        finally:
            entry[1][0] -= 1
            if entry[1][0] == 0 and table.get(key) is entry:
                del table[key]

    @contextlib.asynccontextmanager
    async def _exclusive(self, tenant: str, memory_id: str):
        with self._use(self._locks, (tenant, memory_id), asyncio.Lock) as lock:
            async with lock:
                yield

    async def _notify(self, tenant: str, memory_id: str) -> None:
        entry = self._changed.get((tenant, memory_id))
        if entry is not None:
            async with entry[0]:
                entry[0].notify_all()

    def _counter(self, config: AutoContextConfig) -> TokenCounter:
        kind = CL100K if config.token_counter == CL100K else "java"
        if kind not in self._counters:
            self._counters[kind] = Cl100kCounter() if kind == CL100K else JavaEstimate()
        return self._counters[kind]

    @staticmethod
    def _record(tx: Tx, memory_id: str) -> MemoryRecord:
        record = tx.get_memory(memory_id)
        if record is None:
            from agentscope_memory.errors import NotFoundError

            raise NotFoundError(f"memory {memory_id!r} does not exist")
        if record.kind != KIND:
            raise FailedPreconditionError(f"memory {memory_id!r} is {record.kind}, not AUTO_CONTEXT")
        return record

    async def _read(self, tenant: str, memory_id: str, fn, small: bool = False):
        check_id(memory_id, "memory_id")
        return await self.store.run(tenant, lambda tx: fn(tx, self._record(tx, memory_id)), write=False, small=small)

    # -- compression ------------------------------------------------------------------------

    async def compress_if_needed(self, tenant: str, memory_id: str) -> CompressOutcome:
        check_id(memory_id, "memory_id")
        async with self._exclusive(tenant, memory_id):
            return await self._compress(tenant, memory_id)

    async def _compress(self, tenant: str, memory_id: str) -> CompressOutcome:
        def check(tx: Tx) -> tuple[MemoryRecord, int, dict[str, int]]:
            record = self._record(tx, memory_id)
            return record, tx.length(memory_id, WORKING), get_totals(tx, memory_id)

        record, count, totals = await self.store.run(tenant, check, write=False, small=True)
        tokens = int(totals["tokens"])
        config = AutoContextConfig.from_json(record.config_json)
        compressor = Compressor(config, self._summarizer, self._identity)
        # The O(1) path: running totals say the trigger is not reached.
        if not compressor.triggered(count, tokens):
            shown = int(totals.get("reported", tokens)) if config.token_counter == CL100K else tokens
            return CompressOutcome(False, [], shown, shown, count)

        def snapshot(tx: Tx) -> tuple[list[int], list[Msg], PlanNote | None, bytes]:
            rec = self._record(tx, memory_id)
            rows = tx.read(memory_id, WORKING)
            plan = get_plan(tx, memory_id)
            digest = hashlib.blake2b(rec.config_json.encode() + repr(plan).encode(), digest_size=16)
            for r in rows:
                digest.update(len(r.data).to_bytes(8, "big"))
                digest.update(r.data.encode() if isinstance(r.data, str) else r.data)
            return [r.seq for r in rows], [decode_msg(r.data) for r in rows], plan, digest.digest()

        seqs, working, plan, digest = await self.store.run(tenant, snapshot, write=False)
        key = (tenant, memory_id)
        if config.profile == IMPROVED and self._unchanged.get(key) == digest:
            shown = int(totals.get("reported", tokens)) if config.token_counter == CL100K else tokens
            return CompressOutcome(False, [], shown, shown, count)
        self._unchanged.pop(key, None)
        state = ContextState(list(working), plan=plan)
        counter = self._counter(config)
        failure: BaseException | None = None
        try:
            compressed = await compressor.compress_if_needed(state)
        except Exception as exc:  # noqa: BLE001 - committed as Java leaves it, then re-raised
            failure, compressed = exc, False
        if failure is not None and config.profile == IMPROVED:
            raise failure  # improved: a failed compression changes nothing
        changed_working = state.working is not working and state.working != working

        def commit(tx: Tx) -> list[tuple[int, CompressionEvent]]:
            self._record(tx, memory_id)
            current = tx.read(memory_id, WORKING)
            if [r.seq for r in current[: len(seqs)]] != seqs:
                raise AbortedError(f"memory {memory_id!r} changed during compression; try again")
            tail = [r.data for r in current[len(seqs):]]
            for uuid, msgs in state.offload.items():
                put_offload(tx, memory_id, uuid, msgs)
            append_events(tx, memory_id, state.events)
            if changed_working:
                tx.replace(memory_id, WORKING, [encode_msg(m) for m in state.working] + tail)
                tail_msgs = [decode_msg(d) for d in tail]
                reported = None
                if config.token_counter == CL100K:
                    reported = counter.count(state.working) + counter.count(tail_msgs)
                set_tokens(tx, memory_id, estimate_tokens(state.working) + estimate_tokens(tail_msgs), reported)
            if changed_working or state.events or state.offload:
                tx.touch_memory(memory_id)
            return read_events(tx, memory_id)[-len(state.events):] if state.events else []

        events = await self.store.run(tenant, commit)
        if config.profile == IMPROVED and not compressed and not changed_working and not state.events \
                and not state.offload:
            if len(self._unchanged) >= MAX_UNCHANGED:
                self._unchanged.clear()  # a bound, not a cache policy: a dropped entry costs one check
            self._unchanged[key] = digest
        if events:
            await self._notify(tenant, memory_id)
        if failure is not None:
            raise failure
        return CompressOutcome(compressed, events, counter.count(working), counter.count(state.working),
                               len(state.working))

    async def prepare_reasoning_input(
        self,
        tenant: str,
        memory_id: str,
        system_prompt: str | None,
        system_message: Msg | None = None,
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[Msg]:
        """What AutoContextHook hands the model on PreReasoningEvent: compress if needed, then
        the system message with the offload instruction, then the working history, a page at a
        time. Only the first page compresses; later pages read the state it left.

        `system_message` is the agent input's first SYSTEM message (Java keeps its name and
        metadata); `system_prompt` is the same given as plain text."""
        if system_prompt is not None and system_message is not None:
            raise InvalidArgumentError("system_message", "set at most one of system_prompt and system_message")
        if system_message is not None and system_message.role is not MsgRole.SYSTEM:
            raise InvalidArgumentError("system_message.role", "must be SYSTEM")
        shape = hashlib.sha256(
            json.dumps([system_prompt, None if system_message is None else encode_msg(system_message).hex()]).encode()
        ).hexdigest()
        outcome = None
        if not page_token:
            check_id(memory_id, "memory_id")
            self._page_size(page_size)
            if system_prompt is not None:
                check_text(system_prompt, "system_prompt", MAX_SYSTEM_PROMPT_BYTES)
            if system_message is not None:
                check_msg(system_message, "system_message")
            outcome = await self.compress_if_needed(tenant, memory_id)
        system: Msg | None = None
        if not page_token:
            if system_message is not None:
                system_prompt = system_message.text_content
            text = prompts.HOOK_INSTRUCTION if system_prompt is None else system_prompt + "\n\n" + prompts.HOOK_INSTRUCTION
            name = system_message.name if system_message is not None else "system"
            metadata = copy.deepcopy(system_message.metadata) if system_message is not None else {}
            blocks = [TextBlock(text)]
            if self.shared_context is not None:
                # The memory's shared pools, as a second block: the first stays what Java builds.
                shared = await self.shared_context(tenant, memory_id)
                if shared:
                    blocks.append(TextBlock("\n".join(m.text_content for m in shared)))
            system = Msg(self._identity.new_id(), name, MsgRole.SYSTEM, list(blocks), metadata,
                         self._identity.timestamp())

        def fetch(tx: Tx, after: int, limit: int) -> list[Positioned[Msg]]:
            rows = tx.read(memory_id, WORKING, after, limit)
            return [(r.seq, decode_msg(r.data), len(r.data)) for r in rows]

        lead = [] if system is None else [(0, system, len(encode_msg(system)))]
        page = await self._paged(tenant, memory_id, "reasoning", [page_size, shape], page_size, page_token,
                                 fetch, lead=lead)
        return Page(page.items, page.next_page_token, outcome=outcome)

    # -- reads ------------------------------------------------------------------------------

    @staticmethod
    def _page_size(requested: int) -> int:
        if requested < 0:
            raise InvalidArgumentError("page_size", "must not be negative")
        return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)

    async def _paged(
        self,
        tenant: str,
        memory_id: str,
        listing: str,
        shape: Sequence[str | int],
        page_size: int,
        page_token: str,
        fetch: Callable[[Tx, int, int], list[Positioned[T]]],
        *,
        lead: Sequence[Positioned[T]] = (),
        total: Callable[[Tx], int] | None = None,
    ) -> Page[T]:
        """One page of a listing of an AUTO_CONTEXT memory: at most `page_size` items and the
        byte budget, read from the state the first page read (ABORTED when it changed). The
        token is signed and bound to the tenant, the memory, the listing and `shape`."""
        check_id(memory_id, "memory_id")
        tokens = self._manager.tokens
        await tokens.ready()
        binding: list[str | int] = [tenant, memory_id, *shape]
        after, snapshot = 0, None
        if page_token:
            created_us, version, after = tokens.read(page_token, listing, binding, 3)
            snapshot = Snapshot(created_us, version)
        size = self._page_size(page_size)
        budget = self._manager.limits.max_page_bytes

        def read(tx: Tx) -> tuple[list[Positioned[T]], int, MemoryRecord]:
            record = self._record(tx, memory_id)
            if snapshot is not None:
                tokens.check_snapshot(memory_id, snapshot, record)
            found = read_within_budget(lambda a, n: fetch(tx, a, n), lambda item: item[0], lambda item: item[2],
                                       after, size + 1, budget)
            return found, (total(tx) if total else 0), record

        found, count, record = await self.store.run(tenant, read, write=False, small=size <= 1000)
        found = [*lead, *found]
        more = len(found) > size
        found = found[:size]
        kept = cut_to_budget(found, lambda item: item[2], budget)
        more = more or kept < len(found)
        found = found[:kept]
        token = ""
        if more:
            now = Snapshot.of(record)
            token = tokens.issue(listing, binding, [now.created_us, now.version, found[-1][0]])
        return Page([item for _, item, _ in found], token, count)

    async def original_page(
        self, tenant: str, memory_id: str, page_size: int = 0, page_token: str = ""
    ) -> Page[bytes]:
        """A page of the original (uncompressed) history, in stored form."""

        def fetch(tx: Tx, after: int, limit: int) -> list[Positioned[bytes]]:
            return [(r.seq, stored_bytes(r.data), len(r.data)) for r in tx.read(memory_id, ORIGINAL, after, limit)]

        return await self._paged(tenant, memory_id, "original", [page_size], page_size, page_token, fetch,
                                 total=lambda tx: tx.length(memory_id, ORIGINAL))

    async def interaction(
        self, tenant: str, memory_id: str, page_size: int = 0, page_token: str = ""
    ) -> Page[Msg]:
        """Java `getInteractionMsgs`, a page at a time: USER messages and final responses."""

        def fetch(tx: Tx, after: int, limit: int) -> list[Positioned[Msg]]:
            found: list[Positioned[Msg]] = []
            while len(found) < limit:
                rows = tx.read(memory_id, ORIGINAL, after, 64)
                if not rows:
                    break
                for row in rows:
                    msgs = interaction_messages([decode_msg(row.data)])
                    if msgs:
                        found.append((row.seq, msgs[0], len(row.data)))
                after = rows[-1].seq
            return found[:limit]

        return await self._paged(tenant, memory_id, "interaction", [page_size], page_size, page_token, fetch)

    async def reload(
        self, tenant: str, memory_id: str, uuid: str, page_size: int = 0, page_token: str = ""
    ) -> tuple[Page[Msg], bool]:
        """The `context_reload` tool: the offloaded messages, or AgentScope's text when none."""
        blank, missing = reload_texts(uuid)

        def text_msg(text: str) -> Msg:
            return Msg(self._identity.new_id(), None, MsgRole.USER, [TextBlock(text)], {}, self._identity.timestamp())

        if not uuid or not uuid.strip():
            await self._read(tenant, memory_id, lambda tx, record: None, small=True)
            return Page([text_msg(blank)], ""), False
        check_id(uuid, "working_context_offload_uuid")
        present = await self._read(tenant, memory_id, lambda tx, _: tx.kv_get(memory_id, OFFLOAD_PREFIX + uuid) is not None,
                                   small=True)
        if not present and not page_token:
            return Page([text_msg(missing)], ""), False

        def fetch(tx: Tx, after: int, limit: int) -> list[Positioned[Msg]]:
            text = tx.kv_get(memory_id, OFFLOAD_PREFIX + uuid)
            items = [] if text is None else json.loads(text)
            # Positions count from 1, so that "after 0" is the start.
            return [(i + 1, msg_from_dict(d), len(json.dumps(d))) for i, d in enumerate(items[after:after + limit], after)]

        return await self._paged(tenant, memory_id, "reload", [page_size, uuid], page_size, page_token, fetch), True

    async def offloads(
        self, tenant: str, memory_id: str, after_uuid: str = "", limit: int = DEFAULT_PAGE_SIZE
    ) -> tuple[list[tuple[str, int]], int]:
        """A page of the memory's offloaded contexts, in uuid order after `after_uuid` (""
        for the first): (uuid, how many messages) each, and how many there are in all. The
        offloaded messages themselves are not read, so a memory with thousands of large
        offloads lists them as fast as a few."""
        if after_uuid:
            check_id(after_uuid, "after_uuid")
        if not 0 < limit <= MAX_PAGE_SIZE:
            raise InvalidArgumentError("limit", f"must be from 1 to {MAX_PAGE_SIZE}, not {limit}")

        def read(tx: Tx, _: MemoryRecord) -> tuple[list[tuple[str, int]], int]:
            found = tx.kv_array_lengths(memory_id, OFFLOAD_PREFIX, OFFLOAD_PREFIX + after_uuid, limit)
            return [(key[len(OFFLOAD_PREFIX):], count) for key, count in found], tx.kv_count(memory_id, OFFLOAD_PREFIX)

        return await self._read(tenant, memory_id, read)

    async def events(
        self, tenant: str, memory_id: str, after_seq: int = 0, page_size: int = 0, page_token: str = ""
    ) -> Page[tuple[int, CompressionEvent]]:
        if after_seq < 0:
            raise InvalidArgumentError("after_sequence", "must not be negative")

        def fetch(tx: Tx, after: int, limit: int) -> list[Positioned[tuple[int, CompressionEvent]]]:
            rows = tx.read(memory_id, EVENTS, max(after, after_seq), limit)
            return [(r.seq, (r.seq, CompressionEvent.from_dict(json.loads(r.data))), len(r.data)) for r in rows]

        return await self._paged(tenant, memory_id, "events", [page_size, after_seq], page_size, page_token, fetch)

    async def all_events(self, tenant: str, memory_id: str, after_seq: int = 0) -> list[tuple[int, CompressionEvent]]:
        """Every event after `after_seq`, in one read (for the in-process watch)."""
        if after_seq < 0:
            raise InvalidArgumentError("after_sequence", "must not be negative")
        return await self._read(tenant, memory_id, lambda tx, _: read_events(tx, memory_id, after_seq))

    async def watch(self, tenant: str, memory_id: str, after_seq: int = 0) -> AsyncIterator[tuple[int, CompressionEvent]]:
        """Events after `after_seq`, then new ones as they are recorded (polled every second
        too, so events committed by another replica arrive)."""
        last = after_seq
        with self._use(self._changed, (tenant, memory_id), asyncio.Condition) as condition:
            while True:
                for seq, event in await self.all_events(tenant, memory_id, last):
                    last = seq
                    yield seq, event
                async with condition:
                    try:
                        await asyncio.wait_for(condition.wait(), 1.0)
                    except asyncio.TimeoutError:
                        pass

    async def attach_plan(self, tenant: str, memory_id: str, plan: PlanNote | None) -> None:
        check_id(memory_id, "memory_id")
        if plan is not None:
            check_plan(plan)

        def attach(tx: Tx) -> None:
            self._record(tx, memory_id)
            set_plan(tx, memory_id, plan)
            tx.touch_memory(memory_id)

        await self.store.run(tenant, attach, small=True)
