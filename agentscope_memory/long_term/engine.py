"""The long-term engine interface and the types it speaks.

Everything above an engine (AgentScope's modes and tools, the turn helpers, the servicers and
the clients) is written against `LongTermEngine`, so an engine can be replaced (mem0 today, the
server's own scored hybrid index next) without touching them. Every call names its tenant; an
engine never lets one tenant see another's memories, and reports another tenant's memory
exactly like a missing one.
"""

from __future__ import annotations

import builtins  # `list` is also a method name in the engines below
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES
from agentscope_memory.validation.ids import check_id
from agentscope_memory.validation.messages import check_msg
from agentscope_memory.message import Msg

if TYPE_CHECKING:
    from agentscope_memory.long_term.hybrid.ranking import RankOptions

DEFAULT_TOP_K = 5
# How many history entries `all_history` asks for at a time (the byte budget may cut a page).
HISTORY_READ_BATCH = 1000
# The most memories one `retrieve` returns (the ranked search's own top_k limit).
MAX_RETRIEVE_LIMIT = 1000
_SCOPE_FIELDS = ("agent_name", "user_id", "run_name")


@dataclass(frozen=True)
class Scope:
    """Whose memories: AgentScope's agentName / userId / runName (mem0's agent/user/run ids)."""

    agent_name: str = ""
    user_id: str = ""
    run_name: str = ""

    def validate(self, field_name: str = "scope") -> Scope:
        if not (self.agent_name or self.user_id or self.run_name):
            raise InvalidArgumentError(
                field_name, "at least one of agent_name, user_id or run_name must be provided"
            )
        for attr in _SCOPE_FIELDS:
            value = getattr(self, attr)
            if value:
                check_id(value, f"{field_name}.{attr}")
        return self


@dataclass
class LongTermItem:
    """One stored long-term memory. `score` is set on search results only."""

    id: str
    text: str
    scope: Scope
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    # ISO 8601 with a UTC offset, as mem0 writes them.
    created_at: str = ""
    updated_at: str = ""
    # message, fact, reflection or summary.
    memory_type: str = "message"
    # One of `domains.DOMAINS`, or "" before the memory is assessed.
    domain: str = ""
    importance: float | None = None
    # llm, heuristic, user, or default (not assessed yet).
    importance_method: str = ""
    last_accessed_at: str = ""
    access_count: int = 0
    # Where it came from: message ids, memory ids.
    source: dict[str, Any] = field(default_factory=dict)
    # Search results of the ranked search: every component of `score` (a `ranking.Scores`).
    scores: Any = None
    # Parent/child scopes (agentscope_memory/scopes): LOCAL, SHARED or GLOBAL, and on search
    # results whether the searched scope inherited it (`scope` is then its origin).
    visibility: str = "LOCAL"
    inherited: bool = False
    # Pinned by a user: never forgotten, no time decay in ranking, never merged or reflected away.
    pinned: bool = False


@dataclass(frozen=True)
class HistoryEntry:
    """One change of a long-term memory: ADD, UPDATE or DELETE, with the text before and after."""

    memory_id: str
    event: str
    old_text: str | None
    new_text: str | None
    created_at: str = ""
    updated_at: str = ""
    # What else changed (metadata, importance, domain), old and new.
    detail: dict[str, Any] = field(default_factory=dict)


def history_entry_size(entry: HistoryEntry) -> int:
    """About how many bytes `entry` takes in a response (its texts, its detail as JSON and a
    little for the rest): what an engine counts against a page's byte budget while reading."""
    import json

    size = 64 + len(entry.memory_id) + len(entry.event)
    for text in (entry.old_text, entry.new_text):
        if text:
            size += len(text.encode("utf-8", "surrogatepass"))
    if entry.detail:
        size += len(json.dumps(entry.detail, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return size


@dataclass(frozen=True)
class LongTermHistoryPage:
    """A page of a memory's history from `LongTermEngine.history_page`."""

    entries: list[HistoryEntry]
    # cursors[i] is where the history continues after entries[i]: a positive position the
    # engine's `history_page` understands (the server signs it into a page token).
    cursors: list[int]
    # True when changes follow the last entry.
    more: bool


@dataclass(frozen=True)
class LongTermListPage:
    """A page of a scope's memories from `LongTermEngine.list_page`."""

    items: list[LongTermItem]
    # cursors[i] is where the listing continues after items[i]: opaque to callers, understood
    # by the engine's `list_page` (the server signs it into a page token, so callers cannot
    # forge one).
    cursors: list[str]
    # True when memories follow the last item.
    more: bool


class LongTermEngine(Protocol):
    """Long-term memory for every tenant and scope."""

    @property
    def rank_defaults(self) -> RankOptions:
        """The ranking a search uses where the request leaves a field unset."""
        ...

    async def open(self) -> None:
        """Load models and indexes now rather than on the first call."""
        ...

    async def close(self) -> None: ...

    async def record(
        self, tenant: str, scope: Scope, msgs: Sequence[Msg | None], metadata: dict[str, Any] | None = None,
        *, pinned: bool = False,
    ) -> list[LongTermItem]:
        """AgentScope `record(msgs)`: store what the messages say; returns what was stored. With
        `pinned`, what is stored and a memory already holding one of the texts are pinned, and
        the latter is returned too when this pinned it."""
        ...

    async def search(self, tenant: str, scope: Scope, query: str, limit: int = DEFAULT_TOP_K, *,
                     touch: bool = True, metadata: Mapping[str, Any] | None = None) -> list[LongTermItem]:
        """The memories of `scope` that best match `query`, best first, marked recalled unless
        `touch` is false (the caller then `touch`es what it shows of them). With `metadata`,
        only memories holding each of its keys with an equal value (`metadata_filter.py`), chosen
        before the top `limit` are cut (a filter never hides a match ranked below others)."""
        ...

    async def retrieve(
        self, tenant: str, scope: Scope, msg: Msg | None, limit: int = DEFAULT_TOP_K, *, touch: bool = True
    ) -> tuple[str, list[LongTermItem]]:
        """AgentScope `retrieve(msg)`: what the memory holds for the message, as one text
        (`touch` as for `search`)."""
        ...

    async def search_ranked(
        self, tenant: str, scope: Scope, query: str, options: RankOptions | None = None, *, route: bool = False,
        touch: bool = True,
    ) -> tuple[list[LongTermItem], str]:
        """Ranked search whose items carry every score component (`item.scores`); with
        `route`, the query's domain filters candidates (general_chat recalls nothing).
        Returns (items best first, the routed domain or ""). `touch` as for `search`."""
        ...

    def touch(self, tenant: str, memory_ids: Sequence[str]) -> None:
        """Mark memories recalled now: what a caller showed of a search made without `touch`
        (only what a user or model saw keeps a memory from decaying)."""
        ...

    async def list(self, tenant: str, scope: Scope, limit: int = 100, *,
                   metadata: Mapping[str, Any] | None = None, offset: int = 0) -> list[LongTermItem]:
        """Up to `limit` memories of `scope`, oldest first, after the first `offset`; with
        `metadata`, of those that match it (as `search`'s)."""
        ...

    async def count(self, tenant: str, scope: Scope, *, metadata: Mapping[str, Any] | None = None) -> int:
        """How many memories `list` gives with no limit."""
        ...

    async def list_page(self, tenant: str, scope: Scope, limit: int, cursor: str = "") -> LongTermListPage:
        """Up to `limit` memories of exactly this scope in a stable order, starting after
        `cursor` ("" for the start; otherwise one of the `cursors` this engine returned)."""
        ...

    async def get(self, tenant: str, memory_id: str) -> LongTermItem: ...

    async def update(
        self,
        tenant: str,
        memory_id: str,
        text: str | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float | None = None,
        pinned: bool | None = None,
    ) -> LongTermItem:
        """Change a memory's text and/or importance and/or pin and/or merge metadata into it;
        the change goes to its history."""
        ...

    async def delete(self, tenant: str, memory_id: str) -> None: ...

    async def delete_scope(self, tenant: str, scope: Scope) -> int:
        """Forget everything of exactly this scope; returns how many memories were deleted."""
        ...

    async def history(self, tenant: str, memory_id: str) -> builtins.list[HistoryEntry]:
        """Every change of a memory, oldest first (`all_history`: read page by page)."""
        ...

    async def history_page(self, tenant: str, memory_id: str, limit: int, after: int = 0,
                           budget: int = DEFAULT_PAGE_BYTES) -> LongTermHistoryPage:
        """Up to `limit` changes of a memory, oldest first, after position `after` (0 for the
        first; otherwise one of the `cursors` this engine returned). Reading stops soon after
        the entries exceed `budget` bytes (`history_entry_size`), so a page of large entries
        does not read the rest of a long history; `more` says whether changes follow.
        NOT_FOUND for a memory that never existed (or is another tenant's)."""
        ...


async def all_history(engine: LongTermEngine, tenant: str, memory_id: str) -> list[HistoryEntry]:
    """Every change of a memory, oldest first, read a page (of the default byte budget) at a
    time. A history only grows and its entries never change, so the pages are one list."""
    out: list[HistoryEntry] = []
    after = 0
    while True:
        page = await engine.history_page(tenant, memory_id, HISTORY_READ_BATCH, after)
        out.extend(page.entries)
        if not page.more or not page.entries:
            return out
        after = page.cursors[-1]


class Searches(Protocol):
    """What `retrieve_by_search` needs of an engine."""

    async def search(self, tenant: str, scope: Scope, query: str, limit: int = DEFAULT_TOP_K, *,
                     touch: bool = True) -> list[LongTermItem]: ...


async def retrieve_by_search(
    engine: Searches, tenant: str, scope: Scope, msg: Msg | None, limit: int = DEFAULT_TOP_K, *, touch: bool = True
) -> tuple[str, list[LongTermItem]]:
    """AgentScope-Java `retrieve(msg)`: the memories found for the message's text, joined with
    newlines; a message without text gives "" (reference/agentscope-java-core.md §6.4)."""
    scope.validate()
    if not 0 <= limit <= MAX_RETRIEVE_LIMIT:
        # Checked here, under the caller's name for it: the search below calls it top_k.
        raise InvalidArgumentError("limit", f"must be between 0 (meaning {DEFAULT_TOP_K}) and {MAX_RETRIEVE_LIMIT}, not {limit}")
    if msg is not None:
        check_msg(msg, "message")
    if msg is None or not msg.text_content:
        return "", []
    items = await engine.search(tenant, scope, msg.text_content, limit or DEFAULT_TOP_K, touch=touch)
    return "\n".join(i.text for i in items if i.text), items
