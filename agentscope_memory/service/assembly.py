"""`Service`: every engine of the memory service, built from `ServiceSettings`.

This is the one place that decides what exists: the store, the short-term memory kinds, the
AutoContext summariser, the long-term engine and its turn helpers, the durable job runner, and
session export/import. The gRPC server registers its servicers over a `Service`; a Python
program (or the Python client's local mode) uses one in-process, without gRPC.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from agentscope_memory.agent_state import AgentStateEngine
from agentscope_memory.agent_state.legacy import MemoryBackedLegacyMessages
from agentscope_memory.jobs import JobRunner
from agentscope_memory.lifecycle.reflect_service import ReflectLifecycle, build_reflect_lifecycle
from agentscope_memory.llm import ChatClient, LlmConfig
from agentscope_memory.long_term.engine import LongTermEngine
from agentscope_memory.long_term.turns import Turns
from agentscope_memory.paging import PageTokens
from agentscope_memory.service.settings import ServiceSettings, _secret
from agentscope_memory.session.exchange import SessionExchange
from agentscope_memory.short_term.auto_context.engine import Summarizer
from agentscope_memory.short_term.auto_context.kind import AutoContextKind
from agentscope_memory.short_term.auto_context.service import AutoContextService
from agentscope_memory.short_term.auto_context.summarizers import ExtractiveSummarizer, LlmSummarizer
from agentscope_memory.short_term.in_memory import InMemoryKind
from agentscope_memory.short_term.manager import MemoryManager
from agentscope_memory.short_term.tiered.kind import TieredKind
from agentscope_memory.short_term.tiered.service import TieredService
from agentscope_memory.short_term.tiered.summaries import ExtractiveTierSummarizer, LlmTierSummarizer, TierSummarizer
from agentscope_memory.short_term.coherence import Coherence, WatchedStore
from agentscope_memory.store import Store, open_store
from agentscope_memory.pool import PoolAttachments, SharedPools
from agentscope_memory.scopes.engine import ScopeEngine

log = logging.getLogger("agentscope_memory.service")


@dataclass
class Service:
    """The memory service's engines, ready to use once `start` has run; `close` releases them."""

    settings: ServiceSettings
    store: Store
    # Short-term memories (IN_MEMORY, AUTO_CONTEXT): the `Memory` operations and session state.
    memories: MemoryManager
    # AutoContextMemory's own operations (compression, offloads, events, plan).
    auto_context: AutoContextService
    # Durable background work (background long-term records now; lifecycle jobs next).
    jobs: JobRunner
    # JsonSession directories on the server, one root per tenant.
    sessions: SessionExchange
    # None when long-term memory is switched off.
    long_term: LongTermEngine | None = None
    turns: Turns | None = None
    # AgentScope-Java 2.x agent state (AgentStateService); built by `build_service`.
    agent_state: AgentStateEngine | None = None
    # Shared memory pools (pool/): versioned key -> JSON spaces several agents share.
    pools: SharedPools | None = None
    # Which pools each memory's context-building calls include (pool/attachments.py).
    pool_attachments: PoolAttachments | None = None
    # Reflection, consolidation and compressed recall (lifecycle/); None without long-term memory.
    reflect_lifecycle: ReflectLifecycle | None = None
    # Parent/child scopes (scopes/): hierarchy, visibility, inherited reads; built by `build_service`.
    scopes: ScopeEngine | None = None
    # TIERED memories' own operations (Loom L1-L4); built by `build_service`.
    tiered: TieredService | None = None
    # Coherent caching of messages (short_term/coherence.py); None where unavailable (postgres)
    # or switched off.
    coherence: Coherence | None = None
    _starting: list[asyncio.Task[None]] = field(default_factory=list)
    _started: bool = False
    _closed: bool = False

    async def start(self) -> None:
        """Start the job runner; load long-term memory and hand older data to it in the
        background, so that start-up does not wait for models to load. Idempotent."""
        if self._started:
            return
        self._started = True
        await self.jobs.start()
        if self.reflect_lifecycle is not None:
            await self.reflect_lifecycle.scheduler.start()
        if self.turns is not None:
            self._starting.append(asyncio.create_task(self._start_long_term()))

    async def _start_long_term(self) -> None:
        assert self.long_term is not None and self.turns is not None
        try:
            if self.settings.long_term_preload:
                await self.long_term.open()
                log.info("long-term memory ready")
            migrated = await self.turns.migrate_legacy_pending()
            if migrated:
                log.info("queued background long-term records of an older version", extra={"fields": {"count": migrated}})
        except Exception:  # the first long-term call reports the error to its caller
            log.exception("long-term memory failed to start")

    async def close(self, grace: float = 10.0) -> None:
        """Give running jobs up to `grace` seconds (unfinished ones stay queued for the next
        start or another replica), then close the engines and the store."""
        if self._closed:
            return
        self._closed = True
        for task in self._starting:
            task.cancel()
        await asyncio.gather(*self._starting, return_exceptions=True)
        if self.reflect_lifecycle is not None:
            await self.reflect_lifecycle.scheduler.stop()
        await self.jobs.stop(grace)
        if self.tiered is not None:
            await self.tiered.close()
        if self.agent_state is not None:
            await self.agent_state.close()
        if self.long_term is not None:
            await self.long_term.close()
        await self.store.close()

    async def __aenter__(self) -> Service:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def build_summarizer(settings: ServiceSettings) -> Summarizer:
    """The LLM summariser when an endpoint is configured, else the extractive fallback."""
    if settings.llm_base_url is None:
        return ExtractiveSummarizer()
    return LlmSummarizer(ChatClient(LlmConfig(
        settings.llm_base_url, settings.llm_model,
        settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        settings.llm_timeout_s, settings.llm_max_retries)))


def build_tier_summarizer(settings: ServiceSettings) -> TierSummarizer:
    """The LLM's tier summaries when an endpoint is configured, else the offline extractive ones."""
    llm = _chat_client(settings)
    return ExtractiveTierSummarizer() if llm is None else LlmTierSummarizer(llm)


def _chat_client(settings: ServiceSettings) -> ChatClient | None:
    if settings.llm_base_url is None:
        return None
    return ChatClient(LlmConfig(
        settings.llm_base_url, settings.llm_model,
        settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
        settings.llm_timeout_s, settings.llm_max_retries))


def build_long_term(settings: ServiceSettings, store: Store, jobs: JobRunner) -> LongTermEngine:
    """The long-term engine: the server's own (`long_term/hybrid/`) in `store`, with the LLM's
    scorer and router when one is configured, the offline heuristics otherwise."""
    from agentscope_memory.long_term.hybrid import EngineSettings, HybridEngine, RankOptions, embedder_factory
    from agentscope_memory.long_term.hybrid.migrate import Mem0Migration
    from agentscope_memory.long_term.importance import HeuristicScorer, ImportanceScorer, LlmScorer
    from agentscope_memory.long_term.router import HeuristicRouter, LlmRouter, QueryRouter

    llm = _chat_client(settings)
    scorer: ImportanceScorer = LlmScorer(llm) if llm else HeuristicScorer()
    router: QueryRouter = LlmRouter(llm) if llm else HeuristicRouter()
    defaults = RankOptions(
        alpha=settings.long_term_alpha, beta=settings.long_term_beta, gamma=settings.long_term_gamma,
        delta=settings.long_term_delta, decay_rate=settings.long_term_decay_rate,
        dense_weight=settings.long_term_dense_weight, top_k_semantic=settings.long_term_top_k_semantic,
        top_k=settings.long_term_top_k,
    ).validate()
    engine = HybridEngine(
        store,
        embedder_factory(settings),
        scorer=scorer,
        router=router,
        settings=EngineSettings(defaults=defaults, fact_threshold=settings.long_term_fact_threshold,
                                scoring=settings.long_term_scoring,
                                route_parity_calls=settings.long_term_route_queries,
                                index_max_vectors=settings.long_term_index_max_vectors),
        in_database=settings.store == "postgres",
        migrations=[Mem0Migration(settings.data_dir / "mem0")],
    )
    if llm is not None and settings.long_term_fact_extraction == "mem0":
        from agentscope_memory.long_term.hybrid.extraction import Mem0Extractor

        engine.extractor = Mem0Extractor(llm)
    engine.attach_jobs(jobs)
    return engine


def build_service(settings: ServiceSettings | None = None) -> Service:
    """Build every engine from `settings` (the embedded defaults when None). Nothing runs until
    `await service.start()` (or `async with service:`)."""
    settings = settings or ServiceSettings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = open_store(
        settings.store,
        settings.data_dir,
        sqlite_synchronous=settings.sqlite_synchronous,
        postgres_dsn=settings.postgres_dsn.get_secret_value() if settings.postgres_dsn else None,
    )
    watched: WatchedStore | None = None
    if settings.coherent_cache and settings.store != "postgres":
        # Every engine writes through it, so every change of a memory is announced.
        store = watched = WatchedStore(store)
    tokens = PageTokens(store, _secret(settings.page_token_secret))
    tiered_kind = TieredKind()
    memories = MemoryManager(store, [InMemoryKind(), AutoContextKind(), tiered_kind], settings.limits(), tokens)
    jobs = JobRunner(store)
    service = Service(
        settings=settings,
        store=store,
        memories=memories,
        auto_context=AutoContextService(memories, build_summarizer(settings)),
        jobs=jobs,
        sessions=SessionExchange(memories, settings.sessions_root()),
        agent_state=AgentStateEngine(
            store, settings.agent_state_limits(), MemoryBackedLegacyMessages(memories), tokens,
            tombstone_retention_s=settings.agent_state_tombstone_retention_s,
        ),
    )
    if settings.long_term_enabled:
        service.long_term = build_long_term(settings, store, jobs)
        service.turns = Turns(memories, service.long_term, jobs)
        from agentscope_memory.long_term.hybrid import HybridEngine

        if isinstance(service.long_term, HybridEngine):
            service.reflect_lifecycle = build_reflect_lifecycle(service.long_term, _chat_client(settings), jobs, settings)
    service.scopes = ScopeEngine(memories, service.long_term)
    service.pools = SharedPools(store, tokens)
    service.pool_attachments = PoolAttachments(service.pools, store)
    service.scopes.child_hooks.append(PoolAttachments.inherit)
    service.auto_context.shared_context = service.pool_attachments.context
    from agentscope_memory.long_term.hybrid import HybridEngine as _Hybrid

    from agentscope_memory.long_term.importance import LlmScorer

    llm = _chat_client(settings)
    service.tiered = TieredService(memories, tiered_kind, build_tier_summarizer(settings),
                                   service.long_term if isinstance(service.long_term, _Hybrid) else None,
                                   LlmScorer(llm) if llm is not None else None)
    service.tiered.shared_context = service.pool_attachments.context
    if watched is not None:
        service.coherence = watched.coherence = Coherence(memories.watch_state, settings.coherent_cache_lease_s)
    return service
