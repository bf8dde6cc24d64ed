"""`agentscope-memory status MEMORY_ID`: a TIERED memory's tiers drawn as a box (Loom's memory
visualiser), or as JSON with --json."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from agentscope_memory.client.tiered import TieredClient
from agentscope_memory.errors import MemoryServiceError
from agentscope_memory.short_term.tiered.visual import render_status
from agentscope_memory_server.cli_calls import RETRIES, failure


def add_parser(commands: argparse._SubParsersAction) -> None:
    status = commands.add_parser("status", help="a TIERED memory's tiers, budgets and compaction, as a box")
    status.add_argument("memory_id")
    status.add_argument("--target", default="127.0.0.1:50051", help="server address")
    status.add_argument("--api-key", help="API key, if the server wants one (default: $AGENTSCOPE_MEMORY_API_KEY)")
    status.add_argument("--json", action="store_true", help="the status as JSON")


def run(args: argparse.Namespace) -> int:
    try:
        with TieredClient(args.target, api_key=args.api_key, retries=RETRIES) as client:
            status = client.status(args.memory_id)
    except BrokenPipeError:
        raise  # the command line stops quietly when the reader of stdout goes away
    except (MemoryServiceError, OSError) as exc:
        print(f"agentscope-memory status: {failure(exc, args.api_key)}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(status), ensure_ascii=False) if args.json else render_status(status))
    return 0
