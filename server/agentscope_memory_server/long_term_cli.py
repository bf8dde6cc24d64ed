"""`agentscope-memory long-term ...`: a scope's long-term memories on a server, for operators.

search  the ranked search of a scope for a query, with every component of each score (so you
        can see why a memory came back), as a table or JSON lines
"""

from __future__ import annotations

import argparse
import json
import sys

from agentscope_memory.client.long_term import LongTermClient
from agentscope_memory.errors import MemoryServiceError
from agentscope_memory.long_term.engine import Scope
from agentscope_memory_server.cli_calls import RETRIES, failure

COMPONENTS = ("final", "semantic", "dense", "lexical", "decay", "importance", "frequency")


def add_parser(commands: argparse._SubParsersAction) -> None:
    long_term = commands.add_parser("long-term", help="search a scope's long-term memories on a server")
    actions = long_term.add_subparsers(dest="action", required=True)
    search = actions.add_parser("search", help="ranked search with every score component")
    search.add_argument("query")
    search.add_argument("--agent-name", default="")
    search.add_argument("--user-id", default="")
    search.add_argument("--run-name", default="")
    search.add_argument("--top-k", type=int, default=0, help="how many results (default: the server's, 10)")
    search.add_argument("--json", action="store_true", help="one JSON object per result")
    search.add_argument("--target", default="127.0.0.1:50051", help="server address")
    search.add_argument("--api-key", help="API key, if the server wants one (default: $AGENTSCOPE_MEMORY_API_KEY)")


def run(args: argparse.Namespace) -> int:
    scope = Scope(agent_name=args.agent_name, user_id=args.user_id, run_name=args.run_name)
    try:
        with LongTermClient(args.target, api_key=args.api_key, retries=RETRIES) as client:
            items = client.search(scope, args.query, top_k=args.top_k)
    except BrokenPipeError:
        raise  # the command line stops quietly when the reader of stdout goes away
    except (MemoryServiceError, OSError) as exc:
        print(f"agentscope-memory long-term {args.action}: {failure(exc, args.api_key)}", file=sys.stderr)
        return 1
    if args.json:
        for item in items:
            scores = {name: getattr(item.scores, name) for name in COMPONENTS} if item.scores else {}
            print(json.dumps({"id": item.id, "memory": item.text, "memory_type": item.memory_type,
                              "scores": scores}, ensure_ascii=False))
        return 0
    print("\t".join(["FINAL", "SEMANTIC", "DENSE", "LEXICAL", "DECAY", "IMPORTANCE", "TYPE", "MEMORY"]))
    for item in items:
        s = item.scores
        numbers = [f"{getattr(s, name):.3f}" if s else "-" for name in COMPONENTS[:6]]
        # One row per result whatever the text holds: a tab or line break of its own would
        # shift or split the columns a script cuts.
        print("\t".join([*numbers, item.memory_type, " ".join(item.text.split())]))
    print(f"{len(items)} results", file=sys.stderr)
    return 0
