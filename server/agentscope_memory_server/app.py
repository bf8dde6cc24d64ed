"""Builds and runs the gRPC server: store, memory logic, servicers, health and reflection."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Awaitable, Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from agentscope_memory._proto.agentscope.memory.v1 import (
    long_term_memory_service_pb2,
    long_term_memory_service_pb2_grpc,
    memory_service_pb2,
    memory_service_pb2_grpc,
    state_service_pb2,
    state_service_pb2_grpc,
)
from agentscope_memory.memory.in_memory import InMemoryKind
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term import Mem0LongTermMemory, Mem0Store, Turns
from agentscope_memory.memory.autoctx.engine import Summarizer
from agentscope_memory.memory.autoctx.service import AutoContextService
from agentscope_memory.memory.autoctx.stored import AutoContextKind
from agentscope_memory.memory.autoctx.summarizers import ExtractiveSummarizer, LlmSummarizer
from agentscope_memory.memory.manager import DEFAULT_TENANT, MemoryManager
from agentscope_memory.store import Store, open_store
from agentscope_memory_server.config import Settings
from agentscope_memory_server.errors import unimplemented
from agentscope_memory_server.long_term_servicer import LongTermServicer
from agentscope_memory_server.memory_servicer import MemoryServicer
from agentscope_memory_server.metrics import Metrics, MetricsInterceptor
from agentscope_memory_server.reflection_docs import documented_pool
from agentscope_memory_server.state_servicer import StateServicer
from agentscope_memory_server.tenancy import AuthInterceptor

log = logging.getLogger("agentscope_memory_server")

SERVICE_NAMES = (
    memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name,
    long_term_memory_service_pb2.DESCRIPTOR.services_by_name["LongTermMemoryService"].full_name,
    state_service_pb2.DESCRIPTOR.services_by_name["StateService"].full_name,
)


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
    store: Store
    manager: MemoryManager
    health: health.aio.HealthServicer
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    metrics_port: int | None = None
    background: list[asyncio.Task[None]] = field(default_factory=list)
    _stopped: bool = False

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.port}"

    async def stop(self, grace: float | None = None) -> None:
        if self._stopped:
            return
        self._stopped = True
        grace = self.settings.shutdown_grace_s if grace is None else grace
        await self.health.enter_graceful_shutdown()
        log.info("shutting down", extra={"fields": {"grace_s": grace}})
        # New calls are refused at once; calls in flight get `grace` seconds to finish.
        await self.server.stop(grace)
        for task in self.background:
            task.cancel()
        await asyncio.gather(*self.background, return_exceptions=True)
        for close in reversed(self.closers):
            await close()
        await self.store.close()
        log.info("stopped")


def build_summarizer(settings: Settings) -> Summarizer:
    """The LLM summariser when an endpoint is configured, else the extractive fallback."""
    if settings.llm_base_url is None:
        return ExtractiveSummarizer()
    return LlmSummarizer(ChatClient(LlmConfig(
        settings.llm_base_url, settings.llm_model,
        settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        settings.llm_timeout_s, settings.llm_max_retries)))


def build_long_term(settings: Settings, manager: MemoryManager) -> tuple[Mem0LongTermMemory, Turns, Mem0Store]:
    mem0_store = Mem0Store(settings.long_term_config())
    long_term = Mem0LongTermMemory(mem0_store)
    return long_term, Turns(manager, long_term), mem0_store


async def _start_long_term(settings: Settings, mem0_store: Mem0Store, turns: Turns) -> None:
    """Load mem0 and the embedder (if asked to), then replay unfinished background records."""
    try:
        if settings.long_term_preload:
            await mem0_store.open()
            log.info("long-term memory ready")
        tenants = sorted(set(settings.api_keys.values())) or [DEFAULT_TENANT]
        resumed = await turns.resume_pending(tenants)
        if resumed:
            log.info("resumed background long-term records", extra={"fields": {"count": resumed}})
    except Exception:  # noqa: BLE001 - the first long-term call reports the error to its caller
        log.exception("long-term memory failed to start")


async def start_server(settings: Settings) -> RunningServer:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(
        settings.store,
        settings.data_dir,
        sqlite_synchronous=settings.sqlite_synchronous,
        postgres_dsn=settings.postgres_dsn.get_secret_value() if settings.postgres_dsn else None,
    )
    manager = MemoryManager(store, [InMemoryKind(), AutoContextKind()], settings.limits())
    auto_context = AutoContextService(manager, build_summarizer(settings))

    options = [
        ("grpc.max_receive_message_length", settings.grpc_max_receive_bytes),
        ("grpc.max_send_message_length", settings.grpc_max_receive_bytes),
        ("grpc.so_reuseport", 0),
    ]
    interceptors: list[grpc.aio.ServerInterceptor] = []
    metrics = None
    if settings.metrics_port is not None:
        metrics = Metrics()
        interceptors.append(MetricsInterceptor(metrics))
    if settings.api_keys:
        interceptors.append(AuthInterceptor(settings.api_keys))
    server = grpc.aio.server(options=options, interceptors=interceptors)
    memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(manager, auto_context), server)
    closers: list[Callable[[], Awaitable[None]]] = []
    if settings.long_term_enabled:
        long_term, turns, mem0_store = build_long_term(settings, manager)
        long_term_memory_service_pb2_grpc.add_LongTermMemoryServiceServicer_to_server(
            LongTermServicer(long_term, turns), server
        )

        async def close_long_term() -> None:
            await turns.drain()
            await mem0_store.close()

        closers.append(close_long_term)
    else:
        long_term_memory_service_pb2_grpc.add_LongTermMemoryServiceServicer_to_server(
            _placeholder(
                long_term_memory_service_pb2_grpc.LongTermMemoryServiceServicer,
                "long-term memory is switched off on this server (long_term_enabled=false)",
            ),
            server,
        )
    state_service_pb2_grpc.add_StateServiceServicer_to_server(
        StateServicer(manager, settings.sessions_root()), server
    )

    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        SERVICE_NAMES + (health.SERVICE_NAME, reflection.SERVICE_NAME), server, documented_pool()
    )

    try:
        address = f"{settings.host}:{settings.port}"
        if settings.tls_cert_file is not None and settings.tls_key_file is not None:
            credentials = grpc.ssl_server_credentials(
                [(settings.tls_key_file.read_bytes(), settings.tls_cert_file.read_bytes())]
            )
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError as exc:
        await store.close()
        raise OSError(f"cannot listen on {settings.host}:{settings.port}: {exc}") from exc
    await server.start()
    for name in ("",) + SERVICE_NAMES:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    running = RunningServer(server, port, settings, store, manager, health_servicer, closers)
    if settings.long_term_enabled:
        running.background.append(asyncio.create_task(_start_long_term(settings, mem0_store, turns)))
    if metrics is not None:
        running.metrics_port = metrics.serve(settings.host, settings.metrics_port or 0)

        async def close_metrics() -> None:
            metrics.close()

        running.closers.append(close_metrics)
    log.info("listening", extra={"fields": {"address": running.address}})
    return running


async def serve_until_signalled(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    import signal

    running = await start_server(settings)
    if settings.port_file is not None:
        settings.port_file.write_text(str(running.port))
    print(f"agentscope-memory listening on {running.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await running.stop()
