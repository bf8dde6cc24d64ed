"""What the short-term clients answer when a caller keeps its own copy of a conversation (or of
something derived from it, such as the set of its message ids): each answer names the state it
read or made with the server's etag, so the copy is brought up to date with only what changed
(`GetMessages` `if_none_match` and `accept_delta`; `etag` and `previous_etag` of `AddMessages`,
`DeleteMessage`, `DeleteMessages`, `UpdateMessageMarks`, `ClearMessages` and `LoadState`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

from agentscope_memory.errors import AbortedError
from agentscope_memory.message import Msg

# How often a paged read that the server aborted (the memory changed between its pages) is
# started again from the first page before the client gives up and raises `AbortedError`.
CONSISTENT_READ_ATTEMPTS = 5


@dataclass(frozen=True)
class MessagesRead:
    """A read of a memory's messages, named by `etag`.

    `not_modified`: the caller's `if_none_match` is still current; `messages` is empty.
    `delta`: `messages` are only those added after the state `if_none_match` named, so that
    state's messages followed by these are the messages now. Otherwise `messages` is the whole
    list, in insertion order."""

    messages: list[Msg]
    etag: str
    not_modified: bool = False
    delta: bool = False


@dataclass(frozen=True)
class MessagesAdded:
    """The answer of an add: the message count after it and the etags just before and after it.
    When `previous_etag` is the etag of a caller's copy, this add was the only change since, so
    the copy plus the added messages is the state `etag` names. Both are empty when `replayed`
    (the request id had already been stored: what changed meanwhile is unknown)."""

    message_count: int
    etag: str
    previous_etag: str
    replayed: bool = False


@dataclass(frozen=True)
class MessageDeleted:
    """The answer of a delete by index: whether a message was removed, the count after it, and
    the etags just before and after it. When `previous_etag` is the etag of a caller's copy, this
    delete was the only change since, so the copy without the message at the index is the state
    `etag` names. Both are empty when the server sent none (an older server, or a negative index
    that was not sent): the caller then reads again."""

    deleted: bool
    message_count: int
    etag: str
    previous_etag: str


@dataclass(frozen=True)
class MessagesDeleted:
    """The answer of a delete by ids or marks: the ids of the deleted messages (one per message,
    in their former order; None when the server left them out, too many to send), the count
    after it, and the etags just before and after it. When `previous_etag` is the etag of a
    caller's copy, this delete was the only change since: the copy without `deleted_ids` is
    the state `etag` names."""

    deleted_count: int
    deleted_ids: list[str] | None
    message_count: int
    etag: str
    previous_etag: str


@dataclass(frozen=True)
class MarksUpdated:
    """The answer of a mark change: AgentScope's count (`updated_count`), the messages that
    changed, the message count, and the etags just before and after it (equal when nothing
    changed). The messages' ids are unchanged."""

    updated_count: int
    changed_count: int
    message_count: int
    etag: str
    previous_etag: str


@dataclass(frozen=True)
class MessagesReplaced:
    """The answer of a clear or a state load: the memory's messages are now none, or those loaded,
    named by `etag` (whatever happened before), and `previous_etag` named them just before. A
    caller that knows what it wrote keeps that as its copy named `etag`, without a read; an empty
    `etag` (an older server) means it must read. `version`: the memory's version after a load
    (0 for a clear, whose response does not carry it)."""

    etag: str
    previous_etag: str
    version: int = 0


@dataclass(frozen=True)
class Page:
    """One page of a `GetMessages` listing, whichever way it was fetched."""

    messages: list[Msg]
    etag: str
    next_page_token: str
    not_modified: bool = False
    delta: bool = False


async def read_consistently(fetch: Callable[[str, bool], Awaitable[Page]]) -> MessagesRead:
    """Every page of one state: `fetch(token, first)` gets a page (`first` is the page that
    carries the caller's `if_none_match`). A not-modified or delta answer ends the read at once;
    a memory changed between pages (ABORTED) is read again from the first page, at most
    `CONSISTENT_READ_ATTEMPTS` times, so a list mixing two states is never returned."""
    for attempt in range(1, CONSISTENT_READ_ATTEMPTS + 1):
        try:
            page = await fetch("", True)
            if page.not_modified or page.delta:
                return MessagesRead(page.messages, page.etag, page.not_modified, page.delta)
            messages, etag = list(page.messages), page.etag
            while page.next_page_token:
                page = await fetch(page.next_page_token, False)
                messages.extend(page.messages)
            return MessagesRead(messages, etag)
        except AbortedError:
            if attempt == CONSISTENT_READ_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def read_consistently_blocking(fetch: Callable[[str, bool], Page]) -> MessagesRead:
    """`read_consistently` for a blocking `fetch`."""
    for attempt in range(1, CONSISTENT_READ_ATTEMPTS + 1):
        try:
            page = fetch("", True)
            if page.not_modified or page.delta:
                return MessagesRead(page.messages, page.etag, page.not_modified, page.delta)
            messages, etag = list(page.messages), page.etag
            while page.next_page_token:
                page = fetch(page.next_page_token, False)
                messages.extend(page.messages)
            return MessagesRead(messages, etag)
        except AbortedError:
            if attempt == CONSISTENT_READ_ATTEMPTS:
                raise
    raise AssertionError("unreachable")
