"""The three visibilities of a stored item."""

from __future__ import annotations

from agentscope_memory.errors import InvalidArgumentError

# Only the memory (scope) that holds it: the default, and what every item was before scopes.
LOCAL = "LOCAL"
# Also its descendants.
SHARED = "SHARED"
# Every memory (scope) of the tenant.
GLOBAL = "GLOBAL"
VISIBILITIES = (LOCAL, SHARED, GLOBAL)
# What a descendant inherits from an ancestor, and what anyone inherits from anyone.
FROM_ANCESTORS = (SHARED, GLOBAL)
FROM_ANYONE = (GLOBAL,)


def check_visibility(value: str | None, field: str = "visibility") -> str:
    """`value` as one of `VISIBILITIES` (empty or None: LOCAL); INVALID_ARGUMENT otherwise."""
    if not value:
        return LOCAL
    upper = value.upper()
    if upper not in VISIBILITIES:
        raise InvalidArgumentError(field, f"is {value!r}; must be one of LOCAL, SHARED, GLOBAL")
    return upper
