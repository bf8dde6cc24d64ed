"""`Mem0Api`: mem0's REST operations over any `LongTermEngine`, in mem0's JSON shapes.

The HTTP transport only authenticates, parses and calls this; everything mem0-specific (ids
merged into filters, metadata equality filters, `top_k`, `threshold`, `infer`, timestamps
with a UTC offset) is decided here, so the same rules hold for every route that reaches it.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

from agentscope_memory.errors import InvalidArgumentError, NotFoundError
from agentscope_memory.ids import check_id
from agentscope_memory.validation.messages import check_json_value
from agentscope_memory.long_term.importance import LlmScorer
from agentscope_memory.long_term.metadata_filter import json_equal
from agentscope_memory.long_term.engine import (
    HistoryEntry,
    LongTermEngine,
    LongTermItem,
    Scope,
)
from agentscope_memory.mem0_api.models import (
    AddRequest,
    Ids,
    ListRequest,
    Mem0Message,
    SearchRequest,
    UpdateRequest,
)
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.paging.budget import DEFAULT_PAGE_BYTES, cut_to_budget
from agentscope_memory.scopes.engine import ScopeEngine

DEFAULT_SEARCH_TOP_K = 10
DEFAULT_LIST_TOP_K = 100
# The most entries one history answer holds, and how many the engine is asked for at a time.
MAX_HISTORY_ENTRIES = 1000
# The most memories one `delete_linked` forgets (a chain of superseded memories is short).
MAX_LINKED_DELETES = 1000
HISTORY_READ_PAGE = 200
_ROLES = {"user": MsgRole.USER, "assistant": MsgRole.ASSISTANT, "system": MsgRole.SYSTEM, "tool": MsgRole.TOOL}
_ID_KEYS = ("user_id", "agent_id", "run_id")
# mem0 platform filter fields that are no metadata here, and why they cannot filter. (`app_id`
# is metadata: an add keeps it there, and AgentScope-Java sends its metadata as filters.)
_UNFILTERABLE = {
    "memory_ids": "is not supported: get a memory by its id (GET /v1/memories/{id}/)",
}
# mem0's comparison operators in a filter condition.
_OPERATORS = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "icontains"})

VERBATIM_NOTE = "stored verbatim: no LLM is configured on this server, so infer=true could not extract facts"
NOT_INFERRED_NOTE = "stored verbatim (infer=false)"
MEM0_EVENTS = ("ADD", "UPDATE", "DELETE")
BACKGROUND_NOTE = ("stored verbatim; the server's LLM scores the round in the background and stores an "
                   "important fact as its own memory (metadata memory_type=fact)")


@dataclass
class ListPage:
    """One page of `get_all`: its memories, how many match in all, the page size, the offset
    of its first memory among the matches, and whether the answer's size limit cut it short."""

    results: list[dict[str, Any]]
    count: int
    size: int
    start: int
    cut: bool = False


def _json_size(value: Any) -> int:
    # As the HTTP answer encodes it (compact, UTF-8).
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def utc_timestamp(value: str) -> str | None:
    """ISO 8601 with a UTC offset (`+00:00`), as AgentScope-Java's OffsetDateTime needs; a
    naive time is taken as UTC; "" stays absent."""
    if not value:
        return None
    try:
        parsed = _dt.datetime.fromisoformat(value)
    except ValueError:
        return value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.UTC)
    return parsed.astimezone(_dt.UTC).isoformat()


def memory_json(item: LongTermItem, event: str | None = None) -> dict[str, Any]:
    """One memory as mem0 writes it (v1.1 output format)."""
    out: dict[str, Any] = {"id": item.id, "memory": item.text}
    if event:
        out["event"] = event
    out["metadata"] = dict(item.metadata)
    if item.score is not None:
        out["score"] = item.score
    out["created_at"] = utc_timestamp(item.created_at)
    # A memory never changed was last updated when it was created (mem0 fills both).
    out["updated_at"] = utc_timestamp(item.updated_at or item.created_at)
    for key, value in (("user_id", item.scope.user_id), ("agent_id", item.scope.agent_name), ("run_id", item.scope.run_name)):
        if value:
            out[key] = value
    return out


def history_json(entry: HistoryEntry) -> dict[str, Any]:
    return {
        "memory_id": entry.memory_id,
        "event": entry.event,
        "old_memory": entry.old_text,
        "new_memory": entry.new_text,
        "created_at": utc_timestamp(entry.created_at),
        "updated_at": utc_timestamp(entry.updated_at),
    }


def _scope(ids: dict[str, Any], where: str) -> Scope:
    for key in _ID_KEYS:
        value = ids.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(f"{where}{key}", "must be a string")
        if value == "*":
            # mem0's platform reads "*" as "any id"; taken literally it found nothing, and a
            # delete of everyone's memories answered `deleted: 0`.
            raise InvalidArgumentError(f"{where}{key}", "'*' (mem0's wildcard for any id) is not supported; name one id")
        if value:
            check_id(value, f"{where}{key}")
    if not any(ids.get(k) for k in _ID_KEYS):
        raise InvalidArgumentError(where.rstrip(".") or "user_id", "at least one of user_id, agent_id or run_id is required")
    return Scope(agent_name=ids.get("agent_id") or "", user_id=ids.get("user_id") or "", run_name=ids.get("run_id") or "")


def _is_operator(value: Any) -> bool:
    """Whether a filter value is one of mem0's operator conditions (`{"gte": 3}`, `{"in": [...]}`)
    rather than a value to match: AgentScope-Java sends its metadata as filters, so a list or an
    object of other keys is metadata to be equal to."""
    return isinstance(value, dict) and bool(value) and all(k in _OPERATORS for k in value)


def split_filters(request: Ids, filters: dict[str, Any] | None) -> tuple[Scope, dict[str, Any]]:
    """(scope, metadata equality filters) from `filters` and the request's top-level ids.

    Top-level ids are merged in (AgentScope-Java sends `user_id` both ways); a filter naming a
    different id than the top level is refused rather than guessed. mem0's `{"AND": [...]}` of
    plain conditions (nested ANDs too) is flattened, and mem0 platform's `{"metadata": {...}}`
    asks each of its keys; operators (`{"gte": ...}`), `OR` and `NOT` anywhere, mem0's `"*"`
    wildcard and fields this server cannot filter by are refused, and so are two conditions
    asking one key for different values (nothing could match both). Any other value, a list or
    an object included, is matched for equality."""
    flat: dict[str, Any] = {}
    where: dict[str, str] = {}

    def add(key: str, value: Any, field: str) -> None:
        if key in flat and not json_equal(flat[key], value):
            raise InvalidArgumentError(field, f"is {value!r} but {where[key]} is {flat[key]!r}: no memory matches both")
        flat[key], where[key] = value, field

    def conditions(given: dict[str, Any], field: str) -> None:
        # An AND may hold another AND (mem0 nests them); an OR or NOT anywhere, or an AND that
        # is not a list, was matched as a metadata key of that name and silently found nothing.
        for key, value in given.items():
            here = f"{field}.{key}"
            if key == "AND":
                if not isinstance(value, list):
                    raise InvalidArgumentError(here, "must be a list of conditions, e.g. [{\"user_id\": \"alice\"}]")
                for i, condition in enumerate(value):
                    if not isinstance(condition, dict):
                        raise InvalidArgumentError(f"{here}[{i}]", "must be an object")
                    conditions(condition, f"{here}[{i}]")
            elif key in ("OR", "NOT"):
                raise InvalidArgumentError(here, "is not supported; only equality filters (and AND) are")
            elif key == "metadata":
                # mem0 platform's field: each of its keys must equal its value in the metadata.
                if not isinstance(value, dict) or _is_operator(value):
                    raise InvalidArgumentError(here, 'must be an object of metadata keys and values, e.g. {"topic": "travel"}')
                for name, wanted in value.items():
                    if name in _ID_KEYS:
                        raise InvalidArgumentError(f"{here}.{name}", "is a scope id, not metadata: give it beside `metadata`")
                    add(name, wanted, f"{here}.{name}")
            elif key in _UNFILTERABLE:
                # Matched as metadata of that name, these found nothing without saying why.
                raise InvalidArgumentError(here, _UNFILTERABLE[key])
            else:
                add(key, value, here)

    conditions(filters or {}, "filters")
    for key in _ID_KEYS:
        top = getattr(request, key)
        if top is None:
            continue
        if flat.get(key) not in (None, top):
            raise InvalidArgumentError(key, f"is {top!r} but filters.{key} is {flat[key]!r}")
        flat[key] = top
    for key, value in flat.items():
        if _is_operator(value) and key not in _ID_KEYS:
            raise InvalidArgumentError(f"filters.{key}", "operator filters are not supported; give a plain value to match")
        if value == "*" and key not in _ID_KEYS:
            # mem0 reads it as "the key is present"; as a value to equal it found nothing.
            raise InvalidArgumentError(where[key], "'*' (mem0's wildcard: the key is present) is not supported; give a value to match")
        if key not in _ID_KEYS:
            # Stored metadata never holds NUL or a non-finite number: such a filter is a mistake
            # (and PostgreSQL's jsonb cannot even hold it).
            check_json_value({key: value}, "filters", allow_nul=False)
    scope = _scope({k: flat.get(k) for k in _ID_KEYS}, "filters.")
    return scope, {k: v for k, v in flat.items() if k not in _ID_KEYS}


def write_scope(request: Ids, filters: dict[str, Any] | None, what: str) -> Scope:
    """The scope an add or a forget names: its top-level ids and, as mem0 2.x's MemoryClient
    sends them, ids in `filters`. Neither adds nor forgets by metadata, so any other filter key
    is refused (`what` says where metadata goes instead)."""
    if not filters:
        return _scope(request.model_dump(), "")
    scope, metadata = split_filters(request, filters)
    if metadata:
        raise InvalidArgumentError(f"filters.{next(iter(metadata))}", f"only user_id, agent_id and run_id may be given here; {what}")
    return scope


def _refuse_unsupported(request: AddRequest | UpdateRequest) -> None:
    """mem0's fields for a memory's time and expiry: this server keeps the time a memory was
    stored and never expires one, so a value for either is refused rather than ignored."""
    if request.timestamp is not None:
        raise InvalidArgumentError("timestamp", "is not supported: a memory carries the time it was stored")
    if request.expiration_date is not None:
        raise InvalidArgumentError("expiration_date", "is not supported: memories here do not expire (delete them instead)")


def _refuse_narrowing(request: SearchRequest | ListRequest) -> None:
    """mem0 platform's options that narrow a search or a list by what this server does not
    keep: ignoring one would answer memories the caller excluded."""
    if request.categories is not None:
        raise InvalidArgumentError("categories", "is not supported: memories here have no categories; filter by metadata")
    for name in ("start_date", "end_date"):
        if getattr(request, name, None) is not None:
            raise InvalidArgumentError(name, "is not supported: memories cannot be filtered by date here")


def _linked_ids(item: LongTermItem) -> list[str]:
    linked = item.metadata.get("linked_memory_ids")
    return [i for i in linked if isinstance(i, str)] if isinstance(linked, list) else []


def _message_text(message: Mem0Message, where: str) -> str:
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for i, part in enumerate(content):
        if part.get("type", "text") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidArgumentError(f"{where}.content[{i}].text", "must be a string")
            parts.append(text)
    return "\n".join(parts)


def to_msgs(messages: Sequence[Mem0Message] | str) -> list[Msg]:
    """mem0 messages as AgentScope messages (role and text)."""
    if isinstance(messages, str):
        messages = [Mem0Message(role="user", content=messages)]
    if not messages:
        raise InvalidArgumentError("messages", "must not be empty")
    msgs = []
    for i, message in enumerate(messages):
        role = _ROLES.get(message.role.lower())
        if role is None:
            raise InvalidArgumentError(f"messages[{i}].role", f"is {message.role!r}; use user, assistant, system or tool")
        msgs.append(Msg.create(role, _message_text(message, f"messages[{i}]")))
    return msgs


class Mem0Api:
    """mem0's REST operations for one tenant at a time over a `LongTermEngine`."""

    def __init__(self, engine: LongTermEngine, max_answer_bytes: int = DEFAULT_PAGE_BYTES,
                 scopes: ScopeEngine | None = None) -> None:
        self.engine = engine
        # Forgetting a scope goes through the scope hierarchy when there is one, so a parent
        # scope is refused unless `force`, as `DeleteScope` refuses it.
        self.scopes = scopes
        # What the memories or changes of one answer may take (the server's page byte budget):
        # a stock client refuses an answer over 4 MiB, and mem0 pages only `get_all`.
        self.max_answer_bytes = max_answer_bytes

    def _fit(self, results: list[dict[str, Any]]) -> int:
        """How many leading `results` fit in one answer, as its JSON encodes them."""
        return cut_to_budget(results, _json_size, self.max_answer_bytes)

    @property
    def has_llm(self) -> bool:
        """Whether the engine scores rounds with an LLM (and so extracts facts in the background)."""
        return isinstance(getattr(self.engine, "scorer", None), LlmScorer)

    async def add(self, tenant: str, request: AddRequest) -> dict[str, Any]:
        scope = write_scope(request, request.filters, "metadata to store goes in `metadata`")
        _refuse_unsupported(request)
        msgs = to_msgs(request.messages)
        # The engine stores what was said; with an LLM, fact extraction runs in the background
        # (never delaying the answer, surviving a crash), so `inferred` is false here.
        metadata = request.metadata
        if request.app_id is not None:
            # mem0's fourth id; no scope here, so it is kept as metadata, where a filter finds it.
            if metadata and "app_id" in metadata and not json_equal(metadata["app_id"], request.app_id):
                raise InvalidArgumentError("app_id", f"is {request.app_id!r} but metadata.app_id is {metadata['app_id']!r}")
            metadata = {**(metadata or {}), "app_id": request.app_id}
        items = await self.engine.record(tenant, scope, msgs, metadata)
        if not request.infer:
            note = NOT_INFERRED_NOTE
        else:
            note = BACKGROUND_NOTE if self.has_llm else VERBATIM_NOTE
        inferred = False
        # An engine may answer with ids and texts only; what was stored carries the metadata.
        results = [memory_json(i, "ADD") for i in items]
        for result in results:
            result["metadata"] = {**(metadata or {}), **result["metadata"]}
        kept = self._fit(results)
        if kept < len(results):
            # A long text is stored as many memories; the answer lists what fits of them.
            note += (f"; {len(results) - kept} more of the {len(results)} memories stored are not listed here "
                     "(the answer's size limit): list them with get_all")
        return {"results": results[:kept], "inferred": inferred, "message": note}

    async def search(self, tenant: str, request: SearchRequest) -> list[dict[str, Any]]:
        """The hits, best first (callers wrap them as `{"results": [...]}` or not)."""
        if not request.query.strip():
            raise InvalidArgumentError("query", "must not be empty")
        _refuse_narrowing(request)
        scope, wanted = split_filters(request, request.filters)
        top_k = request.top_k or request.limit or DEFAULT_SEARCH_TOP_K
        # The engine filters before its top-k cut, so a match ranked below others is found. Not
        # touched by the search: what the threshold leaves out was not recalled, and must decay
        # as if it had not been searched.
        hits = await self.engine.search(tenant, scope, request.query, top_k, touch=False, metadata=wanted)
        if request.threshold is not None:
            hits = [i for i in hits if i.score is None or i.score >= request.threshold]
        results = [memory_json(i) for i in hits]
        # Best first, as many as one answer holds: what does not fit was not recalled.
        kept = self._fit(results)
        self.engine.touch(tenant, [i.id for i in hits[:kept]])
        return results[:kept]

    async def list_memories(self, tenant: str, request: ListRequest) -> list[dict[str, Any]]:
        _refuse_narrowing(request)
        scope, wanted = split_filters(request, request.filters)
        top_k = request.top_k or request.page_size or DEFAULT_LIST_TOP_K
        results = [memory_json(i) for i in await self.engine.list(tenant, scope, top_k, metadata=wanted)]
        # mem0's OSS list has no paging: the oldest that fit in one answer (get_all pages).
        return results[:self._fit(results)]

    async def list_page(self, tenant: str, request: ListRequest, page: int = 1,
                        page_size: int | None = None, offset: int | None = None) -> ListPage:
        """mem0's numbered pages (`POST /v3/memories/?page=2&page_size=50`, 1-indexed, oldest
        first), or the page starting after `offset` matches. A page whose memories outgrow one
        answer is cut short: its `start` plus its length is where the next one starts."""
        _refuse_narrowing(request)
        scope, wanted = split_filters(request, request.filters)
        size = page_size or request.page_size or request.top_k or DEFAULT_LIST_TOP_K
        start = (page - 1) * size if offset is None else offset
        items = await self.engine.list(tenant, scope, size, metadata=wanted, offset=start)
        results = [memory_json(i) for i in items]
        kept = self._fit(results)
        return ListPage(results[:kept], await self.engine.count(tenant, scope, metadata=wanted), size, start,
                        cut=kept < len(results))

    async def get(self, tenant: str, memory_id: str) -> dict[str, Any]:
        return memory_json(await self.engine.get(tenant, memory_id))

    async def update(self, tenant: str, memory_id: str, request: UpdateRequest) -> dict[str, Any]:
        text = request.new_text()
        _refuse_unsupported(request)
        if text is None and request.metadata is None:
            if "expiration_date" in request.model_fields_set:
                # Clearing an expiry (MemoryClient.update(id, expiration_date=None)): none is set.
                return {**memory_json(await self.engine.get(tenant, memory_id)), "message": "Memory updated successfully!"}
            raise InvalidArgumentError("text", "is required (the memory's new text) unless metadata is given")
        item = await self.engine.update(tenant, memory_id, text, request.metadata)
        return {**memory_json(item), "message": "Memory updated successfully!"}

    async def delete(self, tenant: str, memory_id: str, delete_linked: bool = False) -> dict[str, Any]:
        """Forget one memory; with `delete_linked` (mem0's), also the older memories it links
        to (`metadata.linked_memory_ids`, which mem0's extraction writes), transitively, so a
        superseded memory does not resurface once the current one is gone."""
        if not delete_linked:
            await self.engine.delete(tenant, memory_id)
            return {"message": "Memory deleted successfully!"}
        item = await self.engine.get(tenant, memory_id)
        await self.engine.delete(tenant, memory_id)
        seen, deleted = {memory_id}, 1
        waiting = _linked_ids(item)
        while waiting and len(seen) < MAX_LINKED_DELETES:
            linked = waiting.pop(0)
            if linked in seen:
                continue
            seen.add(linked)
            try:
                item = await self.engine.get(tenant, linked)
                await self.engine.delete(tenant, linked)
            except (NotFoundError, InvalidArgumentError):
                # Gone already (or never a memory id): nothing of it to forget.
                continue
            deleted += 1
            waiting += _linked_ids(item)
        return {"message": "Memory deleted successfully!", "deleted": deleted}

    async def delete_all(self, tenant: str, ids: Ids, force: bool = False,
                         filters: dict[str, Any] | None = None) -> dict[str, Any]:
        scope = write_scope(ids, filters, "a scope is forgotten whole (delete single memories by id)")
        if self.scopes is not None:
            deleted = await self.scopes.delete_long_term_scope(tenant, scope, force)
        else:
            deleted = await self.engine.delete_scope(tenant, scope)
        return {"message": "Memories deleted successfully!", "deleted": deleted}

    async def history(self, tenant: str, memory_id: str) -> list[dict[str, Any]]:
        """mem0's array of a memory's changes, oldest first, read from the engine a page at a
        time. mem0's REST API has no paging, so one answer is bounded instead: at most
        `MAX_HISTORY_ENTRIES` entries and about `max_answer_bytes` of them (the first always
        goes); a longer history ends there (`GetLongTermMemoryHistory` and the MCP tool page
        through all of it). mem0's events only: the engine's own (ASSESS: background
        importance scoring; lifecycle jobs) stay in GetLongTermMemoryHistory."""
        out: list[dict[str, Any]] = []
        used = 0
        after = 0
        while True:
            page = await self.engine.history_page(tenant, memory_id, HISTORY_READ_PAGE, after, self.max_answer_bytes)
            for entry in page.entries:
                if entry.event not in MEM0_EVENTS:
                    continue
                # Only the texts travel (mem0's entries carry no metadata).
                size = 200 + sum(len(t.encode("utf-8", "surrogatepass")) for t in (entry.old_text, entry.new_text) if t)
                if out and (len(out) >= MAX_HISTORY_ENTRIES or used + size > self.max_answer_bytes):
                    return out
                out.append(history_json(entry))
                used += size
            if not page.more or not page.entries:
                return out
            after = page.cursors[-1]
