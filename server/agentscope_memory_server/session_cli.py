"""`agentscope-memory session ...`: JsonSession directories on this machine, memories on a server.

export  reads a memory's state from a server and writes it as a JsonSession directory here
import  reads a JsonSession directory here and loads it into a memory on a server
        (--create: the memory is created when missing)
list    lists the sessions in a directory
show    prints a session's messages readably
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentscope_memory.client import MemoryClient
from agentscope_memory.errors import MemoryServiceError, NotFoundError
from agentscope_memory.message import Msg, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, msg_from_dict
from agentscope_memory.session import JsonSession
from agentscope_memory.session.exchange import read_entries, write_entries
from agentscope_memory.session.state import StateEntry
from agentscope_memory.short_term.auto_context.kind import AutoContextKind
from agentscope_memory.short_term.in_memory import InMemoryKind
from agentscope_memory.short_term.tiered.kind import KEY_L1, KEY_L2, KEY_L3, TieredKind
from agentscope_memory_server.progress import byte_progress
from agentscope_memory_server.cli_calls import RETRIES, failure

DEFAULT_DIR = Path("./data/sessions/default")
# The state keys of each memory kind, (key, is_list), as the server's own ImportSession reads
# them; a session's keys name its kind (`--create`).
STATE_KEYS: dict[str, list[tuple[str, bool]]] = {
    "IN_MEMORY": InMemoryKind.state_keys,
    "AUTO_CONTEXT": AutoContextKind.state_keys,
    "TIERED": TieredKind.state_keys,
}
KNOWN_LIST_KEYS = [key for keys in STATE_KEYS.values() for key in keys]


def _kind_of(entries: list[StateEntry]) -> str:
    """The kind whose state keys the session holds (IN_MEMORY when it holds none)."""
    held = {e.key for e in entries}
    for kind in ("TIERED", "AUTO_CONTEXT"):
        if held & {key for key, _ in STATE_KEYS[kind]}:
            return kind
    return "IN_MEMORY"


def add_parser(commands: argparse._SubParsersAction) -> None:
    session = commands.add_parser("session", help="JsonSession import/export/list/show")
    actions = session.add_subparsers(dest="action", required=True)
    for name in ("export", "import"):
        action = actions.add_parser(name, help=f"{name} a memory's state {'to' if name == 'export' else 'from'} a JsonSession directory")
        action.add_argument("--target", default="127.0.0.1:50051", help="server address")
        action.add_argument("--api-key", help="API key, if the server wants one (default: $AGENTSCOPE_MEMORY_API_KEY)")
        action.add_argument("--memory-id", required=True)
        action.add_argument("--session-id", required=True)
        action.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="JsonSession root directory")
        action.add_argument("--progress", action="store_true",
                            help="show a progress bar even when stderr is not a terminal")
        if name == "import":
            action.add_argument(
                "--create", action="store_true",
                help="create the memory when it does not exist (TIERED when the session holds "
                     "tieredMemory_* keys, AUTO_CONTEXT for autoContextMemory_* keys, else IN_MEMORY)",
            )
    listing = actions.add_parser("list", help="list the sessions in a JsonSession root")
    listing.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    show = actions.add_parser("show", help="print a session's messages")
    show.add_argument("session_id")
    show.add_argument("--dir", type=Path, default=DEFAULT_DIR)


def run(args: argparse.Namespace) -> int:
    try:
        return _ACTIONS[args.action](args)
    except BrokenPipeError:
        raise  # the command line stops quietly when the reader of stdout goes away
    except (MemoryServiceError, OSError) as exc:
        print(f"agentscope-memory session {args.action}: {failure(exc, args.api_key)}", file=sys.stderr)
        return 1


def _export(args: argparse.Namespace) -> int:
    with MemoryClient(args.target, api_key=args.api_key, retries=RETRIES) as client, \
            byte_progress(f"export {args.memory_id}", force=args.progress) as progress:
        entries, version = client.save_state(args.memory_id, progress=progress)
    session = JsonSession(args.dir)
    write_entries(session, args.session_id, entries)
    print(f"wrote {', '.join(e.key for e in entries)} (version {version}) to {session.session_dir(args.session_id)}")
    return 0


def _import(args: argparse.Namespace) -> int:
    session = JsonSession(args.dir)
    if not session.exists(args.session_id):
        print(f"no session {args.session_id!r} in {args.dir}", file=sys.stderr)
        return 1
    entries = read_entries(session, args.session_id, KNOWN_LIST_KEYS)
    with MemoryClient(args.target, api_key=args.api_key, retries=RETRIES) as client:
        try:
            kind = client.get_memory(args.memory_id).kind
        except NotFoundError:
            if not args.create:
                raise
            kind = _kind_of(entries)
            client.create_memory(args.memory_id, kind)
            print(f"created {args.memory_id} ({kind})")
        keys = [key for key, _ in STATE_KEYS.get(kind, [])]
        found = [e.key for e in entries]
        entries = [e for e in entries if e.key in keys]
        if not entries:
            # Loading no entries would empty the memory: a session of another kind is refused.
            print(f"session {args.session_id!r} holds {', '.join(found) or 'no state'}, none of the state of a "
                  f"{kind} memory ({', '.join(keys)}); {args.memory_id} left unchanged", file=sys.stderr)
            return 1
        with byte_progress(f"import {args.memory_id}", force=args.progress) as progress:
            version = client.load_state(args.memory_id, entries, progress=progress)
    print(f"loaded {', '.join(e.key for e in entries) or 'nothing'} into {args.memory_id} (version {version})")
    return 0


def _list(args: argparse.Namespace) -> int:
    if not args.dir.is_dir():
        print(f"no sessions in {args.dir}", file=sys.stderr)
        return 1
    session = JsonSession(args.dir)
    for name in session.list_session_dirs():
        keys = ", ".join(f"{k}{'.jsonl' if kind == 'list' else '.json'}" for k, kind in session.keys(name))
        print(f"{name}\t{keys}")
    return 0


def describe_block(block: object) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ThinkingBlock):
        return f"(thinking) {block.thinking}"
    if isinstance(block, ToolUseBlock):
        return f"-> {block.name}({block.content if block.content is not None else block.input}) [{block.id}]"
    if isinstance(block, ToolResultBlock):
        return f"<- {block.name} [{block.id}]: " + " ".join(describe_block(b) for b in block.output)
    return f"[{type(block).__name__.removesuffix('Block').lower()}]"


def format_message(msg: Msg) -> str:
    role = msg.role.value if msg.role else "?"
    who = f"{role}" + (f" ({msg.name})" if msg.name else "")
    # Every line of a block is indented, so a text's own line breaks cannot start what reads as
    # the next message.
    body = "\n".join(describe_block(b) for b in msg.content) or "(empty)"
    return f"[{msg.timestamp or '-'}] {who}:\n" + _indented(body)


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.split("\n"))


def _show(args: argparse.Namespace) -> int:
    session = JsonSession(args.dir)
    if not session.exists(args.session_id):
        print(f"no session {args.session_id!r} in {args.dir}", file=sys.stderr)
        return 1
    for key, kind in session.keys(args.session_id):
        if kind != "list":
            continue
        if key in TIER_KEYS:
            # A TIERED memory's tiers hold items that wrap a message (or a summary's text).
            items = session.get_list(args.session_id, key)
            print(f"== {key} ({len(items)} items)")
            for i, item in enumerate(items):
                if isinstance(item, dict):
                    print(format_tier_item(item, f"{key}[{i}]"))
            continue
        if not key.endswith(("messages", "Messages")):
            continue
        items = session.get_list(args.session_id, key)
        print(f"== {key} ({len(items)} messages)")
        for i, item in enumerate(items):
            if item is not None:
                print(format_message(msg_from_dict(item, f"{key}[{i}]")))
    return 0


TIER_KEYS = (KEY_L1, KEY_L2, KEY_L3)


def format_tier_item(item: dict[str, object], where: str) -> str:
    if isinstance(item.get("msg"), dict):
        return format_message(msg_from_dict(item["msg"], f"{where}.msg"))
    return f"[{item.get('kind', 'summary')}]:\n" + _indented(str(item.get("text", "")))


_ACTIONS = {"export": _export, "import": _import, "list": _list, "show": _show}
