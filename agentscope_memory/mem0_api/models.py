"""The request bodies of mem0's REST API, as AgentScope's mem0 clients and mem0's own clients
send them. Unknown fields are ignored (`version`, `output_format`, `async_mode`, `immutable`,
...), as mem0's server does."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Mem0Message(_Lenient):
    """One conversation message: `role` is user, assistant, system or tool; `content` is text
    (or OpenAI-style parts, whose text parts are kept)."""

    role: str = Field(description="user, assistant, system or tool")
    content: str | list[dict[str, Any]] | None = Field(None, description="the message text")

    @field_validator("content", mode="before")
    @classmethod
    def _one_kind(cls, value: Any) -> Any:
        # Checked before the union, whose errors name each of its branches (`content.str: ...;
        # content.list[dict[str,any]]: ...`) rather than what the field takes.
        if value is not None and not isinstance(value, (str, list)):
            raise ValueError("must be text or a list of content parts")
        if isinstance(value, list):
            for i, part in enumerate(value):
                if not isinstance(part, dict):
                    raise ValueError(f"part {i} must be an object such as {{\"type\": \"text\", \"text\": \"...\"}}")
        return value


class Ids(_Lenient):
    """Whose memories: at least one of user_id, agent_id, run_id (AgentScope's userId,
    agentName, runName)."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


class AddRequest(Ids):
    """`POST /memories`, `POST /v1/memories/`, `POST /v3/memories/add/`."""

    messages: list[Mem0Message] = Field(
        description="what to remember: a list of messages, one message, or a string (one user message)")
    filters: dict[str, Any] | None = Field(
        None, description="whose memories, as mem0 2.x's MemoryClient sends them: user_id, agent_id or run_id only")
    app_id: str | None = Field(None, description="kept as the metadata key app_id (memories are not scoped by it)")
    expiration_date: Any = Field(None, description="not supported (memories here do not expire): refused unless null")
    timestamp: Any = Field(None, description="not supported (a memory carries the time it was stored): refused unless null")
    metadata: dict[str, Any] | None = Field(None, description="stored with every memory; searchable as a filter")
    infer: bool = Field(
        True,
        description="extract facts with the server's LLM; without an LLM configured the messages are "
        "stored verbatim, and the response says so (`inferred: false`)",
    )

    @field_validator("messages", mode="before")
    @classmethod
    def _messages(cls, value: Any) -> Any:
        # mem0's add takes one message object or a string too (its Memory.add does); one list
        # type keeps an error's place plain (`messages.0.role`, not each union branch's).
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
        if isinstance(value, dict):
            return [value]
        if not isinstance(value, list):
            raise ValueError("must be a list of messages, one message or a string")
        return value


class SearchRequest(Ids):
    """`POST /search`, `POST /v2/memories/search/`, `POST /v3/memories/search/`. Top-level ids
    are merged into `filters`; every other filter key is a metadata equality filter."""

    query: str = Field(description="what to look for")
    filters: dict[str, Any] | None = Field(None, description='e.g. {"user_id": "alice", "category": "travel"}')
    top_k: int | None = Field(None, ge=1, le=1000, description="at most this many results (default 10)")
    limit: int | None = Field(None, ge=1, le=1000, description="older name of top_k")
    threshold: float | None = Field(None, allow_inf_nan=False, description="drop results scoring below this")
    categories: Any = Field(None, description="not supported (memories here have no categories): refused unless null")


class ListRequest(Ids):
    """`POST /v3/memories/` (mem0's `MemoryClient.get_all`)."""

    filters: dict[str, Any] | None = None
    top_k: int | None = Field(None, ge=1, le=1000)
    page_size: int | None = Field(None, ge=1, le=1000)
    # mem0 platform's narrowing options (MemoryClient.get_all): refused unless null, as
    # ignoring one would answer memories the caller excluded.
    start_date: Any = Field(None, description="not supported: refused unless null")
    end_date: Any = Field(None, description="not supported: refused unless null")
    categories: Any = Field(None, description="not supported (memories here have no categories): refused unless null")


class UpdateRequest(_Lenient):
    """`PUT /memories/{id}`: the new text (`text`, or mem0 server's `data` / `memory`) and/or
    metadata to merge."""

    text: str | None = None
    data: str | None = None
    memory: str | None = None
    metadata: dict[str, Any] | None = None
    # mem0's, and refused unless null: a change the server cannot make is not answered with success.
    timestamp: Any = Field(None, description="not supported: refused unless null")
    expiration_date: Any = Field(None, description="not supported (memories here do not expire); null is accepted")

    def new_text(self) -> str | None:
        return next((t for t in (self.text, self.data, self.memory) if t is not None), None)
