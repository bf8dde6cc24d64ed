"""TIERED memory (Loom L1-L4), in-process over the embedded sqlite store: the cost of one add
(with its promotion/compaction pass) as the history grows from 100 to 100,000 items, as a ratio
to an IN_MEMORY add at the same size measured in the same run (it must stay flat: tiers are
bounded by their budgets, so an add never reads the history); and the time to project a
32k-token context, as a ratio to reading L1 with GetMessages."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from agentscope_memory.message import Msg, MsgRole
from agentscope_memory.service import ServiceSettings, build_service
from agentscope_memory.short_term.tiered.projection import ProjectionRequest
from bench.harness import percentile

SIZES = (100, 1_000, 10_000, 100_000)
SAMPLES = 200
BATCH = 1000
T = "bench"


def _msg(i: int) -> Msg:
    return Msg.create(MsgRole.USER if i % 2 else MsgRole.ASSISTANT,
                      f"Step {i}: checked the build logs of runner r{i % 17}; the cache was cold and the fix is queued.")


def _importance(i: int) -> float | None:
    """Every fifth item is important (promoted to L2); the rest are scored by the server."""
    return 0.9 if i % 5 == 0 else None


async def _timed(call, samples: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(samples):
        started = time.perf_counter()
        await call()
        times.append(time.perf_counter() - started)
    return percentile(times, 0.5) * 1000


async def run(results: list[dict]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        service = build_service(ServiceSettings(data_dir=Path(tmp), long_term_enabled=False))
        async with service:
            assert service.tiered is not None
            await service.memories.create_memory(T, "tiered", "TIERED", json.dumps({"score_importance": True}))
            await service.memories.create_memory(T, "plain", "IN_MEMORY")
            filled = 0
            first_ratio = None
            counter = 0
            for size in SIZES:
                while filled < size:
                    n = min(BATCH, size - filled)
                    batch = [_msg(filled + k) for k in range(n)]
                    await service.tiered.add_items(T, "tiered", batch, [_importance(filled + k) for k in range(n)])
                    await service.memories.add_messages(T, "plain", batch)
                    filled += n

                async def tiered_add() -> None:
                    nonlocal counter
                    counter += 1
                    await service.tiered.add_items(T, "tiered", [_msg(counter)], [_importance(counter)])

                async def plain_add() -> None:
                    nonlocal counter
                    counter += 1
                    await service.memories.add_messages(T, "plain", [_msg(counter)])

                tiered_ms = await _timed(tiered_add, SAMPLES)
                plain_ms = await _timed(plain_add, SAMPLES)
                filled += SAMPLES
                ratio = round(tiered_ms / plain_ms, 2)
                first_ratio = first_ratio or ratio
                status = await service.tiered.status(T, "tiered")
                results.append({"benchmark": f"tiered add at {size} items", "p50_ms": round(tiered_ms, 3),
                                "in_memory_p50_ms": round(plain_ms, 3), "ratio_to_in_memory": ratio,
                                "ratio_to_first_size": round(ratio / first_ratio, 2),
                                "tier_items": [u.items for u in status.tiers], "tier_tokens": [u.tokens for u in status.tiers]})

            async def project() -> None:
                await service.tiered.project(T, "tiered", ProjectionRequest("plan the next release steps for the whole team", 32_000))

            async def read_l1() -> None:
                await service.memories.get_messages(T, "tiered")

            project_ms = await _timed(project, 50)
            read_ms = await _timed(read_l1, 50)
            projection = await service.tiered.project(T, "tiered", ProjectionRequest("plan the next release steps for the whole team", 32_000))
            results.append({"benchmark": "tiered projection, 32k-token budget", "p50_ms": round(project_ms, 3),
                            "get_messages_p50_ms": round(read_ms, 3), "ratio_to_get_messages": round(project_ms / read_ms, 2),
                            "projected_tokens": projection.tokens, "mode": projection.mode})
