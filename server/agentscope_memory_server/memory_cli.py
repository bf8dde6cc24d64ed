"""`agentscope-memory memory ...`: repairs of a memory on a server.

close-tool-calls  answers the tool calls a conversation was left with (a crash during a tool
                  call) with an error result each, so the agent can go on
"""

from __future__ import annotations

import argparse
import sys

from agentscope_memory.client import MemoryClient
from agentscope_memory.errors import MemoryServiceError
from agentscope_memory_server.cli_calls import RETRIES, failure


def add_parser(commands: argparse._SubParsersAction) -> None:
    memory = commands.add_parser("memory", help="repairs of a memory on a server")
    actions = memory.add_subparsers(dest="action", required=True)
    close = actions.add_parser(
        "close-tool-calls",
        help="answer unanswered tool calls with an error result (after a crash during a tool call)",
    )
    close.add_argument("--target", default="127.0.0.1:50051", help="server address")
    close.add_argument("--api-key", help="API key, if the server wants one (default: $AGENTSCOPE_MEMORY_API_KEY)")
    close.add_argument("--memory-id", required=True)
    close.add_argument("--agent-name", required=True, help="the agent's name (its tool results carry it)")


def run(args: argparse.Namespace) -> int:
    try:
        with MemoryClient(args.target, api_key=args.api_key, retries=RETRIES) as client:
            added = client.close_pending_tool_calls(args.memory_id, args.agent_name)
    except BrokenPipeError:
        raise  # the command line stops quietly when the reader of stdout goes away
    except (MemoryServiceError, OSError) as exc:
        print(f"agentscope-memory memory {args.action}: {failure(exc, args.api_key)}", file=sys.stderr)
        return 1
    if not added:
        print(f"{args.memory_id}: no unanswered tool call")
    for msg in added:
        for block in msg.content:
            print(f"{args.memory_id}: answered {getattr(block, 'name', '?')} [{getattr(block, 'id', '?')}] as interrupted")
    return 0
