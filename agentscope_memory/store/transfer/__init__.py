"""Copying a whole store from one SQL database to another (`agentscope-memory migrate store`):
SQLite to PostgreSQL when a deployment outgrows the embedded default, and back for a local copy.

`endpoints.py` opens the two databases and reads their schemas; `tables.py` says how each table
is keyed and which columns differ between the databases; `copy.py` checks, copies and compares.
"""

from agentscope_memory.store.transfer.copy import COPY_MARKER, CopyRefused, TableCopied, copy_store
from agentscope_memory.store.transfer.endpoints import Endpoint, parse_endpoint

__all__ = ["COPY_MARKER", "CopyRefused", "Endpoint", "TableCopied", "copy_store", "parse_endpoint"]
