"""One chunk's stages: intake (rows -> cases or failures, judgment cache preloaded), collect
(judged cases -> score and failure rows) and the write (one transaction); ``score_chunk``.

The judging between intake and collect is ``stream``'s: it keeps one judging queue across chunks
and holds each chunk's claim (``chunk_claim_name``) from before its read until its write committed.
"""

from __future__ import annotations

import time as _time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..budget import Budget
from ..cache import DictVerdictCache, remembered_keys
from ..errors import InvalidTestCaseError
from ..results import MetricResult
from ..secrets import redact
from ..warehouse.engine import read_connection, write_transaction
from ..warehouse.label_figures import figure_row, write_figures
from ..warehouse.rows import case_or_failure
from ..warehouse.source import parse_partition_key, read_chunk_rows
from ..warehouse.store import (
    ScoringKey,
    analyze_if_grown,
    delete_failures,
    load_judgments,
    run_spend,
    scored_ids,
    write_chunk,
)
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .records import INPUT_PROBLEMS, Chunk, ChunkResult, ProgressCallback

__all__ = ["score_chunk", "score_chunk_if_free", "chunk_claim_name", "read_intake", "finish_chunk", "remaining_budget"]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Intake:
    """A chunk's rows sorted into: already scored, to judge (as cases), failed on their content."""

    rows: list[dict[str, Any]]  # the rows in the sample (all rows without sampling)
    done_ids: set[str]
    cases: list[Any] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    all_rows: int = 0  # every row of the chunk, sampled or not
    unsampled_ids: list[str] = field(default_factory=list)
    #: per-case figures of metrics that have them (``MetricResult.figures``), as rows to write
    figures: list[dict[str, Any]] = field(default_factory=list)
    #: the judgment cache preloaded for ``cases`` (None for offline judges)
    cache: DictVerdictCache | None = None
    #: the cases' judgment keys by ``judgment_keys`` arguments (computed once, see ``remembered_keys``)
    key_memo: dict[tuple, list[str]] = field(default_factory=dict)


def _failure(
    log_id: str,
    pk: str,
    key: ScoringKey,
    error_type: str,
    message: str,
    attempts: int,
    run_id: str,
    at: datetime,
    chunk_index: int,
) -> dict[str, Any]:
    return {
        "log_id": log_id,
        "partition_key": pk,
        "metric": key.metric,
        "source_table": key.source_table,
        "judge_model": key.judge_model,
        "prompt_version": key.prompt_version,
        "error_type": error_type,
        "error_message": message[:4000],
        "attempts": int(attempts or 0),
        "run_id": run_id,
        "failed_at": at,
        "chunk_index": chunk_index,
    }


def _intake(ctx: PipelineContext, chunk: Chunk, run_id: str) -> _Intake:
    """Read the chunk, skip rows already scored, turn the rest into cases or ``invalid_input``."""
    key, pk = ctx.key, chunk.partition_key
    sample = ctx.config.sample
    with read_connection(ctx.engine) as conn:
        every = read_chunk_rows(conn, ctx.source, pk, chunk.after_id, chunk.upto_id)
        rows = [r for r in every if sample.contains(str(r["id"]), chunk.sample_cutoff)]
        done_ids = scored_ids(conn, ctx.tables, key, [str(r["id"]) for r in rows])
    intake = _Intake(rows, done_ids, all_rows=len(every))
    if len(rows) < len(every):  # outside the sample: neither scored nor a failure
        picked = {str(r["id"]) for r in rows}
        intake.unsampled_ids = [i for i in {str(r["id"]) for r in every} if i not in picked]
    now = _now()
    to_case = ctx.config.kind.row_to_case
    id_counts = Counter(str(r["id"]) for r in rows)
    for log_id, n in id_counts.items():
        if n > 1 and log_id not in done_ids:
            # which of the rows is the real one is unknowable: score none, say why (once per id)
            msg = (
                f"column 'id' value {log_id[:100]!r} is not unique: {n} rows of partition {pk} share it; "
                "none of them is scored until the duplicates are removed"
            )
            intake.failures.append(
                _failure(log_id, pk, key, InvalidTestCaseError.error_type, msg, 0, run_id, now, chunk.index)
            )
    for row in rows:
        log_id = str(row["id"])
        if log_id in done_ids or id_counts[log_id] > 1:
            continue
        id_problem = ctx.source.id_problem(row["id"])
        if id_problem is not None:
            intake.failures.append(
                _failure(log_id, pk, key, InvalidTestCaseError.error_type, id_problem, 0, run_id, now, chunk.index)
            )
            continue
        try:
            intake.cases.append(case_or_failure(to_case, row))
        except InvalidTestCaseError as exc:
            intake.failures.append(
                _failure(log_id, pk, key, exc.error_type, redact(str(exc)), 0, run_id, now, chunk.index)
            )
    return intake


def remaining_budget(ctx: PipelineContext, run_id: str) -> Budget | None:
    """``max_cost`` minus what this run already spent (chunks scored on other workers)."""
    if ctx.config.max_cost is None:
        return None
    with read_connection(ctx.engine) as conn:
        spent = run_spend(conn, ctx.tables, ctx.key, run_id)["cost"] or 0.0
    return Budget(max(0.0, ctx.config.max_cost - spent))


def read_intake(ctx: PipelineContext, chunk: Chunk, run_id: str) -> _Intake:
    """Intake plus the judgment cache preloaded for its cases (the read side of a chunk)."""
    intake = _intake(ctx, chunk, run_id)
    if intake.cases and not ctx.judge_is_offline:  # offline judges are free and instant: nothing to cache
        with remembered_keys(intake.key_memo):
            keys = [k for case in intake.cases for k in ctx.metric.judgment_keys(case)]
        with read_connection(ctx.engine) as conn:
            intake.cache = DictVerdictCache(load_judgments(conn, ctx.tables, keys))
    return intake


def _number(value: float | None, what: str) -> float:
    """A scored result's figure (only results with a score reach the score rows)."""
    if value is None:
        raise ValueError(f"a scored result has no {what}")
    return float(value)


def _score_row(
    r: MetricResult, log_id: str, pk: str, key: ScoringKey, run_id: str, at: datetime, chunk_index: int
) -> dict[str, Any]:
    return {
        "log_id": log_id,
        "partition_key": pk,
        "metric": r.metric,
        "source_table": key.source_table,
        "score": _number(r.score, "score"),
        "success": bool(r.success),
        "threshold": _number(r.threshold, "threshold"),
        "verdicts": [{"node": v.node, "relevant": v.relevant, "reason": v.reason} for v in r.verdicts],
        "reason": r.reason,
        "judge_model": r.judge_model or key.judge_model,
        "prompt_version": r.prompt_version or key.prompt_version,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "cost": r.cost,
        "run_id": run_id,
        "scored_at": at,
        "judge_calls": r.judge_calls,
        "cached_nodes": r.cached_nodes,
        "chunk_index": chunk_index,
    }


def _collect(
    ctx: PipelineContext, chunk: Chunk, intake: _Intake, results: list[MetricResult], run_id: str, result: ChunkResult
) -> list[dict[str, Any]]:
    """Sort the judged cases into score rows and failures; add their spend to ``result``."""
    scored_at = _now()
    key, pk = ctx.key, chunk.partition_key
    scores: list[dict[str, Any]] = []
    for case, r in zip(intake.cases, results):
        log_id = str(case.id)
        result.judge_calls += r.judge_calls
        result.prompt_tokens += r.prompt_tokens or 0
        result.completion_tokens += r.completion_tokens or 0
        if result.cost is not None:
            result.cost = None if r.cost is None else result.cost + r.cost
        if r.error is not None or r.score is None:
            intake.failures.append(
                _failure(
                    log_id,
                    pk,
                    key,
                    r.error_type or "error",
                    r.error or "scoring failed",
                    r.attempts,
                    run_id,
                    scored_at,
                    chunk.index,
                )
            )
            continue
        if r.judge_calls == 0 and r.cached_nodes > 0:
            result.rows_cached += 1
        scores.append(_score_row(r, log_id, pk, key, run_id, scored_at, chunk.index))
        if r.figures is not None:
            intake.figures.append(figure_row(r.figures, log_id, pk, key, run_id))
    return scores


def _write(ctx: PipelineContext, intake: _Intake, scores: list[dict[str, Any]], cache: DictVerdictCache | None) -> None:
    """Scores, failures and new judgments of the chunk in one transaction."""
    now = _now()
    judgments = []
    if cache is not None and cache.added:
        judgments = [
            {
                "key": k,
                "judge_model": ctx.key.judge_model,
                "prompt_version": ctx.key.prompt_version,
                "relevant": bool(v.relevant),
                "reason": v.reason,
                "created_at": now,
            }
            for k, v in cache.added.items()
        ]
    with write_transaction(ctx.engine) as conn:
        write_chunk(
            conn,
            ctx.tables,
            ctx.key,
            log_ids=[str(r["id"]) for r in intake.rows],
            scores=scores,
            failures=intake.failures,
            judgments=judgments,
        )
        if intake.unsampled_ids:  # a failure left by a run at a higher rate is not this run's row
            delete_failures(conn, ctx.tables, ctx.key, intake.unsampled_ids)
        if intake.figures:
            write_figures(conn, ctx.config.output_schema, intake.figures)
    # PostgreSQL: statistics for the scored-ids lookup's plan (no-op elsewhere; docs/scaling.md)
    analyze_if_grown(
        ctx.engine, ctx.tables, {ctx.tables.scores.name: len(scores), ctx.tables.failures.name: len(intake.failures)}
    )


def finish_chunk(
    ctx: PipelineContext, chunk: Chunk, intake: _Intake, results: list[MetricResult], run_id: str, started: float
) -> ChunkResult:
    """Collect the judged cases and write the chunk in one transaction (the write side)."""
    result = ChunkResult(chunk.partition_key, chunk.index, rows_total=intake.all_rows, rows_sampled=len(intake.rows))
    scores = _collect(ctx, chunk, intake, results, run_id, result) if intake.cases else []
    _write(ctx, intake, scores, intake.cache)
    result.rows_scored = len(intake.done_ids) + len(scores)
    result.rows_cached += len(intake.done_ids)
    result.rows_failed = len(intake.failures)
    result.failures_by_type = dict(Counter(f["error_type"] for f in intake.failures))
    result.seconds = _time.perf_counter() - started
    breaker = ctx.guards.breaker
    if breaker is not None and breaker.gave_up and set(result.failures_by_type) - INPUT_PROBLEMS:
        result.error_message = breaker.gave_up  # the cause, for the run row and the one-line error
    return result


def score_chunk(
    config: PipelineConfig,
    chunk: Chunk | dict[str, Any],
    *,
    run_id: str,
    progress: ProgressCallback | None = None,
    budget: Budget | None = None,
    context: PipelineContext | None = None,
) -> ChunkResult:
    """Score one chunk and write its outcome in one transaction.

    Rows already scored for this (metric, judge model, prompt version) are not judged again
    (they count as ``rows_scored`` and ``rows_cached``). Bad rows become ``invalid_input``
    failures; errored cases become failures with the core's ``error_type``. A failure record of
    a row that is now scored is deleted. ``budget`` defaults to ``config.max_cost`` minus what
    ``run_id`` has already spent. On PostgreSQL the chunk is claimed first: a process scoring the
    same chunk at the same time is waited for, and its rows are then skipped, not paid twice.
    """
    result = score_chunk_if_free(
        config, chunk, run_id=run_id, progress=progress, budget=budget, context=context, wait=True
    )
    assert result is not None
    return result


def chunk_claim_name(ctx: PipelineContext, chunk: Chunk) -> str:
    """What a chunk claim is about: the source table, the scoring key, the partition and bounds."""
    key = ctx.key
    return "|".join(
        [
            "ctxprec-chunk",
            ctx.source.name,
            key.metric,
            key.judge_model,
            key.prompt_version,
            chunk.partition_key,
            repr(chunk.after_id),
            repr(chunk.upto_id),
        ]
    )


def score_chunk_if_free(
    config: PipelineConfig,
    chunk: Chunk | dict[str, Any],
    *,
    run_id: str,
    progress: ProgressCallback | None = None,
    budget: Budget | None = None,
    context: PipelineContext | None = None,
    wait: bool = False,
) -> ChunkResult | None:
    """``score_chunk``, or ``None`` without doing anything when another process holds the
    chunk's claim (``wait=False``). The chunk is a one-chunk stream (``stream.score_chunks``)."""
    from .stream import score_chunks

    if isinstance(chunk, dict):
        chunk = Chunk.from_dict(chunk)
    parse_partition_key(chunk.partition_key)
    ctx = context or prepare(config)
    results = score_chunks(ctx, [chunk], run_id=run_id, budget=budget, progress=progress, wait_taken=wait)
    return results[0] if results else None
