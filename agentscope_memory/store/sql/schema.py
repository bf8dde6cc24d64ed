"""Tables written once for every SQL database (added after the first release).

The first tables (memories, lists, key/values, requests) predate this module and keep the
per-database definitions in `sqlite.py` and `postgres.py`, so existing databases stay exactly as
they are. New tables go here, in types both databases read the same way: SQLite maps `BIGINT` to
an integer and `DOUBLE PRECISION` to a real column. Every statement is `IF NOT EXISTS` (or does
nothing when already done): the schema is applied at every start, and never destroys anything.
"""

from __future__ import annotations

# The schema this code writes; recorded in `meta` so later versions can tell what they opened.
SCHEMA_VERSION = "1"

SHARED_SCHEMA = """
CREATE TABLE IF NOT EXISTS {meta} (
    key TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
INSERT INTO {meta} (key, value) VALUES ('schema_version', '%s') ON CONFLICT (key) DO NOTHING;
""" % SCHEMA_VERSION
