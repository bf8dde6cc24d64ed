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
    tx.scope_set_parent(space, child, parent, now)
    return [parent, *chain]


def detach(tx: Tx, space: str, child: str) -> None:
    tx.scope_lock(space)
    tx.scope_set_parent(space, child, None, 0.0)
