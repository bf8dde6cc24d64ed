"""AgentScope-Python 1.x (1.0.21): a server-side conversation as a `MemoryBase`.

    from agentscope_memory.agentscope_adapters.v1_memory import RemoteMemory

    memory = RemoteMemory("127.0.0.1:50051", "chat-42")
    agent = ReActAgent(..., memory=memory)

Messages live in the server's short-term memory `memory_id` (gRPC), so they survive the
process and other clients can read them. Each stored message carries its text as a text block
(readable by the Java clients and long-term recording) and AgentScope-Python's own message
JSON (`Msg.to_dict()`) with its marks in its metadata, so it comes back exactly as it was
added: Python's message JSON differs from Java's (content may be a plain string, roles are
lower case). A delete, a delete by mark and a mark change are one server-side call each
(`DeleteMessages`, `UpdateMessageMarks`) that sends only the ids or marks and answers only
counts and the deleted ids, however long the conversation; the server edits the marks where
this adapter has always stored them, in one transaction. Only what the server refuses to take
in one call (more than 1000 ids or marks, a mark over 1 KiB) or a server without those calls
falls back to rewriting the conversation in one step: the whole list is replaced atomically,
and only if nobody changed it since it was read (otherwise it is read again and the change
made again), so a message another client added meanwhile is kept and a failure leaves the
conversation as it was. An add of more than one AddMessages call
takes (a whole earlier conversation) is appended the same way, all or nothing.

ReActAgent reads the whole conversation (`get_memory`) at every reasoning step, and an add must
skip the ids already stored: both answer from one copy of the stored messages kept at an etag
(`_Copy`). Each read sends the copy's etag and receives nothing when nothing changed, only the
added messages when messages were only added, and the whole conversation after anything else
(another client's delete, mark change, clear or load), so another client's change is seen at
the next read and a read costs one small round trip however long the conversation. Its own
adds, deletes, mark changes, clears and loads bring the copy to the state their answers' etags
name, by making the same change to it, so the next read receives nothing of them.

The module's state is the memory id and the compressed summary; `JSONSession` saves and loads
it, and a loaded module reads the same server-side conversation. A session saved with
InMemoryMemory (its messages and marks) loads too, replacing the server-side conversation, so
an application moves to this memory without losing its saved conversations.
"""

from __future__ import annotations

import dataclasses
import functools

from typing import Any, Callable, Sequence

from agentscope.memory import MemoryBase
from agentscope.message import Msg as PyMsg

from agentscope_memory.agentscope_adapters.per_loop import PerLoop
from agentscope_memory.client import AsyncMemoryClient
from agentscope_memory.client.messages import MarksUpdated, MessagesDeleted
from agentscope_memory.errors import AbortedError, FailedPreconditionError, UnimplementedError
from agentscope_memory.message import Msg, MsgRole, TextBlock
from agentscope_memory.convert.from_proto import entry_from_proto, msg_from_proto
from agentscope_memory.convert.to_proto import entry_to_proto, msg_to_proto
from agentscope_memory.session.state import MEMORY_MESSAGES, StateEntry, messages_from_items, messages_to_items
from agentscope_memory.short_term.marks import MARKS_METADATA_KEY, MAX_MARK_BYTES, MAX_SELECTED, marks_of, remark_message
from agentscope_memory.validation.text import MAX_NAME_BYTES

# Where a stored message keeps AgentScope-Python's own JSON and marks (the server edits the
# marks there: `agentscope_memory.short_term.marks`).
METADATA_KEY = MARKS_METADATA_KEY
_ROLES = {"user": MsgRole.USER, "assistant": MsgRole.ASSISTANT, "system": MsgRole.SYSTEM}
# How often a rewrite is tried again when another client changed the conversation meanwhile.
REWRITE_ATTEMPTS = 8
# At most this much is added with one AddMessages call (a stock server takes 1000 messages,
# 32 MiB); more is appended by a rewrite, so the add is still all or nothing.
ADD_BATCH_MESSAGES = 500
ADD_BATCH_BYTES = 8 * 1024 * 1024

Entries = list[tuple[PyMsg, list[str]]]


def _stored(msg: PyMsg, marks: list[str]) -> Msg:
    text = msg.get_text_content() or ""
    return Msg(id=msg.id, name=msg.name, role=_ROLES.get(msg.role, MsgRole.USER),
               content=[TextBlock(text)] if text else [],
               metadata={METADATA_KEY: {"msg": msg.to_dict(), "marks": list(marks)}},
               timestamp=msg.timestamp)


def _remarked(stored: Msg, msg: PyMsg, marks: list[str]) -> Msg:
    own = stored.metadata.get(METADATA_KEY)
    kept = own["msg"] if isinstance(own, dict) and isinstance(own.get("msg"), dict) else msg.to_dict()
    return dataclasses.replace(stored, metadata={**stored.metadata, METADATA_KEY: {"msg": kept, "marks": list(marks)}})


def _fresh(value: Any) -> Any:
    """A copy of a JSON value sharing nothing with it: a message handed to the caller is its own
    (InMemoryMemory's caller may change what it got; here that must not change the kept copy of
    what the server holds). Decoded JSON holds no mutable values but dicts and lists, and no
    cycles, so `deepcopy`'s memo and dispatch are not needed: this copies a message in about
    half its time (3.6 against 8.4 µs), which ReActAgent pays for every message at every step."""
    kind = type(value)
    if kind is dict:
        return {key: _fresh(item) for key, item in value.items()}
    if kind is list:
        return [_fresh(item) for item in value]
    return value


def _own(stored: Msg) -> dict[str, Any] | None:
    """AgentScope-Python's own JSON of a stored message (None: another client wrote it)."""
    own = stored.metadata.get(METADATA_KEY)
    return own if isinstance(own, dict) and isinstance(own.get("msg"), dict) else None


def _marks_of(stored: Msg) -> list[str]:
    """The marks `_loaded` gives a stored message, without building the message."""
    own = _own(stored)
    return list(own.get("marks") or []) if own is not None else marks_of(stored)


def _loaded(stored: Msg) -> tuple[PyMsg, list[str]]:
    own = _own(stored)
    if own is not None:
        return PyMsg.from_dict(_fresh(own["msg"])), _marks_of(stored)
    # Written by another client (e.g. Java): rebuilt from role and text, with the stored id and
    # time, so it is the same message at every read: deletable and markable by id, and skipped
    # by an add of that id (a new id at each read made it neither). The server marks such a
    # message without writing its AgentScope JSON (only the marks).
    role = (stored.role or MsgRole.USER).value.lower()
    role = role if role in _ROLES else "assistant"
    msg = PyMsg(stored.name or role, stored.text_content, role, timestamp=stored.timestamp or None)
    if stored.id:
        msg.id = stored.id
    return msg, marks_of(stored)


def _known_id(stored: Msg) -> str | None:
    """The id `_loaded` gives a stored message (the one an add of the same id is skipped for)."""
    own = _own(stored)
    if own is not None:
        known = own["msg"].get("id")
        return known if isinstance(known, str) else None
    return stored.id or None


def _as_added(msgs: Sequence[Msg]) -> list[Msg]:
    """Messages this client added, as a read returns them: what went over the wire and back
    (JSON metadata, proto fields), so the copy equals what a read would have given."""
    return [msg_from_proto(msg_to_proto(m), newer_kinds=True) for m in msgs]


def _as_loaded(items: list[Any]) -> list[Msg]:
    """Messages this client loaded (LoadState items), as a read returns them: the server reads
    the items as it reads any state (`messages_from_items`) and stores those messages."""
    sent = entry_from_proto(entry_to_proto(StateEntry(MEMORY_MESSAGES, items=items)), 0)
    return _as_added(messages_from_items(sent))


@dataclasses.dataclass
class _Copy:
    """The stored messages at the state `etag` names, as a read returns them, and the ids an add
    skips (`_known_id` of each). Brought up to date by what was added since (a delta read, or
    this client's own add when it was the only change), by the same change this client's own
    delete or mark change made when it was the only change (the server answers the state before
    and after), and replaced after this client's own rewrite, clear or load (whose answer names
    the state it left, which the client wrote); anything else (another client's delete, mark
    change or clear) is read whole again, so nobody's change leaves here a message the server no
    longer holds, or holds otherwise."""

    etag: str
    stored: list[Msg]
    ids: set[str]

    @classmethod
    def of(cls, etag: str, stored: Sequence[Msg]) -> _Copy:
        return cls(etag, list(stored), {i for i in map(_known_id, stored) if i is not None})

    def extend(self, etag: str, added: Sequence[Msg]) -> None:
        self.stored.extend(added)
        self.ids.update(i for i in map(_known_id, added) if i is not None)
        self.etag = etag

    def replace(self, etag: str, stored: list[Msg]) -> None:
        self.stored = stored
        self.ids = {i for i in map(_known_id, stored) if i is not None}
        self.etag = etag


def _from_state_item(item: Any) -> tuple[PyMsg, list[str]]:
    """One item of InMemoryMemory's `content` state, read as InMemoryMemory reads it."""
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return PyMsg.from_dict(item[0]), _marks(item[1], "a list of strings")
    if isinstance(item, dict):  # AgentScope's older layout: the message alone
        return PyMsg.from_dict(item), []
    raise ValueError("Invalid item format in state_dict for InMemoryMemory.")


def _server_takes(values: Sequence[str], *, marks: bool) -> bool:
    """Whether one DeleteMessages / UpdateMessageMarks call takes these ids or marks (else the
    change is made by a rewrite: InMemoryMemory takes any number, and marks of any length)."""
    limit = MAX_MARK_BYTES if marks else MAX_NAME_BYTES
    return len(values) <= MAX_SELECTED and all(0 < len(v.encode("utf-8", "surrogatepass")) <= limit or (marks and not v)
                                               for v in values)


def _fits_one_add(msgs: Sequence[Msg]) -> bool:
    """Whether one AddMessages call of a stock server takes `msgs` (it refuses more than 1000
    messages or 32 MiB; InMemoryMemory takes a whole earlier conversation at once)."""
    return len(msgs) <= ADD_BATCH_MESSAGES and sum(msg_to_proto(m).ByteSize() for m in msgs) <= ADD_BATCH_BYTES


def _marks(marks: Any, allowed: str, *, none_is_empty: bool = False) -> list[str]:
    """Marks as a list, refused as InMemoryMemory refuses them (`allowed` says what is, in its
    words): a mark that is not a string would be stored and then never match a string mark again."""
    if marks is None and none_is_empty:
        return []
    if isinstance(marks, str):
        return [marks]
    if not isinstance(marks, list) or not all(isinstance(m, str) for m in marks):
        raise TypeError(f"The mark should be {allowed}, but got {type(marks)}.")
    return list(marks)


class RemoteMemory(MemoryBase):
    """AgentScope-Python's working memory kept in an agentscope-memory server."""

    def __init__(self, target: str, memory_id: str, api_key: str | None = None, *, timeout: float = 30.0) -> None:
        super().__init__()
        self.memory_id = memory_id
        self._clients = PerLoop(functools.partial(AsyncMemoryClient, target, api_key=api_key, timeout=timeout))
        self._ready = False
        # InMemoryMemory's content loaded from a session, written to the server before the
        # memory is next used (loading is synchronous in AgentScope; a gRPC call is not).
        self._loaded_content: Entries | None = None
        # The stored messages at a known state, so a read (get_memory, size, an add's check of
        # the ids) receives only what changed since, not the whole conversation (which grows
        # with every turn). It holds what get_memory hands the agent anyway.
        self._copy: _Copy | None = None
        self.register_state("memory_id")

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None:
        """This module's state (memory id and summary), or InMemoryMemory's (its messages and
        marks in `content`): a session an application saved before it used this memory loads,
        and replaces the server-side conversation as it replaces InMemoryMemory's."""
        if "content" in state_dict and "memory_id" not in state_dict:
            self._compressed_summary = state_dict.get("_compressed_summary", "")
            self._loaded_content = [_from_state_item(item) for item in state_dict["content"]]
            return
        super().load_state_dict(state_dict, strict)
        self._loaded_content = None
        self._ready = False
        self._copy = None  # perhaps another memory id now

    def state_dict(self) -> dict:
        if self._loaded_content is not None:
            # Loaded from InMemoryMemory's state and not yet on the server: saved as loaded,
            # so a session saved again before the memory is used loses nothing.
            return {"_compressed_summary": self._compressed_summary,
                    "content": [[m.to_dict(), list(marks)] for m, marks in self._loaded_content]}
        return super().state_dict()

    @property
    def _client(self) -> AsyncMemoryClient:
        """The client of the running event loop. A gRPC channel belongs to the loop it was made
        in, and an application may build its agent (and this memory) before `asyncio.run`, or
        run several loops one after another; InMemoryMemory works in each."""
        return self._clients.get()

    async def _current(self) -> _Copy:
        """The stored messages now, receiving only what changed since the state this memory last
        saw: nothing when nothing changed, the added messages when messages were only added, and
        the whole conversation after anything else (another client's delete, mark change,
        clear or load). The answer is used at once (before the next await): a later change of
        this memory moves the copy."""
        await self._ensure()
        copy = self._copy
        sent = copy.etag if copy is not None else ""
        read = await self._client.read_messages(self.memory_id, if_none_match=sent, accept_delta=bool(sent))
        if copy is not None and (read.not_modified or read.delta):
            if self._copy is copy and copy.etag == sent:
                if read.delta:
                    copy.extend(read.etag, read.messages)
                return copy
            # Another call of this memory moved the copy while this one waited: the answer
            # extends a state the copy no longer holds, so the conversation is read whole.
            read = await self._client.read_messages(self.memory_id)
        return self._remember(read.etag, read.messages)

    def _remember(self, etag: str, stored: Sequence[Msg]) -> _Copy:
        """A whole conversation read (or written) at `etag`, kept for the next read (not when the
        server gave no etag: there is nothing to check it against)."""
        copy = _Copy.of(etag, stored)
        self._copy = copy if etag else None
        return copy

    async def _ensure(self) -> None:
        if not self._ready:
            await self._client.create_memory(self.memory_id, allow_existing=True)
            self._ready = True
        content, self._loaded_content = self._loaded_content, None
        if content is not None:
            written = [_stored(m, marks) for m, marks in content]
            items = messages_to_items(written)
            try:
                loaded = await self._client.load_state_with_etags(self.memory_id, [StateEntry(MEMORY_MESSAGES, items=items)])
            except BaseException:
                self._loaded_content = content  # still to be written
                raise
            self._remember(loaded.etag, _as_loaded(items))

    async def _rewrite(self, change: Callable[[Entries], int], appended: Sequence[Msg] = ()) -> int:
        """Applies `change` (which edits the entries in place and returns the count to report) to
        the conversation as one compare-and-set, `appended` (stored messages) added at its end:
        read with its version, replaced whole (AgentScope `loadFrom`) only at that version; a
        conversation changed meanwhile is read again."""
        await self._ensure()
        for attempt in range(1, REWRITE_ATTEMPTS + 1):
            state, version = await self._client.save_state(self.memory_id)
            lists = [e for e in state if e.key == MEMORY_MESSAGES]
            if not lists and state:
                # Another kind's state (AUTO_CONTEXT, TIERED): its messages are not this list.
                raise FailedPreconditionError(
                    f"memory {self.memory_id!r} is not an IN_MEMORY memory (it holds {', '.join(e.key for e in state)})")
            stored = messages_from_items(lists[0]) if lists else []
            entries = [_loaded(m) for m in stored]
            # Each message is written back as it was stored (blocks of other clients' messages
            # included), with only its marks changed where `change` changed them.
            was = {id(m): (original, list(marks)) for (m, marks), original in zip(entries, stored, strict=True)}
            changed = change(entries)
            kept = []
            for m, marks in entries:
                original, marks_before = was[id(m)]
                kept.append(original if marks == marks_before else _remarked(original, m, marks))
            # The count is AgentScope's (a mark added), not whether anything changed: replacing
            # a mark by one the message already has removes the old one and counts nothing.
            if not appended and len(kept) == len(stored) and all(k is o for k, o in zip(kept, stored, strict=True)):
                return changed
            written = [*kept, *appended]
            items = messages_to_items(written)
            try:
                loaded = await self._client.load_state_with_etags(
                    self.memory_id, [StateEntry(MEMORY_MESSAGES, items=items)], expected_version=version)
            except AbortedError:
                if attempt == REWRITE_ATTEMPTS:
                    raise
                continue
            # The conversation is now exactly what was written, named by the load's etag: the
            # next read receives nothing of it.
            self._remember(loaded.etag, _as_loaded(items))
            return changed
        raise AssertionError("unreachable")

    async def add(self, memories: PyMsg | list[PyMsg] | None, marks: str | list[str] | None = None,
                  allow_duplicates: bool = False, **kwargs: Any) -> None:
        if memories is None:
            return
        msgs = [memories] if isinstance(memories, PyMsg) else list(memories)
        mark_list = _marks(marks, "a string, a list of strings, or None", none_is_empty=True)
        if not allow_duplicates:
            known = (await self._current()).ids
            msgs = [m for m in msgs if m.id not in known]
        stored = [_stored(m, mark_list) for m in msgs]
        if stored and _fits_one_add(stored):
            await self._ensure()
            before = self._copy
            added = await self._client.add_messages_with_etags(self.memory_id, stored)
            if before is not None and before is self._copy and added.etag and before.etag == added.previous_etag:
                # Nothing else changed the memory since the copy's state: it now holds these too.
                before.extend(added.etag, _as_added(stored))
        elif stored:
            await self._rewrite(lambda entries: 0, appended=stored)

    async def delete(self, msg_ids: list[str], **kwargs: Any) -> int:
        # InMemoryMemory keeps the messages whose id is not `in msg_ids`: only strings match.
        ids = list(dict.fromkeys(i for i in msg_ids if isinstance(i, str)))
        if not ids:
            return 0
        if _server_takes(ids, marks=False):
            await self._ensure()
            try:
                deleted = await self._client.delete_messages(self.memory_id, ids, allow_missing=True)
            except UnimplementedError:
                pass  # a server from before DeleteMessages
            else:
                chosen = set(ids)
                self._after_delete(deleted, lambda m: m.id in chosen)
                return deleted.deleted_count
        wanted = set(ids)

        def drop(entries: Entries) -> int:
            before = len(entries)
            entries[:] = [(m, marks) for m, marks in entries if m.id not in wanted]
            return before - len(entries)

        return await self._rewrite(drop)

    async def delete_by_mark(self, mark: str | list[str], *args: Any, **kwargs: Any) -> int:
        wanted = list(dict.fromkeys(_marks(mark, "a string or a list of strings")))
        if not wanted:
            return 0
        if _server_takes(wanted, marks=True):
            await self._ensure()
            try:
                deleted = await self._client.delete_messages(self.memory_id, marks=wanted)
            except UnimplementedError:
                pass
            else:
                marked = set(wanted)
                self._after_delete(deleted, lambda m: bool(marked.intersection(marks_of(m))))
                return deleted.deleted_count
        marked = set(wanted)

        def drop(entries: Entries) -> int:
            before = len(entries)
            entries[:] = [(m, marks) for m, marks in entries if not marked & set(marks)]
            return before - len(entries)

        return await self._rewrite(drop)

    def _after_delete(self, deleted: MessagesDeleted, doomed: Callable[[Msg], bool]) -> None:
        """The copy without the messages `doomed` chooses (as the server chose them), named by the
        delete's etag, when the delete was the only change since the copy's state (else the next
        read receives what is stored). Only if it removes exactly the messages the server says
        it deleted: otherwise the copy keeps its etag, which the next read finds stale."""
        copy = self._copy
        if copy is None or not deleted.etag or deleted.etag == deleted.previous_etag or copy.etag != deleted.previous_etag:
            return
        kept = [m for m in copy.stored if not doomed(m)]
        gone = [m.id or "" for m in copy.stored if doomed(m)]
        if len(gone) == deleted.deleted_count and (deleted.deleted_ids is None or deleted.deleted_ids == gone):
            copy.replace(deleted.etag, kept)

    def _after_marks(self, updated: MarksUpdated, new_mark: str | None, old_mark: str | None,
                     ids: list[str] | None) -> None:
        """The copy with the marks changed as the server changed them (`short_term.marks`), named
        by the change's etag, when it was the only change since the copy's state; only if it
        counts and changes the messages the server says it did (else the next read reads)."""
        copy = self._copy
        if copy is None or not updated.etag or copy.etag != updated.previous_etag:
            return
        chosen = None if ids is None else set(ids)
        counted, changed, stored = 0, 0, []
        for m in copy.stored:
            remarked, count = remark_message(m, chosen, new_mark, old_mark)
            counted += count
            changed += remarked is not None
            stored.append(m if remarked is None else remarked)
        if (counted, changed) == (updated.updated_count, updated.changed_count):
            copy.replace(updated.etag, stored)

    async def size(self) -> int:
        return len((await self._current()).stored)

    async def clear(self) -> None:
        await self._ensure()
        cleared = await self._client.clear_with_etags(self.memory_id)
        # No messages, named by the clear's etag (whatever happened before it): the next read
        # receives nothing.
        self._remember(cleared.etag, ())

    async def get_memory(self, mark: str | None = None, exclude_mark: str | None = None,
                         prepend_summary: bool = True, **kwargs: Any) -> list[PyMsg]:
        for name, value in (("mark", mark), ("exclude_mark", exclude_mark)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
        chosen = []
        for stored in (await self._current()).stored:
            marks = _marks_of(stored)
            if (mark is None or mark in marks) and (exclude_mark is None or exclude_mark not in marks):
                chosen.append(stored)
        # Each read hands out new messages: what the caller does with them leaves the copy as is.
        msgs = [_loaded(m)[0] for m in chosen]
        if prepend_summary and self._compressed_summary:
            return [PyMsg("user", self._compressed_summary, "user"), *msgs]
        return msgs

    async def update_messages_mark(self, new_mark: str | None, old_mark: str | None = None,
                                   msg_ids: list[str] | None = None) -> int:
        ids = None if msg_ids is None else list(dict.fromkeys(i for i in msg_ids if isinstance(i, str)))
        if (new_mark is None and old_mark is None) or ids == []:
            return 0  # InMemoryMemory changes nothing then
        given = [m for m in (new_mark, old_mark) if m is not None]
        if all(isinstance(m, str) for m in given) and _server_takes(given, marks=True) and (
                ids is None or _server_takes(ids, marks=False)):
            await self._ensure()
            try:
                updated = await self._client.update_message_marks(
                    self.memory_id, new_mark, old_mark=old_mark, message_ids=ids, allow_missing=True)
            except UnimplementedError:
                pass
            else:
                self._after_marks(updated, new_mark, old_mark, ids)
                return updated.updated_count

        def remark_entries(entries: Entries) -> int:
            changed = 0
            for msg, marks in entries:
                if msg_ids is not None and msg.id not in msg_ids:
                    continue
                if old_mark is not None and old_mark not in marks:
                    continue
                if new_mark is None:
                    if old_mark in marks:
                        marks.remove(old_mark)
                        changed += 1
                    continue
                if old_mark is not None:
                    marks.remove(old_mark)
                if new_mark not in marks:
                    marks.append(new_mark)
                    changed += 1
            return changed

        return await self._rewrite(remark_entries)

    async def close(self) -> None:
        client = self._clients.take()
        if client is not None:
            await client.close()
