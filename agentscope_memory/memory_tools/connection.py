"""What one MCP connection is bound to: scope fields and a working memory fixed for it.

An operator fixes them (server settings, the URL an agent is given, `agentscope-memory mcp`
flags) so that a model cannot reach another user's memories: a fixed field disappears from the
tools' schemas, and a memory outside the fixed scope is reported exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.ids import check_id

# The names used in URLs (`?user_id=...`), CLI flags and tool arguments alike.
BINDABLE = ("user_id", "agent_name", "run_name", "working_memory_id")


@dataclass(frozen=True)
class Connection:
    """Fixed values; "" means the model chooses that field per call."""

    user_id: str = ""
    agent_name: str = ""
    run_name: str = ""
    working_memory_id: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value:
                check_id(value, f.name)

    @classmethod
    def from_params(cls, params: Mapping[str, str], ignore: tuple[str, ...] = ()) -> Connection:
        """From URL query parameters; anything but the bindable names (and `ignore`) is refused,
        so a misspelt `userid=` cannot silently leave the scope open, and so is an empty value:
        `?user_id=` from a template whose user was missing would leave it open just as well."""
        values: dict[str, str] = {}
        for name, value in params.items():
            if name in ignore:
                continue
            if name not in BINDABLE:
                raise InvalidArgumentError(name, f"is not a connection parameter; use {', '.join(BINDABLE)}")
            if not value:
                raise InvalidArgumentError(name, "must not be empty; leave it out to let the model choose")
            values[name] = value
        return cls(**values)

    def narrowed(self, other: Connection) -> Connection:
        """This connection with `other`'s fixed fields added. A field both fix differently is
        refused: a URL cannot widen or move what the server configuration fixed."""
        changes: dict[str, str] = {}
        for name in BINDABLE:
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs and mine and theirs != mine:
                raise InvalidArgumentError(name, f"is fixed to {mine!r} for this server; {theirs!r} is not allowed")
            if theirs and not mine:
                changes[name] = theirs
        return replace(self, **changes)

    @property
    def fixed_scope(self) -> dict[str, str]:
        return {n: getattr(self, n) for n in ("user_id", "agent_name", "run_name") if getattr(self, n)}
