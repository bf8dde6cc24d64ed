"""`agentscope-memory memories ...`: what a server remembers, for operators.

list    every memory of the tenant (of --api-key): id, kind, messages, version, last update
show    one memory's description and its messages, readably (or as JSON lines with --json)
delete  deletes a memory and everything in it (asks first unless --yes)

Everything is read page by page, so a tenant with many memories or a memory with many messages
prints as it goes and never asks the server for more than one page at a time.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from typing import TextIO

from agentscope_memory.client import MemoryClient
from agentscope_memory.errors import MemoryServiceError
from agentscope_memory.message import msg_to_json
from agentscope_memory_server.session_cli import format_message
from agentscope_memory_server.cli_calls import RETRIES, failure


def add_parser(commands: argparse._SubParsersAction) -> None:
    memories = commands.add_parser("memories", help="list, show and delete the memories on a server")
    actions = memories.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every memory of the tenant")
    show = actions.add_parser("show", help="a memory's description and messages")
    show.add_argument("memory_id")
    show.add_argument("--json", action="store_true", help="messages as JSON lines (AgentScope's Msg form)")
    delete = actions.add_parser("delete", help="delete a memory and its messages")
    delete.add_argument("memory_id")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    for action in (listing, show, delete):
        action.add_argument("--target", default="127.0.0.1:50051", help="server address")
        action.add_argument("--api-key", help="API key, if the server wants one (default: $AGENTSCOPE_MEMORY_API_KEY)")
        action.add_argument("--page-size", type=int, default=0, help="items per page (default: the server's)")


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


def run(args: argparse.Namespace, stdin: TextIO | None = None) -> int:
    try:
        with MemoryClient(args.target, api_key=args.api_key, retries=RETRIES) as client:
            if args.action == "list":
                count = 0
                memories = iter(client.list_memories(page_size=args.page_size))
                # The first page is asked for before the header is printed, so a server that is
                # down or refuses the key leaves stdout empty rather than holding a bare header.
                first = next(memories, None)
                print("MEMORY\tKIND\tMESSAGES\tVERSION\tUPDATED")
                for memory in itertools.chain([first] if first is not None else [], memories):
                    count += 1
                    print(f"{memory.memory_id}\t{memory.kind}\t{memory.message_count}\t{memory.version}\t"
                          f"{_when(memory.update_time)}")
                print(f"{count} memories", file=sys.stderr)
                return 0
            if args.action == "show":
                memory = client.get_memory(args.memory_id)
                if not args.json:
                    print(f"{memory.memory_id}: {memory.kind}, {memory.message_count} messages, version "
                          f"{memory.version}, created {_when(memory.create_time)}, updated {_when(memory.update_time)}")
                for msg in client.iter_messages(args.memory_id, page_size=args.page_size):
                    # AgentScope's own line for the message, byte for byte (a session's .jsonl
                    # line): a missing name is `"name":null`, as AgentScope-Java writes it.
                    print(msg_to_json(msg) if args.json else format_message(msg))
                return 0
            memory = client.get_memory(args.memory_id)
            if not args.yes:
                # The question goes to stderr, as a failure would: with stdout redirected into a
                # file it is still seen, rather than the command seeming to hang.
                print(f"delete {memory.memory_id} ({memory.kind}, {memory.message_count} messages)? [y/N] ",
                      end="", file=sys.stderr, flush=True)
                answer = (stdin or sys.stdin).readline()
                if not answer:
                    print(f"\n{memory.memory_id} not deleted: no answer on stdin (--yes deletes without asking)",
                          file=sys.stderr)
                    return 1
                if answer.strip().lower() not in ("y", "yes"):
                    print(f"{memory.memory_id} not deleted", file=sys.stderr)
                    return 1
            client.delete_memory(args.memory_id)
            print(f"deleted {memory.memory_id}")
            return 0
    except BrokenPipeError:
        raise  # the command line stops quietly when the reader of stdout goes away
    except (MemoryServiceError, OSError) as exc:
        print(f"agentscope-memory memories {args.action}: {failure(exc, args.api_key)}", file=sys.stderr)
        return 1
