"""The memory tools a model calls over MCP: names, descriptions, JSON schemas and what they do.

Written for a model to choose and fill correctly: one verb per tool, flat arguments, every
argument described, limits stated in the schema. Descriptions are English; every text argument
takes any language. A tool either returns a JSON-ready dict or raises a `MemoryServiceError`
whose message names the argument and says what to change; it checks every argument before it
touches anything, so a failed call changes nothing.

This module knows no MCP SDK: the transport (server/agentscope_memory_server/mcp/) lists
`tool_definitions()` and routes calls to `call_tool()`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentscope_memory.errors import (
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
)
from agentscope_memory.ids import check_id
from agentscope_memory.long_term.engine import HistoryEntry, LongTermItem, Scope
from agentscope_memory.memory_tools.access import MemoryAccess
from agentscope_memory.memory_tools.budget import RESULT_BUDGET, fit_text, tool_cost
from agentscope_memory.memory_tools.connection import Connection
from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.paging import cut_to_budget
from agentscope_memory.validation.messages import check_json_value

MAX_TEXTS = 100
MAX_TEXT_CHARS = 64 * 1024
MAX_TOP_K = 50
MAX_PAGE_SIZE = 100
MAX_METADATA_BYTES = 16 * 1024

ADD = "add_long_term_memory"
SEARCH = "search_long_term_memory"
LIST = "list_long_term_memories"
GET = "get_long_term_memory"
UPDATE = "update_long_term_memory"
DELETE = "delete_long_term_memory"
HISTORY = "get_long_term_memory_history"
READ = "read_working_memory"
APPEND = "append_working_memory"

_SCOPE_DOC = {
    "user_id": "The user the memories belong to, e.g. \"alice\". Give it for anything about a person.",
    "agent_name": "The agent the memories belong to, e.g. \"assistant\".",
    "run_name": "One run or task, e.g. \"trip-2026-05\", for memories that matter only there.",
}
_MEMORY_ID = {"type": "string", "minLength": 1, "description": "The id of a long-term memory, as returned by search, list or add."}
_PAGE_TOKEN = {"type": "string", "description": "next_page_token from the previous call; omit for the first page."}
_METADATA = {
    "type": "object",
    "description": "Optional labels stored with the memory, e.g. {\"topic\": \"travel\"}. JSON values; at most 16 KiB.",
}
_IMPORTANCE = {
    "type": "number", "minimum": 0, "maximum": 1,
    "description": "Optional: how important this is to remember, from 0 (trivial) to 1 (essential).",
}
_PINNED_ADD = {
    "type": "boolean", "default": False,
    "description": "Optional: pin these facts so they are never forgotten, never lose relevance with age and are "
                   "never merged away; for what the user asks you to always remember. A fact already stored "
                   "is pinned too.",
}
_PINNED_UPDATE = {
    "type": "boolean",
    "description": "Optional: true pins the memory (never forgotten, no loss of relevance with age), false "
                   "unpins it; left out, the pin stays as it is.",
}


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    destructive: bool = False


def _scope_properties(conn: Connection) -> dict[str, Any]:
    fixed = conn.fixed_scope
    return {n: {"type": "string", "minLength": 1, "description": d} for n, d in _SCOPE_DOC.items() if n not in fixed}


def _scope_note(conn: Connection) -> str:
    fixed = conn.fixed_scope
    open_fields = [n for n in _SCOPE_DOC if n not in fixed]
    if fixed and not open_fields:
        return " The scope is fixed for this connection."
    if fixed:
        return " Part of the scope is fixed for this connection; you may narrow it with " + " / ".join(open_fields) + "."
    return " Give at least one of user_id, agent_name or run_name."


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def tool_definitions(conn: Connection | None = None) -> list[ToolDefinition]:
    """The tools for a connection: fixed scope fields and a fixed working memory are not asked for."""
    conn = conn or Connection()
    scope = _scope_properties(conn)
    note = _scope_note(conn)
    wm: dict[str, Any] = {}
    wm_required: list[str] = []
    if not conn.working_memory_id:
        wm = {"working_memory_id": {"type": "string", "minLength": 1,
                                    "description": "The conversation's working memory id (the session id)."}}
        wm_required = ["working_memory_id"]
    wm_note = " The working memory is fixed for this connection." if conn.working_memory_id else ""
    return [
        ToolDefinition(
            ADD, "Remember facts",
            "Save facts to long-term memory so they can be found again in later conversations. "
            "Use it when the user shares a preference, a personal detail, a decision or anything "
            "worth remembering. Write each fact as one short self-contained sentence, in the "
            "user's language." + note,
            _object({
                "texts": {"type": "array", "minItems": 1, "maxItems": MAX_TEXTS,
                          "items": {"type": "string", "minLength": 1},
                          "description": "The facts to remember, one per item, e.g. [\"Alice is allergic to peanuts\"]."},
                **scope, "metadata": _METADATA, "importance": _IMPORTANCE, "pinned": _PINNED_ADD,
            }, ["texts"]),
            read_only=False,
        ),
        ToolDefinition(
            SEARCH, "Search memories",
            "Find long-term memories relevant to a question or topic, best match first, each with "
            "its id and relevance score. Use it before answering anything that may depend on what "
            "you were told earlier." + note,
            _object({
                "query": {"type": "string", "minLength": 1,
                          "description": "What to look for, in natural language, any language."},
                "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": 5,
                          "description": "How many memories to return at most (default 5)."},
                "filters": {"type": "object",
                            "description": "Optional: only memories whose metadata has all these key/value pairs, e.g. {\"topic\": \"travel\"}.",
                            "additionalProperties": {"type": ["string", "number", "boolean"]}},
                **scope,
            }, ["query"]),
            read_only=True,
        ),
        ToolDefinition(
            LIST, "List memories",
            "List the long-term memories of a scope, oldest first, a page at a time." + note,
            _object({
                **scope,
                "page_size": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20,
                              "description": "Memories per page (default 20)."},
                "page_token": _PAGE_TOKEN,
            }, []),
            read_only=True,
        ),
        ToolDefinition(
            GET, "Get a memory", "Read one long-term memory by its id.",
            _object({"memory_id": _MEMORY_ID}, ["memory_id"]), read_only=True,
        ),
        ToolDefinition(
            UPDATE, "Correct a memory",
            "Change a long-term memory that is outdated or wrong: replace its text, merge metadata "
            "into it, set its importance or pin or unpin it. The old version stays in its history.",
            _object({
                "memory_id": _MEMORY_ID,
                "text": {"type": "string", "minLength": 1, "description": "The corrected fact, replacing the old text."},
                "metadata": _METADATA, "importance": _IMPORTANCE, "pinned": _PINNED_UPDATE,
            }, ["memory_id"]),
            read_only=False,
        ),
        ToolDefinition(
            DELETE, "Forget a memory",
            "Delete one long-term memory by its id, e.g. when the user asks you to forget it.",
            _object({"memory_id": _MEMORY_ID}, ["memory_id"]), read_only=False, destructive=True,
        ),
        ToolDefinition(
            HISTORY, "Memory history",
            "Every change of a long-term memory, oldest first, a page at a time: when it was added, "
            "updated (old and new text) or deleted.",
            _object({
                "memory_id": _MEMORY_ID,
                "page_size": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20,
                              "description": "Changes per page (default 20)."},
                "page_token": _PAGE_TOKEN,
            }, ["memory_id"]), read_only=True,
        ),
        ToolDefinition(
            READ, "Read the conversation",
            "Read the messages of a conversation's working memory, oldest first and newest last, a "
            "page at a time; total_size says how many there are." + wm_note,
            _object({
                **wm,
                "page_size": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 20,
                              "description": "Messages per page (default 20)."},
                "page_token": _PAGE_TOKEN,
            }, wm_required),
            read_only=True,
        ),
        ToolDefinition(
            APPEND, "Add to the conversation",
            "Append messages to a conversation's working memory (created on first use)." + wm_note,
            _object({
                **wm,
                "messages": {
                    "type": "array", "minItems": 1, "maxItems": MAX_TEXTS,
                    "description": "The messages to append, in order.",
                    "items": _object({
                        "role": {"type": "string", "enum": ["user", "assistant", "system"],
                                 "description": "Who said it."},
                        "text": {"type": "string", "description": "What was said, any language."},
                        "name": {"type": "string", "description": "Optional name of the speaker."},
                    }, ["role", "text"]),
                },
            }, [*wm_required, "messages"]),
            read_only=False,
        ),
    ]


# -- reading arguments ------------------------------------------------------------------------


class _Args:
    """A tool call's arguments, read with messages that name the argument and what to send."""

    def __init__(self, tool: ToolDefinition, args: Mapping[str, Any] | None, conn: Connection) -> None:
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise InvalidArgumentError("arguments", "must be a JSON object")
        self.args = dict(args)
        self.conn = conn
        allowed = set(tool.input_schema["properties"])
        for name in self.args:
            if name in allowed:
                continue
            fixed = getattr(conn, name, "") if name in ("user_id", "agent_name", "run_name", "working_memory_id") else ""
            if fixed:
                if self.args[name] != fixed:
                    raise InvalidArgumentError(name, f"is fixed to {fixed!r} for this connection; leave it out")
                continue
            raise InvalidArgumentError(name, f"is not an argument of {tool.name}; it takes {', '.join(sorted(allowed))}")

    def text(self, name: str, *, required: bool = False, max_chars: int = MAX_TEXT_CHARS) -> str | None:
        value = self.args.get(name)
        if value is None:
            if required:
                raise InvalidArgumentError(name, "is required")
            return None
        if not isinstance(value, str):
            raise InvalidArgumentError(name, f"must be a string, not {_json_type(value)}")
        if not value.strip():
            raise InvalidArgumentError(name, "must not be empty")
        if len(value) > max_chars:
            raise ResourceExhaustedError(name, f"has {len(value)} characters; at most {max_chars}")
        return value

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        value = self.args.get(name)
        if value is None:
            return default
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(name, f"must be an integer from {low} to {high}, not {_json_type(value)}")
        if not low <= value <= high:
            raise InvalidArgumentError(name, f"is {value}; must be from {low} to {high}")
        return value

    def token(self, name: str = "page_token") -> str:
        value = self.args.get(name)
        if value is None or value == "":
            return ""
        if not isinstance(value, str):
            raise InvalidArgumentError(name, f"must be a string, not {_json_type(value)}")
        return value

    def object(self, name: str) -> dict[str, Any] | None:
        value = self.args.get(name)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InvalidArgumentError(name, f"must be a JSON object, not {_json_type(value)}")
        # Before measuring it: a lone surrogate (valid JSON escape, no UTF-8 form) made the
        # measure itself fail, an internal error instead of this argument's.
        check_json_value(value, name)
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
        if size > MAX_METADATA_BYTES:
            raise ResourceExhaustedError(name, f"is {size} bytes as JSON; at most {MAX_METADATA_BYTES}")
        for key in value:
            if not key:
                raise InvalidArgumentError(name, "keys must not be empty")
        return value

    def importance(self) -> float | None:
        value = self.args.get("importance")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InvalidArgumentError("importance", f"must be a number from 0 to 1, not {value!r}")
        return float(value)

    def pinned(self) -> bool | None:
        value = self.args.get("pinned")
        if value is None:
            return None
        if not isinstance(value, bool):
            raise InvalidArgumentError("pinned", f"must be true or false, not {_json_type(value)}")
        return value

    def memory_id(self) -> str:
        value = self.text("memory_id", required=True, max_chars=256)
        assert value is not None
        return value

    def scope(self) -> Scope:
        values = dict(self.conn.fixed_scope)
        for name in ("user_id", "agent_name", "run_name"):
            if name in values:
                continue
            value = self.text(name, max_chars=256)
            if value is not None:
                check_id(value, name)
                values[name] = value
        if not values:
            raise InvalidArgumentError(
                "user_id", "give at least one of user_id, agent_name or run_name to say whose memories these are"
            )
        return Scope(values.get("agent_name", ""), values.get("user_id", ""), values.get("run_name", ""))

    def working_memory_id(self) -> str:
        if self.conn.working_memory_id:
            return self.conn.working_memory_id
        value = self.text("working_memory_id", required=True, max_chars=256)
        assert value is not None
        check_id(value, "working_memory_id")
        return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


# -- results ----------------------------------------------------------------------------------


def item_json(item: LongTermItem) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": item.id,
        "text": item.text,
        "scope": {k: v for k, v in (("user_id", item.scope.user_id), ("agent_name", item.scope.agent_name),
                                    ("run_name", item.scope.run_name)) if v},
    }
    if item.score is not None:
        out["score"] = round(float(item.score), 6)
    # Engines that rank with several signals (semantic, lexical, decay, importance, final)
    # expose them so a user can see why a memory came back.
    components = getattr(item, "scores", None)
    if components is not None and dataclasses.is_dataclass(components) and not isinstance(components, type):
        components = dataclasses.asdict(components)
    if isinstance(components, dict) and components:
        out["score_components"] = {k: round(float(v), 6) for k, v in components.items() if isinstance(v, (int, float))}
    for name in ("memory_type", "domain", "importance"):
        value = getattr(item, name, None)
        if value not in (None, ""):
            out[name] = value
    # Always there, false too: a reader can tell an unpinned memory from an older server's answer.
    out["pinned"] = bool(getattr(item, "pinned", False))
    if item.metadata:
        out["metadata"] = item.metadata
    if item.created_at:
        out["created_at"] = item.created_at
    if item.updated_at:
        out["updated_at"] = item.updated_at
    return out


def _history_json(entry: HistoryEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"event": entry.event, "old_text": entry.old_text, "new_text": entry.new_text}
    if entry.created_at:
        out["created_at"] = entry.created_at
    if entry.updated_at:
        out["updated_at"] = entry.updated_at
    return out


def message_json(msg: Msg) -> dict[str, Any]:
    out: dict[str, Any] = {"role": (msg.role.value.lower() if msg.role else None), "text": msg.text_content}
    if msg.name:
        out["name"] = msg.name
    if msg.id:
        out["id"] = msg.id
    if msg.timestamp:
        out["timestamp"] = msg.timestamp
    others = sorted({type(b).__name__ for b in msg.content} - {"TextBlock"})
    if others:
        out["other_content"] = others
    return out


def _encode_offset(scope: Scope, offset: int) -> str:
    raw = json.dumps(["ltm-list", scope.agent_name, scope.user_id, scope.run_name, offset], ensure_ascii=False)
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode().rstrip("=")


def _decode_offset(token: str, scope: Scope) -> int:
    if not token:
        return 0
    try:
        value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if (isinstance(value, list) and len(value) == 5 and value[:4] == ["ltm-list", scope.agent_name, scope.user_id, scope.run_name]
                and isinstance(value[4], int) and not isinstance(value[4], bool) and 0 < value[4]):
            return value[4]
    except (ValueError, binascii.Error, UnicodeDecodeError):
        pass
    raise InvalidArgumentError("page_token", "is not a next_page_token of this listing (same scope); omit it to start over")


async def list_page(access: MemoryAccess, scope: Scope, page_size: int, page_token: str,
                    cost: Callable[[Any], int] = tool_cost) -> tuple[list[LongTermItem], str]:
    """One page of a scope's long-term memories (at most `page_size`, and what fits
    `RESULT_BUDGET` as `cost` counts each memory's JSON), and the token of the next ("" at the
    end)."""
    offset = _decode_offset(page_token, scope)
    # Every memory is listed, however many: a listing that stopped at an offset cap ended
    # early with no next_page_token, as if the scope held no more.
    items = await access.list_long_term(scope, page_size + 1, offset)
    page = items[:page_size]
    page = page[:cut_to_budget(page, lambda i: cost(item_json(i)), RESULT_BUDGET)]
    more = len(items) > len(page)
    return page, _encode_offset(scope, offset + len(page)) if more else ""


def _fitting(values: list[dict[str, Any]]) -> int:
    """How many leading `values` fit one tool result."""
    return cut_to_budget(values, tool_cost, RESULT_BUDGET)


# -- the tools --------------------------------------------------------------------------------


class MemoryTools:
    """The tools of one connection over one caller's `MemoryAccess`."""

    def __init__(self, access: MemoryAccess, conn: Connection | None = None) -> None:
        self.access = access
        self.conn = conn or Connection()
        self.definitions = {t.name: t for t in tool_definitions(conn)}
        self._handlers: dict[str, Callable[[_Args], Awaitable[dict[str, Any]]]] = {
            ADD: self._add, SEARCH: self._search, LIST: self._list, GET: self._get, UPDATE: self._update,
            DELETE: self._delete, HISTORY: self._history, READ: self._read, APPEND: self._append,
        }

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        tool = self.definitions.get(name)
        if tool is None:
            raise InvalidArgumentError("name", f"there is no tool {name!r}; the tools are {', '.join(self.definitions)}")
        return await self._handlers[name](_Args(tool, arguments, self.conn))

    def _in_scope(self, item: LongTermItem) -> bool:
        fixed = self.conn.fixed_scope
        actual = {"user_id": item.scope.user_id, "agent_name": item.scope.agent_name, "run_name": item.scope.run_name}
        return all(actual[k] == v for k, v in fixed.items())

    async def _owned(self, memory_id: str) -> LongTermItem:
        item = await self.access.get(memory_id)
        if not self._in_scope(item):
            # Exactly what a missing memory says: the connection learns nothing about others'.
            raise NotFoundError(f"long-term memory {memory_id!r} does not exist")
        return item

    async def _add(self, a: _Args) -> dict[str, Any]:
        texts = a.args.get("texts")
        if not isinstance(texts, list) or not texts:
            raise InvalidArgumentError("texts", "must be a non-empty array of strings, e.g. [\"Alice likes tea\"]")
        if len(texts) > MAX_TEXTS:
            raise ResourceExhaustedError("texts", f"has {len(texts)} items; at most {MAX_TEXTS} per call")
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise InvalidArgumentError(f"texts[{i}]", "must be a non-empty string")
            if len(text) > MAX_TEXT_CHARS:
                raise ResourceExhaustedError(f"texts[{i}]", f"has {len(text)} characters; at most {MAX_TEXT_CHARS}")
        scope = a.scope()
        metadata = dict(a.object("metadata") or {})
        importance = a.importance()
        if importance is not None:
            metadata["importance"] = importance
        pinned = bool(a.pinned())
        msgs = [Msg.create(MsgRole.USER, t) for t in texts]
        items = await self.access.record(scope, msgs, metadata, pinned)
        if importance is not None:
            # Record takes no importance: set it as a user's (which ranking uses and background
            # scoring leaves alone), rather than only noting it in the metadata.
            items = [await self.access.update(i.id, None, None, importance, None) for i in items]
        stored = [item_json(i) for i in items]
        kept = _fitting(stored)
        result: dict[str, Any] = {"stored": stored[:kept], "stored_count": len(items)}
        notes = []
        if len(items) < len(texts):
            notes.append("texts already stored in this scope were not stored again")
        if kept < len(stored):
            # All are stored; only the echo is cut, as gRPC's Record cuts its echo.
            notes.append(f"only the first {kept} stored memories are shown (the answer's size limit); "
                         f"{LIST} lists them all")
        if notes:
            result["note"] = "; ".join(notes)
        return result

    async def _search(self, a: _Args) -> dict[str, Any]:
        query = a.text("query", required=True)
        assert query is not None
        top_k = a.integer("top_k", 5, 1, MAX_TOP_K)
        filters = a.object("filters") or {}
        for key, value in filters.items():
            if not isinstance(value, (str, int, float, bool)):
                raise InvalidArgumentError(f"filters.{key}", "must be a string, number or boolean")
        scope = a.scope()
        items = await self.access.search(scope, query, top_k, filters)
        results = [item_json(i) for i in items[:top_k]]
        kept = _fitting(results)
        if kept < len(results):
            # The tail goes, as gRPC's search cuts it: the best matches still come back.
            return {"results": results[:kept],
                    "note": f"only the best {kept} results fit one answer; ask for fewer (top_k) or narrow the query"}
        return {"results": results}

    async def _list(self, a: _Args) -> dict[str, Any]:
        page_size = a.integer("page_size", 20, 1, MAX_PAGE_SIZE)
        token = a.token()
        scope = a.scope()
        items, next_token = await list_page(self.access, scope, page_size, token)
        return {"memories": [item_json(i) for i in items], "next_page_token": next_token}

    async def _get(self, a: _Args) -> dict[str, Any]:
        return {"memory": item_json(await self._owned(a.memory_id()))}

    async def _update(self, a: _Args) -> dict[str, Any]:
        memory_id = a.memory_id()
        text = a.text("text")
        metadata = a.object("metadata")
        importance = a.importance()
        if importance is not None:
            metadata = {**(metadata or {}), "importance": importance}
        pinned = a.pinned()
        if text is None and metadata is None and pinned is None:
            raise InvalidArgumentError("text", "give text, metadata, importance or pinned: there is nothing to change")
        await self._owned(memory_id)
        return {"memory": item_json(await self.access.update(memory_id, text, metadata, importance, pinned))}

    async def _delete(self, a: _Args) -> dict[str, Any]:
        memory_id = a.memory_id()
        await self._owned(memory_id)
        await self.access.delete(memory_id)
        return {"deleted": memory_id}

    async def _history(self, a: _Args) -> dict[str, Any]:
        memory_id = a.memory_id()
        page_size = a.integer("page_size", 20, 1, MAX_PAGE_SIZE)
        token = a.token()
        await self._owned(memory_id)
        page = await self.access.history_page(memory_id, page_size, token,
                                              (lambda e: tool_cost(_history_json(e)), RESULT_BUDGET))
        return {"memory_id": memory_id, "history": [_history_json(e) for e in page.entries],
                "next_page_token": page.next_page_token}

    async def _read(self, a: _Args) -> dict[str, Any]:
        memory_id = a.working_memory_id()
        page_size = a.integer("page_size", 20, 1, MAX_PAGE_SIZE)
        page = await self.access.read_messages(memory_id, page_size, a.token(),
                                               (lambda m: tool_cost(message_json(m)), RESULT_BUDGET))
        return {
            "working_memory_id": memory_id,
            "messages": [fit_text(message_json(m), tool_cost) for m in page.messages],
            "total_size": page.total_size,
            "next_page_token": page.next_page_token,
        }

    async def _append(self, a: _Args) -> dict[str, Any]:
        memory_id = a.working_memory_id()
        raw = a.args.get("messages")
        if not isinstance(raw, list) or not raw:
            raise InvalidArgumentError("messages", "must be a non-empty array of {role, text} objects")
        if len(raw) > MAX_TEXTS:
            raise ResourceExhaustedError("messages", f"has {len(raw)} items; at most {MAX_TEXTS} per call")
        roles = {"user": MsgRole.USER, "assistant": MsgRole.ASSISTANT, "system": MsgRole.SYSTEM}
        msgs: list[Msg] = []
        for i, m in enumerate(raw):
            where = f"messages[{i}]"
            if not isinstance(m, dict):
                raise InvalidArgumentError(where, "must be an object with role and text")
            unknown = set(m) - {"role", "text", "name"}
            if unknown:
                raise InvalidArgumentError(f"{where}.{min(unknown)}", "is not a message field; use role, text and name")
            role = m.get("role")
            if not isinstance(role, str) or role.lower() not in roles:
                raise InvalidArgumentError(f"{where}.role", "must be one of user, assistant, system")
            text = m.get("text")
            if not isinstance(text, str):
                raise InvalidArgumentError(f"{where}.text", "is required and must be a string")
            if len(text) > MAX_TEXT_CHARS:
                raise ResourceExhaustedError(f"{where}.text", f"has {len(text)} characters; at most {MAX_TEXT_CHARS}")
            name = m.get("name")
            if name is not None and (not isinstance(name, str) or len(name) > 256):
                raise InvalidArgumentError(f"{where}.name", "must be a string of at most 256 characters")
            msgs.append(Msg.create(roles[role.lower()], text, name=name or role.lower()))
        count = await self.access.append_messages(memory_id, msgs)
        return {"working_memory_id": memory_id, "appended": len(msgs), "total_size": count}
