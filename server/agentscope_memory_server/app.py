"""Runs the gRPC server: builds the `Service` (every engine, from the settings) and registers its
servicers, health and reflection. Nothing here decides what memory logic exists."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentscope_memory._proto.agentscope.memory.v1 import (
    agent_state_service_pb2,
    agent_state_service_pb2_grpc,
    long_term_memory_service_pb2,
    long_term_memory_service_pb2_grpc,
    memory_service_pb2,
    memory_service_pb2_grpc,
    scope_service_pb2,
    scope_service_pb2_grpc,
    shared_pool_service_pb2,
    shared_pool_service_pb2_grpc,
    state_service_pb2,
    state_service_pb2_grpc,
)
from agentscope_memory.service import Service, build_service
from agentscope_memory.store import Store
from agentscope_memory.tracing import current_tracer
from agentscope_memory_server.config import Settings
from agentscope_memory_server.data_dir_lock import DataDirLock
from agentscope_memory_server.decoding import decode_errors
from agentscope_memory_server.drain import Drain, drained
from agentscope_memory_server.agent_state_servicer import AgentStateServicer
from agentscope_memory_server.errors import unimplemented
from agentscope_memory_server.http_server import HttpServer, serve_asgi
from agentscope_memory_server.long_term_servicer import LongTermServicer
from agentscope_memory_server.memory_servicer import MemoryServicer
from agentscope_memory_server.pool_servicer import PoolServicer
from agentscope_memory_server.scope_servicer import ScopeServicer
from agentscope_memory_server.metrics import Metrics, MetricsInterceptor
from agentscope_memory_server.reflection_docs import documented_pool
from agentscope_memory_server.reflection_v1 import enable_reflection
from agentscope_memory_server.registration import WrappingRegistrar, chain
from agentscope_memory_server.tracing import Tracing, TracingInterceptor
from agentscope_memory_server.state_servicer import StateServicer
from agentscope_memory_server.auth_failures import FailedAuthLimiter
from agentscope_memory_server.tenancy import ApiKeys, AuthInterceptor

log = logging.getLogger("agentscope_memory_server")

SERVICE_NAMES = (
    memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    long_term_memory_service_pb2.DESCRIPTOR.services_by_name["LongTermMemoryService"].full_name,
    state_service_pb2.DESCRIPTOR.services_by_name["StateService"].full_name,
    agent_state_service_pb2.DESCRIPTOR.services_by_name["AgentStateService"].full_name,
    "agentscope.memory.v1.LongTermLifecycleService",
    scope_service_pb2.DESCRIPTOR.services_by_name["ScopeService"].full_name,
    shared_pool_service_pb2.DESCRIPTOR.services_by_name["SharedPoolService"].full_name,
    "agentscope.memory.v1.TieredMemoryService",
)


def host_port(host: str, port: int) -> str:
    """`host:port`, an IPv6 address in brackets (gRPC read `::1:0` as `[::0.1.0.0]:443`)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def _placeholder(base: type, what: str) -> object:
    """A servicer whose every RPC answers UNIMPLEMENTED with `what` (a sentence)."""
    names = [n for n in vars(base) if not n.startswith("_")]
    return type(f"Unimplemented{base.__name__}", (base,), {n: unimplemented(what) for n in names})()


@dataclass
class RunningServer:
    """A started server. `stop` drains in-flight calls, then closes what the server opened."""

    server: grpc.aio.Server
    port: int
    settings: Settings
    service: Service
    health: health.aio.HealthServicer
    drain: Drain
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    metrics_port: int | None = None
    # Optional HTTP surfaces (mem0 REST, ...): stopped with the gRPC server, draining alike.
    http_servers: list[HttpServer] = field(default_factory=list)
    mem0_rest_port: int | None = None
    mcp_port: int | None = None
    inspector_port: int | None = None
    data_dir_lock: DataDirLock | None = None
    _stopped: bool = False

    @property
    def address(self) -> str:
        return host_port(self.settings.host, self.port)

    @property
    def store(self) -> Store:
        return self.service.store

    async def stop(self, grace: float | None = None) -> None:
        if self._stopped:
            return
        self._stopped = True
        grace = self.settings.shutdown_grace_s if grace is None else grace
        started = time.monotonic()
        await self.health.enter_graceful_shutdown()
        log.info("shutting down", extra={"fields": {"grace_s": grace, "in_flight": self.drain.in_flight}})
        # New calls are refused at once with UNAVAILABLE; calls in flight get `grace` seconds to
        # finish. grpc's own stop comes after, when no call waits in its queue (drain.py).
        # HTTP surfaces (mem0 REST, MCP) stop alike, beside the gRPC drain.
        http_stops = [asyncio.ensure_future(h.stop(grace)) for h in self.http_servers]
        drained = await self.drain.drain(grace)
        left = max(0.0, grace - (time.monotonic() - started))
        log.info("drained" if drained else "grace period over; cancelling the calls left",
                 extra={"fields": {"in_flight": self.drain.in_flight, "waited_s": round(time.monotonic() - started, 3)}})
        await self.server.stop(left)
        await asyncio.gather(*http_stops)
        for close in reversed(self.closers):
            await close()
        await self.service.close(grace)
        if self.data_dir_lock is not None:
            self.data_dir_lock.release()
        log.info("stopped")


async def start_server(settings: Settings) -> RunningServer:
    tracing = None
    if settings.otlp_endpoint is not None:
        tracing = Tracing(settings.otlp_endpoint, settings.otel_service_name, uuid.uuid4().hex)
    # The service's background tasks (jobs, scoring) inherit the tracer from this context.
    token = current_tracer.set(tracing.tracer if tracing is not None else None)
    lock = DataDirLock(settings.data_dir) if settings.store == "sqlite" else None
    try:
        if lock is not None:
            lock.acquire()
        service = build_service(settings)
        try:
            running = await _serve(settings, service, tracing)
        except BaseException:
            await service.close(0)
            raise
        running.data_dir_lock = lock
        return running
    except BaseException:
        if tracing is not None:
            tracing.shutdown()
        if lock is not None:
            lock.release()
        raise
    finally:
        current_tracer.reset(token)


async def _serve(settings: Settings, service: Service, tracing: Tracing | None = None) -> RunningServer:
    options = [
        ("grpc.max_receive_message_length", settings.grpc_max_receive_bytes),
        ("grpc.max_send_message_length", settings.grpc_max_receive_bytes),
        ("grpc.so_reuseport", 0),
    ]
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if tracing is not None:
        # First, so the span covers every other interceptor (a refused key is traced too).
        interceptors.append(TracingInterceptor(tracing))
    metrics = None
    if settings.metrics_port is not None:
        metrics = Metrics()
        interceptors.append(MetricsInterceptor(metrics))
    # One table of keys and one count of failed authentications for every surface.
    keys = ApiKeys(settings.api_keys, FailedAuthLimiter(settings.auth_failure_limit))
    if settings.api_keys:
        interceptors.append(AuthInterceptor(keys))
    server = grpc.aio.server(options=options, interceptors=interceptors)
    # Every handler is registered wrapped, innermost last: draining, then undecodable requests,
    # so the interceptors above see every call and an undecodable request reaches no servicer.
    drain = Drain()
    registrar = WrappingRegistrar(server, chain(drained(drain), decode_errors))
    memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(
        MemoryServicer(service.memories, service.auto_context, service.scopes, service.coherence), registrar
    )
    if service.scopes is not None:
        scope_service_pb2_grpc.add_ScopeServiceServicer_to_server(ScopeServicer(service.scopes), registrar)
    if service.pools is not None and service.pool_attachments is not None:
        shared_pool_service_pb2_grpc.add_SharedPoolServiceServicer_to_server(
            PoolServicer(service.pools, service.pool_attachments), registrar)
    if service.tiered is not None:
        from agentscope_memory._proto.agentscope.memory.v1 import tiered_memory_service_pb2_grpc
        from agentscope_memory_server.tiered_servicer import TierGauges, TieredServicer

        gauges = TierGauges(metrics.registry) if metrics is not None else None
        if gauges is not None:
            service.memories.on_deleted(gauges.forget)
        tiered_memory_service_pb2_grpc.add_TieredMemoryServiceServicer_to_server(
            TieredServicer(service.tiered, gauges), registrar)
    if service.long_term is not None and service.turns is not None:
        long_term_servicer = LongTermServicer(
            service.long_term, service.turns, service.memories.tokens, service.memories.limits.max_page_bytes,
            compressed=service.reflect_lifecycle.compressed if service.reflect_lifecycle else None)
        long_term_servicer.scopes = service.scopes
        long_term_memory_service_pb2_grpc.add_LongTermMemoryServiceServicer_to_server(long_term_servicer, registrar)
    else:
        long_term_memory_service_pb2_grpc.add_LongTermMemoryServiceServicer_to_server(
            _placeholder(
                long_term_memory_service_pb2_grpc.LongTermMemoryServiceServicer,
                "long-term memory is switched off on this server (long_term_enabled=false)",
            ),
            registrar,
        )
    if service.reflect_lifecycle is not None:
        from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2_grpc
        from agentscope_memory_server.reflection_servicer import LifecycleMetrics, ReflectionServicer

        lifecycle_service_pb2_grpc.add_LongTermLifecycleServiceServicer_to_server(
            ReflectionServicer(service.reflect_lifecycle, service.memories.limits.max_page_bytes), registrar)
        if metrics is not None:
            LifecycleMetrics(metrics.registry).observe(service.reflect_lifecycle)
    else:
        from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2_grpc

        lifecycle_service_pb2_grpc.add_LongTermLifecycleServiceServicer_to_server(
            _placeholder(lifecycle_service_pb2_grpc.LongTermLifecycleServiceServicer,
                         "lifecycle jobs need the server's own long-term engine (long_term_enabled=true)"),
            registrar)
    state_service_pb2_grpc.add_StateServiceServicer_to_server(
        StateServicer(service.memories, service.sessions), registrar
    )
    if service.agent_state is not None:
        agent_state_service_pb2_grpc.add_AgentStateServiceServicer_to_server(
            AgentStateServicer(service.agent_state), registrar
        )

    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, registrar)
    enable_reflection(SERVICE_NAMES + (health.SERVICE_NAME,), registrar, documented_pool())

    try:
        address = host_port(settings.host, settings.port)
        if settings.tls_cert_file is not None and settings.tls_key_file is not None:
            credentials = grpc.ssl_server_credentials(
                [(settings.tls_key_file.read_bytes(), settings.tls_cert_file.read_bytes())]
            )
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {address}: {_bind_failure(settings, exc)}") from None
    await service.start()
    await server.start()
    for name in ("",) + SERVICE_NAMES:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    running = RunningServer(server, port, settings, service, health_servicer, drain)
    if tracing is not None:
        traces = tracing

        async def close_tracing() -> None:
            await asyncio.to_thread(traces.shutdown)

        running.closers.append(close_tracing)
    try:
        if metrics is not None:
            await _serve_metrics(settings, metrics, running, keys)
        if settings.mem0_rest_port is not None:
            await _serve_mem0_rest(settings, service, running, keys)
        if settings.mcp_port is not None:
            await _serve_mcp(settings, service, running, keys)
        if settings.inspector_port is not None:
            await _serve_inspector(settings, service, running, metrics, keys)
    except BaseException:
        await running.stop(0)
        raise
    return running


def _log_listening(running: RunningServer) -> None:
    log.info("listening", extra={"fields": {"address": running.address, "metrics_port": running.metrics_port,
                                           "mem0_rest_port": running.mem0_rest_port,
                                           "mcp_port": running.mcp_port, "inspector_port": running.inspector_port}})


def _bind_failure(settings: Settings, exc: RuntimeError) -> str:
    """Why gRPC could not bind, in the operating system's words ("Address already in use"): gRPC
    itself says only "Failed to bind to address ...; set GRPC_VERBOSITY=debug"."""
    import socket

    try:
        infos = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)
    except OSError as error:
        return f"{settings.host}: {error.strerror or error}"
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            try:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
            except OSError as error:
                return error.strerror or str(error)
    return str(exc)


def _tls(settings: Settings) -> tuple[Path, Path] | None:
    """The certificate and key the HTTP surfaces speak TLS with: gRPC's, so that no surface
    of a server configured for TLS takes an API key (or the inspector's cookie) in clear."""
    if settings.tls_cert_file is None or settings.tls_key_file is None:
        return None
    return settings.tls_cert_file, settings.tls_key_file


async def _serve_metrics(settings: Settings, metrics: Metrics, running: RunningServer, keys: ApiKeys) -> None:
    """Prometheus `/metrics` on its own port, behind the same keys as the other HTTP surfaces."""
    http = await serve_asgi(metrics.app(keys), settings.host, settings.metrics_port or 0,
                            name="metrics", setting="metrics_port", grace=settings.shutdown_grace_s,
                            max_body_bytes=settings.grpc_max_receive_bytes,
                            max_connections=settings.http_max_connections,
                            tls=_tls(settings))
    running.http_servers.append(http)
    running.metrics_port = http.port


async def _serve_mem0_rest(settings: Settings, service: Service, running: RunningServer, keys: ApiKeys) -> None:
    """mem0's REST API on its own port, over the same long-term engine, keys and tenants."""
    from agentscope_memory_server.mem0_http import create_app
    app = create_app(service.long_term, keys, service.memories.limits.max_page_bytes,
                     service.scopes)
    http = await serve_asgi(app, settings.host, settings.mem0_rest_port or 0, name="mem0-rest", setting="mem0_rest_port",
                            grace=settings.shutdown_grace_s, max_body_bytes=settings.grpc_max_receive_bytes,
                            max_connections=settings.http_max_connections,
                            tls=_tls(settings))
    running.http_servers.append(http)
    running.mem0_rest_port = http.port
    if settings.mem0_rest_port_file is not None:
        settings.mem0_rest_port_file.write_text(str(http.port))


async def _serve_mcp(settings: Settings, service: Service, running: RunningServer, keys: ApiKeys) -> None:
    """MCP over HTTP on its own port, over the same service, keys and tenants."""
    from agentscope_memory.memory_tools import Connection
    from agentscope_memory_server.mcp_http import McpHttpApp
    app = McpHttpApp(service, keys, Connection.from_params(settings.mcp_bind))
    http = await serve_asgi(app, settings.host, settings.mcp_port or 0, name="mcp", setting="mcp_port",
                            grace=settings.shutdown_grace_s,
                            max_body_bytes=settings.grpc_max_receive_bytes,
                            max_connections=settings.http_max_connections,
                            tls=_tls(settings), error_key="error")
    running.http_servers.append(http)
    running.mcp_port = http.port
    if settings.mcp_port_file is not None:
        settings.mcp_port_file.write_text(str(running.mcp_port))


async def _serve_inspector(settings: Settings, service: Service, running: RunningServer,
                           metrics: Metrics | None, keys: ApiKeys) -> None:
    """The web inspector on its own port, over the same service, keys and tenants."""
    from prometheus_client import generate_latest

    from agentscope_memory_server.inspector import create_app
    def metrics_text() -> str:
        assert metrics is not None
        return generate_latest(metrics.registry).decode()

    # Sessions are signed with a key derived from the page tokens' (kept in the store), so a
    # login outlives a restart.
    await service.memories.tokens.ready()
    app = create_app(service, keys, frozenset(settings.inspector_admin_keys),
                     metrics_text if metrics is not None else None,
                     service.memories.tokens.derived_key("inspector-session"))
    http = await serve_asgi(app, settings.host, settings.inspector_port or 0, name="inspector",
                            setting="inspector_port",
                            grace=settings.shutdown_grace_s, max_body_bytes=settings.grpc_max_receive_bytes,
                            max_connections=settings.http_max_connections,
                            tls=_tls(settings))
    running.http_servers.append(http)
    running.inspector_port = http.port
    if settings.inspector_port_file is not None:
        settings.inspector_port_file.write_text(str(http.port))


async def serve_until_signalled(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    import signal

    running = await start_server(settings)
    # At once, before the collection below: a SIGTERM right after the "listening" line drains
    # instead of killing the process outright. (Not before the start: Ctrl-C must still
    # interrupt a start that blocks, e.g. waiting for a database.)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Said only now: a supervisor that sends SIGTERM as soon as it reads this line gets a drain.
    _log_listening(running)
    # What start-up built (modules, engines, models) lives as long as the process: frozen, the
    # collector stops walking it on every full collection. Under a stream of adds those came
    # every few seconds and held the loop 33-45 ms each; frozen, under 1 ms.
    gc.collect()
    gc.freeze()
    if settings.port_file is not None:
        settings.port_file.write_text(str(running.port))
    print(f"agentscope-memory listening on {running.address}", flush=True)
    await stop.wait()
    await running.stop()
