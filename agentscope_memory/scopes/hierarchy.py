"""The rules of a hierarchy, the same for memories and long-term scopes: a node has at most one
parent, lineages are finite (no cycles) and at most `MAX_DEPTH` deep. Every change takes the
tenant's hierarchy lock first (`Tx.scope_lock`), so that two concurrent changes (two replicas)
cannot each pass the cycle check and together close a cycle."""

from __future__ import annotations

from agentscope_memory.errors import FailedPreconditionError, InvalidArgumentError
from agentscope_memory.store.base import Tx

MEMORY_SPACE = "memory"
LTM_SPACE = "ltm"
# Ancestors a node may have (its parent included).
MAX_DEPTH = 32


def ancestors(tx: Tx, space: str, node: str) -> list[str]:
    """`node`'s ancestors, nearest first. Stops at `MAX_DEPTH` or at a repeated node, so that
    even a hierarchy written by hand into the database cannot make a read loop forever."""
    chain: list[str] = []
    current = tx.scope_parent(space, node)
    while current is not None and current != node and current not in chain and len(chain) < MAX_DEPTH:
        chain.append(current)
        current = tx.scope_parent(space, current)
    return chain


def attach(tx: Tx, space: str, child: str, parent: str, now: float, field: str, what: str) -> list[str]:
    """Make `parent` the parent of `child`; returns `child`'s ancestors, nearest first.
    `what` names the node in messages (`memory`, `scope`)."""
    tx.scope_lock(space)
    if parent == child:
        raise InvalidArgumentError(field, f"names the {what} itself; a {what} cannot be its own parent")
    chain = ancestors(tx, space, parent)
    if child in chain:
        raise FailedPreconditionError(
            f"{field}: {parent!r} is a descendant of {child!r}; making it the parent would create a cycle"
        )
    if len(chain) + 1 > MAX_DEPTH:
        raise FailedPreconditionError(
            f"{field}: {parent!r} already has {len(chain)} ancestors; a lineage is at most {MAX_DEPTH} deep"
        )
    # `child`'s descendants move down with it: the deepest of them must stay within the limit
    # too, or its reads would stop short of the root (`ancestors` stops at MAX_DEPTH).
    below = _levels_below(tx, space, child, MAX_DEPTH - len(chain) - 1)
    if len(chain) + 1 + below > MAX_DEPTH:
        raise FailedPreconditionError(
            f"{field}: under {parent!r}, which has {len(chain)} ancestors, the descendants of {child!r} would "
            f"have more than {MAX_DEPTH} ancestors; a lineage is at most {MAX_DEPTH} deep"
        )
    tx.scope_set_parent(space, child, parent, now)
    return [parent, *chain]


def detach(tx: Tx, space: str, child: str) -> None:
    tx.scope_lock(space)
    tx.scope_set_parent(space, child, None, 0.0)


def _levels_below(tx: Tx, space: str, node: str, allowed: int) -> int:
    """How many levels of descendants `node` has, counted up to `allowed + 1` (enough to know
    the limit is passed). `seen` keeps a hierarchy written by hand with a cycle from looping."""
    level, depth, seen = [node], 0, {node}
    while level and depth <= allowed:
        following: list[str] = []
        for parent in level:
            after = ""
            while True:
                children = tx.scope_children(space, parent, after, 1000)
                following.extend(c for c in children if c not in seen)
                seen.update(children)
                if len(children) < 1000:
                    break
                after = children[-1]
        if not following:
            break
        depth += 1
        level = following
    return depth
