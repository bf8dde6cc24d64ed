"""Parent/child scopes in long-term memory.

A long-term memory's visibility is where it is stored: LOCAL memories under their exact scope's
key (as before scopes existed), SHARED and GLOBAL ones under a sibling key of the same exact
scope (`visible_key`), registered in the long-term scopes like any other, so that the scope's own
searches and listings see all three, and in `scope_ltm_keys`, so that a descendant's search can
add its ancestors' SHARED and GLOBAL keys and anyone's search every GLOBAL key of the tenant
(`LongTermScopes.search_keys`). The ranked search itself is unchanged: it only reads more keys.
"""

from __future__ import annotations

import json
from typing import Sequence

from agentscope_memory.long_term.engine import LongTermItem, Scope
from agentscope_memory.scopes.hierarchy import LTM_SPACE, ancestors
from agentscope_memory.scopes.visibility import FROM_ANCESTORS, LOCAL, VISIBILITIES
from agentscope_memory.store.base import Tx

_FIELDS = ("agent_name", "user_id", "run_name")


def exact_key(scope: Scope) -> str:
    """The exact scope's key (the same text as `long_term.hybrid.records.scope_key`)."""
    return json.dumps([scope.agent_name, scope.user_id, scope.run_name], ensure_ascii=False)


def visible_key(scope: Scope, visibility: str) -> str:
    """Where memories of `scope` with `visibility` are stored."""
    if visibility == LOCAL:
        return exact_key(scope)
    return json.dumps([scope.agent_name, scope.user_id, scope.run_name, visibility], ensure_ascii=False)


def visibility_of_key(key: str) -> str:
    # Only keys written by `visible_key` end with a visibility: cheap before parsing.
    if key.endswith('"]') and (key.endswith('"SHARED"]') or key.endswith('"GLOBAL"]')):
        parts = json.loads(key)
        if len(parts) == 4 and parts[3] in VISIBILITIES:
            return str(parts[3])
    return LOCAL


def scope_of_key(key: str) -> Scope:
    parts = json.loads(key)
    return Scope(parts[0], parts[1], parts[2])


def covers(scope: Scope, other: Scope) -> bool:
    """Whether a search in `scope` reads `other`'s own memories (every field it names equal)."""
    return all(not getattr(scope, f) or getattr(scope, f) == getattr(other, f) for f in _FIELDS)


class LongTermScopes:
    """The hook `HybridEngine` calls: which keys a search reads, which results it inherited."""

    def search_keys(self, tx: Tx, scope: Scope, keys: Sequence[str]) -> list[str]:
        """`keys` (the scopes `scope` covers) plus the SHARED and GLOBAL keys of their
        ancestors and every GLOBAL key of the tenant."""
        bases = [k for k in keys if visibility_of_key(k) == LOCAL]
        own = exact_key(scope)
        if own not in bases:
            # A child that has recorded nothing yet still inherits.
            bases.append(own)
        lineage: list[str] = []
        for base in bases:
            for ancestor in ancestors(tx, LTM_SPACE, base):
                if ancestor not in lineage:
                    lineage.append(ancestor)
        extra = tx.scope_ltm_visible_keys(lineage) + tx.scope_ltm_global_keys()
        out = list(keys)
        seen = set(out)
        for key in extra:
            if key not in seen:
                seen.add(key)
                out.append(key)
        return out

    def tag(self, scope: Scope, items: Sequence[LongTermItem]) -> None:
        """Mark the results `scope` inherited (their `scope` is their origin)."""
        for item in items:
            item.inherited = not covers(scope, item.scope)


__all__ = ["FROM_ANCESTORS", "LongTermScopes", "covers", "exact_key", "scope_of_key", "visibility_of_key", "visible_key"]
