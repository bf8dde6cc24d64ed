"""`agentscope-memory migrate ...`: moving a whole store between databases, and the data of
earlier versions into a store. Bars on stderr; the summary on stdout; any failure is one line
on stderr and exit status 1.

store  copies every table of one store (--from) into an empty other (--to): a data dir (its
       SQLite file) or a postgresql:// URL on either side
mem0   moves the long-term memories of the earlier mem0 layout (--from, e.g. ./data/mem0) into
       a store (--to; default the configured one), as a server's first start would
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentscope_memory.errors import UnavailableError
from agentscope_memory.store import SQLITE_FILE_NAME
from agentscope_memory.store.base import StoreOpenError
from agentscope_memory.store.transfer import CopyRefused, Endpoint, copy_store, parse_endpoint
from agentscope_memory_server.config import describe_invalid
from agentscope_memory_server.data_dir_lock import DataDirInUseError, DataDirLock
from agentscope_memory_server.progress import count_progress, total_progress


def add_parser(commands: argparse._SubParsersAction) -> None:
    migrate = commands.add_parser("migrate", help="copy a store to another database; move data of earlier versions")
    actions = migrate.add_subparsers(dest="action", required=True)
    store = actions.add_parser(
        "store", help="copy a whole store into an empty database (SQLite <-> PostgreSQL)",
        description="Copies every table (memories, long-term memories with their embeddings, pools, agent "
                    "state, scopes, jobs, ...) in key order, then compares the row counts. The target must be "
                    "empty, or hold an interrupted copy of the same source (run again to resume). No server may "
                    "run on an SQLite source or target meanwhile.")
    store.add_argument("--from", dest="source", required=True,
                       help="the store to copy: a data dir (as `serve --data-dir`), its SQLite file, or a postgresql:// URL")
    store.add_argument("--to", dest="target", required=True, help="the empty store to copy into, given the same ways")
    store.add_argument("--batch-rows", type=int, default=500, help="rows per target transaction (default 500)")
    store.add_argument("--progress", action="store_true", help="show the bars even when stderr is not a terminal")
    mem0 = actions.add_parser(
        "mem0", help="move the long-term memories of the earlier mem0 layout into a store",
        description="What a server does once at its first start on a data dir holding mem0/, run on request: "
                    "every mem0 point becomes a long-term memory (same id, scope, text, metadata, history). The "
                    "old directory is left as it was.")
    mem0.add_argument("--from", dest="source", type=Path, required=True,
                      help="the mem0 directory (holding qdrant/ and history.db), or the data dir holding it")
    mem0.add_argument("--to", dest="target",
                      help="the store: a data dir or a postgresql:// URL (default: the configured store)")
    mem0.add_argument("--config", type=Path, help="TOML config file (the store and the embedder; flags and env win)")
    mem0.add_argument("--progress", action="store_true", help="show the bar even when stderr is not a terminal")


def run(args: argparse.Namespace) -> int:
    try:
        return _store(args) if args.action == "store" else _mem0(args)
    except KeyboardInterrupt:
        again = "; run the same command again to resume" if args.action == "store" else ""
        print(f"agentscope-memory migrate {args.action}: interrupted{again}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # the command line stops quietly when the reader of stdout goes away
    except ValidationError as exc:
        return _fail(args, ValueError(f"invalid configuration: {describe_invalid(exc)}"))
    except (CopyRefused, OSError, ValueError, StoreOpenError, UnavailableError, sqlite3.Error) as exc:
        return _fail(args, exc)
    except Exception as exc:  # noqa: BLE001 - the command's contract: one line, never a traceback
        if type(exc).__module__.startswith("psycopg"):
            return _fail(args, exc)
        return _fail(args, exc, f"{type(exc).__name__}: ")


def _fail(args: argparse.Namespace, exc: BaseException, prefix: str = "") -> int:
    text = " ".join(str(exc).split()) or type(exc).__name__
    print(f"agentscope-memory migrate {args.action}: {prefix}{text}", file=sys.stderr)
    return 1


def _lock(stack: ExitStack, endpoint: Endpoint, role: str) -> None:
    """Holds the server lock of an SQLite store's data dir: no server writes it meanwhile."""
    if endpoint.kind != "sqlite":
        return
    lock = DataDirLock(endpoint.data_dir)
    try:
        lock.acquire()
    except DataDirInUseError as exc:
        who = f" (pid {exc.holder})" if exc.holder else ""
        raise CopyRefused(f"the {role} {endpoint.data_dir} is in use by a running agentscope-memory server{who};"
                          " stop it first") from None
    stack.callback(lock.release)


def _store(args: argparse.Namespace) -> int:
    if args.batch_rows < 1:
        raise CopyRefused(f"--batch-rows must be at least 1, not {args.batch_rows}")
    source, target = parse_endpoint(args.source), parse_endpoint(args.target)
    with ExitStack() as stack:
        if source.exists():
            _lock(stack, source, "source")
        # A data dir not there yet has no server on it; locking it would create it, even when
        # the copy is refused.
        if target.kind == "sqlite" and target.data_dir.exists():
            _lock(stack, target, "target")

        def bar(table: str, total: int) -> Any:
            return count_progress(table, total, force=args.progress)

        copied = copy_store(source, target, progress=bar, batch_rows=args.batch_rows)
    width = max(len(c.table) for c in copied)
    for c in copied:
        print(f"{c.table:<{width}}  {c.rows}")
    print(f"copied {sum(c.rows for c in copied)} rows in {len(copied)} tables from {source.describe()}"
          f" to {target.describe()}; every table's row count matches")
    return 0


def _mem0(args: argparse.Namespace) -> int:
    from agentscope_memory.long_term.hybrid.migrate import Mem0Migration
    from agentscope_memory.service.mem0_migration import migrate_mem0
    from agentscope_memory_server.config import load_settings

    mem0_dir = args.source
    if not (mem0_dir / "qdrant").exists() and (mem0_dir / "mem0" / "qdrant").exists():
        mem0_dir = mem0_dir / "mem0"
    overrides: dict[str, Any] = {}
    if args.target:
        target = parse_endpoint(args.target)
        if target.kind == "postgres":
            overrides.update(store="postgres", postgres_dsn=target.dsn)
        else:
            assert target.path is not None
            if target.path.name != SQLITE_FILE_NAME:
                raise CopyRefused(f"--to {args.target}: give the data dir (its store is {SQLITE_FILE_NAME})")
            overrides.update(store="sqlite", data_dir=target.data_dir)
    if not Mem0Migration(mem0_dir).has_data():  # before the lock creates the target's data dir
        raise CopyRefused(f"{mem0_dir} holds no mem0 data of an earlier version (no qdrant/collection/agentscope_memory)")
    settings = load_settings(args.config, **overrides)
    if settings.store == "memory":
        raise CopyRefused("the configured store is `memory`, which keeps nothing: give --to")
    with ExitStack() as stack:
        if settings.store == "sqlite":
            _lock(stack, Endpoint("sqlite", path=settings.data_dir / SQLITE_FILE_NAME), "target")
        progress = stack.enter_context(total_progress("mem0 points", "point", force=args.progress))
        result = asyncio.run(migrate_mem0(settings, mem0_dir, progress))
    if settings.store == "postgres":
        assert settings.postgres_dsn is not None
        where = Endpoint("postgres", dsn=settings.postgres_dsn.get_secret_value()).describe()
    else:
        where = str(settings.data_dir)
    if result.done_before is not None:
        print(f"{where} already holds the memories of a mem0 migration ({result.done_before}); nothing moved")
    else:
        print(f"moved {result.moved} long-term memories from {mem0_dir} into {where}")
    return 0
