"""`agentscope-memory agent-state ...`: AgentScope-Java 2.x state slots on a server, to and from
`JsonFileAgentStateStore`'s directory layout on this machine.

export  writes a slot's values and lists as <dir>/<user or __anon__>/<session>/<key>.json|.jsonl|.hash
import  reads such a slot directory and stores its values and lists on the server
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentscope_memory.agent_state import Slot
from agentscope_memory.agent_state.json_files import SlotFiles, read_slot, write_slot
from agentscope_memory.client.agent_state import AgentStateClient
from agentscope_memory.errors import MemoryServiceError
from agentscope_memory_server.progress import byte_progress
from agentscope_memory_server.cli_calls import RETRIES, failure

DEFAULT_DIR = Path.home() / ".agentscope" / "state"


def add_parser(commands: argparse._SubParsersAction) -> None:
    state = commands.add_parser("agent-state", help="AgentScope-Java 2.x state slots: JsonFileAgentStateStore export/import")
    actions = state.add_subparsers(dest="action", required=True)
    for name, help_text in (("export", "write a slot to a JsonFileAgentStateStore directory"),
                            ("import", "store a JsonFileAgentStateStore slot directory on the server")):
        action = actions.add_parser(name, help=help_text)
        action.add_argument("--target", default="127.0.0.1:50051", help="server address")
        action.add_argument("--api-key", help="API key, if the server wants one (default: $AGENTSCOPE_MEMORY_API_KEY)")
        action.add_argument("--user-id", default="", help="user id (empty: anonymous, __anon__)")
        action.add_argument("--session-id", required=True)
        action.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                            help="JsonFileAgentStateStore root (default ~/.agentscope/state, as AgentScope's)")
        action.add_argument("--progress", action="store_true",
                            help="show a progress bar even when stderr is not a terminal")


def run(args: argparse.Namespace) -> int:
    try:
        return _export(args) if args.action == "export" else _import(args)
    except BrokenPipeError:
        raise  # the command line stops quietly when the reader of stdout goes away
    except (MemoryServiceError, OSError) as exc:
        print(f"agentscope-memory agent-state {args.action}: {failure(exc, args.api_key)}", file=sys.stderr)
        return 1


def _size(texts: list[str]) -> int:
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


def _export(args: argparse.Namespace) -> int:
    slot = Slot(args.user_id, args.session_id)
    files = SlotFiles()
    # The total is known only once every key is read: the bar counts the bytes as they come.
    with AgentStateClient(args.target, api_key=args.api_key, retries=RETRIES) as client, \
            byte_progress(f"export {args.session_id}", force=args.progress) as progress:
        for kind, key in client.keys(slot):
            if kind == "value":
                files.values[key] = client.get_value(slot, key).json
                progress(_size([files.values[key]]))
            else:
                files.lists[key] = client.get_list(slot, key).items
                progress(_size(files.lists[key]))
    if not files.values and not files.lists:
        print(f"nothing stored for session {args.session_id!r}", file=sys.stderr)
        return 1
    directory = write_slot(args.dir, args.user_id, args.session_id, files)
    print(f"wrote {', '.join(sorted([*files.values, *files.lists]))} to {directory}")
    return 0


def _import(args: argparse.Namespace) -> int:
    slot = Slot(args.user_id, args.session_id)
    files = read_slot(args.dir, args.user_id, args.session_id)
    total = _size(list(files.values.values())) + sum(_size(items) for items in files.lists.values())
    with AgentStateClient(args.target, api_key=args.api_key, retries=RETRIES) as client, \
            byte_progress(f"import {args.session_id}", total, force=args.progress) as progress:
        for key, value in files.values.items():
            client.put_value(slot, key, value)
            progress(_size([value]))
        for key, items in files.lists.items():
            client.put_list(slot, key, items)
            progress(_size(items))
    print(f"stored {', '.join(sorted([*files.values, *files.lists])) or 'nothing'} for session {args.session_id!r}")
    return 0
