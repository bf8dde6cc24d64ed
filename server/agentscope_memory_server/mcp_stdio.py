"""`agentscope-memory mcp`: the MCP server over stdio, for clients that start it as a
subprocess (AgentScope's stdio clients, desktop and IDE assistants).

It serves either an embedded store (the library's service on a data directory, no server
needed; like a server, it holds the data directory's lock while it runs) or, with `--target`, a running server through the gRPC clients. stdout carries the
protocol only: logs and anything else printed go to stderr.
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Any, BinaryIO

import anyio

from agentscope_memory.memory_tools import Connection, MemoryAccess, ServiceAccess
from agentscope_memory_server.config import Settings
from agentscope_memory_server.data_dir_lock import DataDirInUseError, DataDirLock
from agentscope_memory_server.mcp_server import Binding, build_server, session_binding

log = logging.getLogger("agentscope_memory_server.mcp")


async def serve_stdio(
    access: MemoryAccess, conn: Connection, tenant: str, stdin: BinaryIO, stdout: BinaryIO
) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    token = session_binding.set(Binding(access, conn, tenant))
    try:
        read_in = anyio.wrap_file(io.TextIOWrapper(stdin, encoding="utf-8", errors="replace"))
        write_out = anyio.wrap_file(io.TextIOWrapper(stdout, encoding="utf-8", write_through=True))
        async with stdio_server(read_in, write_out) as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        session_binding.reset(token)


async def run_embedded(settings: Settings, conn: Connection, tenant: str, stdin: BinaryIO, stdout: BinaryIO) -> None:
    from agentscope_memory.service import build_service

    async with build_service(settings) as service:
        await serve_stdio(ServiceAccess(service, tenant), conn, tenant, stdin, stdout)


async def run_forwarding(target: str, api_key: str | None, root_certificates: bytes | None, conn: Connection,
                         stdin: BinaryIO, stdout: BinaryIO) -> None:
    from agentscope_memory.client.tool_access import RemoteAccess

    access = RemoteAccess(target, api_key=api_key, root_certificates=root_certificates)
    try:
        await serve_stdio(access, conn, f"remote:{target}", stdin, stdout)
    finally:
        await access.close()


def protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """The process's real stdin/stdout for the protocol; from here on, whatever else prints
    (a library's stray print) goes to stderr instead of corrupting the stream."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    return stdin, stdout


def main(args: Any, settings: Settings) -> int:
    # As a URL's parameters: an empty `--user-id ""` is refused rather than leaving the scope open.
    given = {"user_id": args.user_id, "agent_name": args.agent_name, "run_name": args.run_name,
             "working_memory_id": args.working_memory_id}
    conn = Connection.from_params({k: v for k, v in given.items() if v is not None})
    stdin, stdout = protocol_streams()
    if args.target:
        certificates = args.tls_ca_file.read_bytes() if args.tls_ca_file else None
        anyio.run(run_forwarding, args.target, args.api_key, certificates, conn, stdin, stdout)
    else:
        lock = _hold_data_dir(settings)
        try:
            anyio.run(run_embedded, settings, conn, args.tenant, stdin, stdout)
        finally:
            if lock is not None:
                lock.release()
    return 0


def _hold_data_dir(settings: Settings) -> DataDirLock | None:
    """The server's data-dir lock, held while the embedded store is served. Beside a server on
    the same sqlite file, what this process wrote was invisible to the server's coherent caches
    (long-term searches follow it by the scopes' generations)."""
    if settings.store != "sqlite":
        return None
    lock = DataDirLock(settings.data_dir)
    try:
        lock.acquire()
    except DataDirInUseError as exc:
        who = f" (pid {exc.holder})" if exc.holder else ""
        raise DataDirInUseError(
            f"data_dir {settings.data_dir} is in use by a running agentscope-memory server{who}; "
            "use --target HOST:PORT to serve its memories through it") from None
    return lock
