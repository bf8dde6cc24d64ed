"""Proto <-> library for reflection and consolidation (`lifecycle_service.proto`)."""

from __future__ import annotations

from typing import Any

from agentscope_memory._proto.agentscope.memory.v1 import lifecycle_service_pb2 as pb
from agentscope_memory.convert.from_proto import long_term_item_from_proto
from agentscope_memory.convert.to_proto import long_term_item_to_proto, scope_to_proto
from agentscope_memory.errors import InvalidArgumentError
from agentscope_memory.lifecycle.consolidation import ConsolidationReport, Merge
from agentscope_memory.lifecycle.forgetting import ForgetReport, Forgotten
from agentscope_memory.lifecycle.fidelity import Fidelity
from agentscope_memory.lifecycle.reflection import ReflectionResult
from agentscope_memory.long_term.engine import Scope


def reflection_overrides_from_proto(request: pb.TriggerReflectionRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if request.HasField("importance_threshold"):
        out["importance_threshold"] = request.importance_threshold
    if request.HasField("min_facts"):
        out["min_facts"] = request.min_facts
    if request.HasField("cooldown_seconds"):
        out["cooldown_s"] = request.cooldown_seconds
    return out


def consolidation_overrides_from_proto(request: pb.ConsolidateRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("threshold", "similarity", "min_cluster_size", "fidelity_threshold"):
        if request.HasField(name):
            out[name] = getattr(request, name)
    return out


def reflection_result_to_proto(result: ReflectionResult) -> pb.TriggerReflectionResponse:
    response = pb.TriggerReflectionResponse(
        reflected=result.reflected, reason=result.reason, fact_ids=result.fact_ids,
        importance_sum=result.importance_sum, pending_facts=result.pending_facts, method=result.method,
        duration_seconds=result.duration_s,
    )
    if result.reflection is not None:
        response.reflection.CopyFrom(long_term_item_to_proto(result.reflection))
    return response


def merge_to_proto(merge: Merge) -> pb.ConsolidationMerge:
    f = merge.fidelity
    return pb.ConsolidationMerge(
        original_ids=merge.original_ids, text=merge.text, method=merge.method,
        fidelity_embedding_similarity=f.embedding_similarity, fidelity_keyword_retention=f.keyword_retention,
        fidelity_composite_score=f.composite_score, fidelity_passed=f.passed,
        fidelity_lost_keywords=f.lost_keywords, memory_id=merge.memory_id, applied=merge.applied,
        fidelity_invented_numbers=f.invented_numbers,
    )


def consolidation_report_to_proto(report: ConsolidationReport) -> pb.ConsolidateResponse:
    return pb.ConsolidateResponse(
        facts_before=report.facts_before, facts_after=report.facts_after, clusters=report.clusters,
        merged=report.merged, originals_retired=report.originals_retired, failed_fidelity=report.failed_fidelity,
        skipped_small=report.skipped_small, skipped_large=report.skipped_large, trimmed=report.trimmed,
        dry_run=report.dry_run, ran=report.ran, reason=report.reason, duration_seconds=report.duration_s,
        merges=[merge_to_proto(m) for m in report.merges],
    )


def reflection_result_from_proto(response: pb.TriggerReflectionResponse) -> ReflectionResult:
    from agentscope_memory.convert.from_proto import long_term_item_from_proto

    return ReflectionResult(
        reflected=response.reflected, reason=response.reason,
        reflection=long_term_item_from_proto(response.reflection) if response.HasField("reflection") else None,
        fact_ids=list(response.fact_ids), importance_sum=response.importance_sum,
        pending_facts=response.pending_facts, method=response.method, duration_s=response.duration_seconds,
    )


def merge_from_proto(merge: pb.ConsolidationMerge) -> Merge:
    return Merge(
        original_ids=list(merge.original_ids), text=merge.text, method=merge.method,
        fidelity=Fidelity(merge.fidelity_embedding_similarity, merge.fidelity_keyword_retention,
                          merge.fidelity_composite_score, merge.fidelity_passed, list(merge.fidelity_lost_keywords),
                          list(merge.fidelity_invented_numbers)),
        memory_id=merge.memory_id, applied=merge.applied,
    )


def consolidation_report_from_proto(response: pb.ConsolidateResponse) -> ConsolidationReport:
    return ConsolidationReport(
        facts_before=response.facts_before, facts_after=response.facts_after, clusters=response.clusters,
        merged=response.merged, originals_retired=response.originals_retired,
        failed_fidelity=response.failed_fidelity, skipped_small=response.skipped_small,
        skipped_large=response.skipped_large, trimmed=response.trimmed, dry_run=response.dry_run, ran=response.ran,
        reason=response.reason, duration_s=response.duration_seconds,
        merges=[merge_from_proto(m) for m in response.merges],
    )


def reflection_request(scope: Scope, importance_threshold: float | None, min_facts: int | None,
                       cooldown_s: float | None) -> pb.TriggerReflectionRequest:
    request = pb.TriggerReflectionRequest(scope=scope_to_proto(scope))
    if importance_threshold is not None:
        request.importance_threshold = importance_threshold
    if min_facts is not None:
        request.min_facts = min_facts
    if cooldown_s is not None:
        request.cooldown_seconds = cooldown_s
    return request


def consolidate_request(scope: Scope, dry_run: bool, overrides: dict[str, Any]) -> pb.ConsolidateRequest:
    known = {"threshold", "similarity", "min_cluster_size", "fidelity_threshold"}
    unknown = set(overrides) - known
    if unknown:
        raise TypeError(f"unknown consolidation settings: {', '.join(sorted(unknown))}")
    return pb.ConsolidateRequest(scope=scope_to_proto(scope), dry_run=dry_run, **overrides)


def forget_overrides_from_proto(request: pb.ForgetRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("base_retention", "strengthening_factor", "threshold"):
        if request.HasField(name):
            out[name] = getattr(request, name)
    if request.forget_every_type:
        if request.excluded_types:
            raise InvalidArgumentError("excluded_types", "leave it empty with forget_every_type")
        out["excluded_types"] = []
    elif request.excluded_types:
        out["excluded_types"] = list(request.excluded_types)
    return out


def forget_report_to_proto(report: ForgetReport, max_results: int) -> pb.ForgetResponse:
    if not 0 <= max_results <= 1000:
        raise InvalidArgumentError("max_results", f"must be between 0 and 1000, not {max_results}")
    shown = report.forgotten[: max_results or 100]
    return pb.ForgetResponse(
        dry_run=report.dry_run, scanned=report.scanned, total_forgotten=report.total,
        forgotten=[pb.ForgottenMemory(memory=long_term_item_to_proto(f.item), retention=f.retention) for f in shown],
        duration_seconds=report.duration_s)


def forget_report_from_proto(response: pb.ForgetResponse) -> ForgetReport:
    return ForgetReport(scanned=response.scanned, dry_run=response.dry_run, duration_s=response.duration_seconds,
                        total=response.total_forgotten,
                        forgotten=[Forgotten(long_term_item_from_proto(f.memory), f.retention) for f in response.forgotten])


def forget_request(scope: Scope, dry_run: bool, overrides: dict[str, Any], max_results: int = 0) -> pb.ForgetRequest:
    request = pb.ForgetRequest(scope=scope_to_proto(scope), dry_run=dry_run, max_results=max_results)
    for name in ("base_retention", "strengthening_factor", "threshold"):
        if overrides.get(name) is not None:
            setattr(request, name, overrides[name])
    if "excluded_types" in overrides and overrides["excluded_types"] is not None:
        if list(overrides["excluded_types"]):
            request.excluded_types.extend(overrides["excluded_types"])
        else:
            request.forget_every_type = True
    return request
