"""`agentscope-memory`: the command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

from pydantic import ValidationError

from agentscope_memory.errors import UnavailableError
from agentscope_memory.store.base import StoreOpenError

from agentscope_memory_server import (
    agent_state_cli,
    long_term_cli,
    memories_cli,
    memory_cli,
    migrate_cli,
    session_cli,
    tiered_cli,
)
from agentscope_memory_server.config import Settings, describe_invalid, load_settings, unknown_environment
from agentscope_memory_server.logs import configure_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentscope-memory", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gRPC server")
    serve.add_argument("--config", type=Path, help="TOML config file (flags and env win over it)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 50051; 0 picks one)")
    serve.add_argument("--port-file", type=Path, help="write the bound port to this file")
    serve.add_argument("--mem0-rest-port", type=int, help="serve mem0's REST API on this port (0 picks one; default off)")
    serve.add_argument("--data-dir", type=Path, help="where stores keep their files (default ./data)")
    serve.add_argument("--store", choices=["sqlite", "postgres", "memory"], help="storage backend (default sqlite)")
    serve.add_argument("--postgres-dsn", help="PostgreSQL DSN for --store postgres")
    serve.add_argument("--mcp-port", type=int, help="also serve MCP over HTTP on this port (/mcp, /sse); off by default")
    serve.add_argument("--inspector-port", type=int, help="also serve the web inspector on this port (0 picks one); off by default")
    serve.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port (0 picks one); off by default")
    serve.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.add_argument("--log-format", choices=["json", "text"])
    session_cli.add_parser(commands)
    memory_cli.add_parser(commands)
    memories_cli.add_parser(commands)
    long_term_cli.add_parser(commands)
    agent_state_cli.add_parser(commands)
    tiered_cli.add_parser(commands)
    migrate_cli.add_parser(commands)
    mcp = commands.add_parser(
        "mcp", help="serve the memory tools over MCP on stdio (embedded store, or --target a server)",
        description="MCP over stdio. Without --target the memories live in --data-dir (the same store "
                    "`serve` uses); with --target they are the running server's, for the tenant of --api-key.")
    mcp.add_argument("--config", type=Path, help="TOML config file for the embedded store (flags and env win over it)")
    mcp.add_argument("--data-dir", type=Path, help="embedded store directory (default ./data)")
    mcp.add_argument("--store", choices=["sqlite", "postgres", "memory"], help="embedded storage backend (default sqlite)")
    mcp.add_argument("--postgres-dsn", help="PostgreSQL DSN for --store postgres")
    mcp.add_argument("--tenant", default="default", help="embedded: the tenant whose memories to serve (default: default)")
    mcp.add_argument("--target", help="forward to a running server at host:port instead of an embedded store")
    mcp.add_argument("--api-key", default=None, help="with --target: the API key (default: $AGENTSCOPE_MEMORY_API_KEY)")
    mcp.add_argument("--tls-ca-file", type=Path, help="with --target: PEM root certificates for TLS")
    for name, what in (("user-id", "user"), ("agent-name", "agent"), ("run-name", "run"),
                       ("working-memory-id", "working memory")):
        mcp.add_argument(f"--{name}", help=f"fix the {what} for every call (the model cannot choose another)")
    mcp.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="WARNING")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "api_key", "") is None:
        # Every command that talks to a server: a key in the environment stays out of `ps`
        # and the shell's history.
        args.api_key = os.environ.get("AGENTSCOPE_MEMORY_API_KEY") or None
    if args.command == "serve":
        try:
            settings = load_settings(
                args.config,
                host=args.host,
                port=args.port,
                port_file=args.port_file,
                data_dir=args.data_dir,
                mem0_rest_port=args.mem0_rest_port,
                store=args.store,
                postgres_dsn=args.postgres_dsn,
                mcp_port=args.mcp_port,
                inspector_port=args.inspector_port,
                metrics_port=args.metrics_port,
                log_level=args.log_level,
                log_format=args.log_format,
            )
        except (ValidationError, FileNotFoundError, ValueError) as exc:
            print(f"agentscope-memory: invalid configuration: {_reason(exc)}", file=sys.stderr)
            return 2
        configure_logging(settings.log_level, settings.log_format)
        log = logging.getLogger("agentscope_memory_server")
        log.info("configuration", extra={"fields": {"settings": settings.printable()}})
        for warning in unknown_environment(os.environ):
            log.warning(warning)
        try:
            asyncio.run(_serve(settings))
        except (OSError, StoreOpenError, UnavailableError) as exc:  # a port taken, a store unusable, a database not there
            print(f"agentscope-memory: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        return _command(args)
    except KeyboardInterrupt:
        # Ctrl-C is how an operator stops a long listing or export: one line, not a traceback.
        print(f"agentscope-memory {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): it has what it wanted. Stop quietly, with the status
        # a process killed by SIGPIPE has, and without Python's complaint at exit when it
        # flushes stdout into the closed pipe.
        _silence_stdout()
        return 141


def _command(args: argparse.Namespace) -> int:
    if args.command == "session":
        return session_cli.run(args)
    if args.command == "memory":
        return memory_cli.run(args)
    if args.command == "memories":
        return memories_cli.run(args)
    if args.command == "long-term":
        return long_term_cli.run(args)
    if args.command == "agent-state":
        return agent_state_cli.run(args)
    if args.command == "status":
        return tiered_cli.run(args)
    if args.command == "migrate":
        return migrate_cli.run(args)
    if args.command == "mcp":
        return _mcp(args)
    return 2


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file (captured, replaced): nothing to flush
        pass


def _mcp(args: argparse.Namespace) -> int:
    from agentscope_memory.errors import InvalidArgumentError
    from agentscope_memory_server import mcp_stdio

    try:
        settings = load_settings(
            args.config, data_dir=args.data_dir, store=args.store, postgres_dsn=args.postgres_dsn,
            log_level=args.log_level, log_format="text",
        )
        configure_logging(settings.log_level, "text")
        return mcp_stdio.main(args, settings)
    except (ValidationError, FileNotFoundError, InvalidArgumentError, ValueError) as exc:
        print(f"agentscope-memory mcp: invalid configuration: {_reason(exc)}", file=sys.stderr)
        return 2
    except (StoreOpenError, OSError) as exc:
        print(f"agentscope-memory mcp: {exc}", file=sys.stderr)
        return 1


def _reason(exc: Exception) -> str:
    return describe_invalid(exc) if isinstance(exc, ValidationError) else " ".join(str(exc).split())


async def _serve(settings: Settings) -> None:
    from agentscope_memory_server.app import serve_until_signalled

    await serve_until_signalled(settings)


if __name__ == "__main__":
    sys.exit(main())
