"""What a metadata filter means, wherever it is applied (the in-memory index, the mem0 facade;
store/sql/long_term.py says the same in SQL): each key's value equal as JSON values are equal,
which Python's `==` is not (`True == 1`), and never containment (a list is not equal to a longer
list holding it)."""

from __future__ import annotations

from typing import Any, Mapping


def json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values (as PostgreSQL's jsonb `=`): a boolean only equals a boolean,
    numbers by value (1 equals 1.0), arrays item by item, objects key by key."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def metadata_matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether `metadata` holds every key of `wanted` with an equal value."""
    return all(k in metadata and json_equal(metadata[k], v) for k, v in wanted.items())
