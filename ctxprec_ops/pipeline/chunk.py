"""One chunk's stages: intake (rows -> cases or failures, claimed, judgment cache preloaded),
collect (judged cases -> score and failure rows) and the write (one transaction, which also
deletes the cases' claim).

The judging between intake and collect is ``stream``'s: it keeps one judging queue across chunks.
"""

from __future__ import annotations

import logging
import time as _time
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..cases.results import MetricResult
from ..errors import JudgeDeferredError
from ..judge.cache import DictVerdictCache
from ..scoring.confidence import confidence_of
from ..scoring.consistency import verdicts_json_text
from ..scoring.verdicts import NodeVerdict
from ..warehouse.claims import RowClaims
from ..warehouse.engine import write_retrying
from ..warehouse.label_figures import figure_row, write_figures
from ..warehouse.partition_rows import remove_from_partition
from ..warehouse.scoring_key import ScoringKey
from ..warehouse.segments import refresh_segment_values, segment_rows, write_segments
from ..warehouse.store import analyze_if_grown, delete_failures, write_chunk
from ..warehouse.upsert import ColumnRows
from .cascade import stage_columns
from .context import PipelineContext
from .intake import Intake, failure_row
from .records import INPUT_PROBLEMS, Chunk, ChunkResult

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["finish_chunk", "judgment_rows"]

log = logging.getLogger("ctxprec_ops.pipeline")

DEFERRED = JudgeDeferredError.error_type


def _now() -> datetime:
    return datetime.now(UTC)


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
        "mapping": key.mapping,
        "score": _number(r.score, "score"),
        "success": bool(r.success),
        "threshold": _number(r.threshold, "threshold"),
        "verdicts": verdicts_json_text(r.verdicts),
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
    ctx: PipelineContext, chunk: Chunk, intake: Intake, results: list[MetricResult], run_id: str, result: ChunkResult
) -> list[dict[str, Any]]:
    """Sort the judged cases into score rows and failures; add their spend to ``result``."""
    scored_at = _now()
    key, pk = ctx.key, chunk.partition_key
    scores: list[dict[str, Any]] = []
    cascaded = getattr(ctx.metric, "cascade", None) is not None
    for case, r in zip(intake.cases, results):
        log_id = str(case.id)
        result.judge_calls += r.judge_calls
        result.prompt_tokens += r.prompt_tokens or 0
        result.completion_tokens += r.completion_tokens or 0
        if result.cost is not None:
            result.cost = None if r.cost is None else result.cost + r.cost
        if cascaded:  # each judge's part of the spend
            strong = r.strong_cost
            cheap = None if r.cost is None or strong is None else r.cost - strong
            result.strong_cost = None if result.strong_cost is None or strong is None else result.strong_cost + strong
            result.cheap_cost = None if result.cheap_cost is None or cheap is None else result.cheap_cost + cheap
        if r.error_type == DEFERRED:  # a deferred transport has its requests: a later pass writes it
            result.rows_deferred += 1
            continue
        if r.error is not None or r.score is None:
            intake.failures.append(
                failure_row(
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
        result.nodes_judged += r.nodes_judged
        result.nodes_escalated += r.nodes_escalated
        scores.append(_score_row(r, log_id, pk, key, run_id, scored_at, chunk.index))
        if r.figures is not None:
            intake.figures.append(figure_row(r.figures, log_id, pk, key, run_id))
    return scores


def _collect_computed(ctx: PipelineContext, chunk: Chunk, intake: Intake, run_id: str) -> list[dict[str, Any]]:
    """A kind that needs no judge: compute every case straight into its score row (and figure
    row), without the per-case result objects of the judged path (``compute_row``)."""
    at = _now()
    key, pk, index = ctx.key, chunk.partition_key, chunk.index
    compute_row = ctx.metric.compute_row  # type: ignore[attr-defined]
    threshold = float(ctx.metric.threshold or 0.0)
    key_columns = key.values()
    scores: list[dict[str, Any]] = []
    figures = intake.figures
    for case in intake.cases:
        log_id = case.id
        r = compute_row(case)
        scores.append(
            {
                "log_id": log_id,
                "partition_key": pk,
                **key_columns,
                "score": r.score,
                "success": r.success,
                "threshold": threshold,
                "verdicts": r.verdicts,
                "reason": r.reason,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "cost": 0.0,
                "run_id": run_id,
                "scored_at": at,
                "judge_calls": 0,
                "cached_nodes": 0,
                "chunk_index": index,
            }
        )
        if r.figures is not None:
            figures.append(figure_row(r.figures, log_id, pk, key, run_id))
    return scores


def judgment_rows(ctx: PipelineContext, added: dict[bytes, NodeVerdict]) -> ColumnRows:
    """New verdicts as ``ctxprec_judgments`` rows (judge model and prompt version shared; in a
    cascade each verdict under its own stage's model)."""
    verdicts = list(added.values())
    columns: dict[str, list[Any]] = {
        "key": list(added),
        "relevant": [bool(v.relevant) for v in verdicts],
        "reason": [v.reason for v in verdicts],
        "agreement": list(map(confidence_of, verdicts)),
    }
    shared = {"judge_model": ctx.key.judge_model, "prompt_version": ctx.key.prompt_version, "created_at": _now()}
    stages = stage_columns(ctx.metric, verdicts)
    if stages is not None:
        columns.update(stages)
        shared = {"created_at": shared["created_at"]}
    return ColumnRows(columns, shared=shared)


def _write(
    ctx: PipelineContext,
    intake: Intake,
    scores: list[dict[str, Any]],
    cache: DictVerdictCache | None,
    claims: RowClaims | None,
    verdicts_saved: bool,
) -> None:
    """Scores, failures and new judgments of the chunk in one transaction (the judgments only
    when they were not written as they arrived: ``verdicts_saved``), deleting the cases' claim."""
    judgments: ColumnRows | list[dict[str, Any]] = []
    if cache is not None and cache.added and not verdicts_saved:
        judgments = judgment_rows(ctx, cache.added)

    def write(conn: Connection) -> None:
        if intake.unscored:  # scored while unique, shared by several rows now: their failure replaces it
            remove_from_partition(conn, ctx.tables, ctx.key, intake.partition_key, intake.unscored)
        write_chunk(
            conn,
            ctx.tables,
            ctx.key,
            log_ids=intake.log_ids,
            scores=scores,
            failures=intake.failures,
            judgments=judgments,
        )
        if intake.unsampled_ids:  # a failure left by a run at a higher rate is not this run's row
            delete_failures(conn, ctx.tables, ctx.key, intake.unsampled_ids)
        if claims is not None:  # the rows are written: other runs find them scored
            claims.release_in(conn, intake.claim)
        if intake.figures:
            write_figures(conn, ctx.config.output_schema, intake.figures)
        seg_table = ctx.segments_table
        if seg_table is not None and scores:  # the segment values each new score row carries
            rows = segment_rows(scores, intake.segment_values, ctx.segments)
            write_segments(conn, seg_table, ctx.key, rows, moved=intake.moved, partition_key=scores[0]["partition_key"])
        if seg_table is not None and intake.segment_refresh:  # corrected at the source since scored
            refresh_segment_values(conn, seg_table, ctx.key, intake.partition_key, intake.segment_refresh)
            log.info(
                "partition %s: %d row(s) scored before have new segment values at the source: recorded",
                intake.partition_key,
                len(intake.segment_refresh),
            )

    # one transaction, run again if it loses a conflict to a concurrent run's (DuckDB; once elsewhere)
    write_retrying(ctx.engine, write)
    # PostgreSQL: statistics for the scored-ids lookup's plan (no-op elsewhere; docs/scaling.md)
    analyze_if_grown(
        ctx.engine, ctx.tables, {ctx.tables.scores.name: len(scores), ctx.tables.failures.name: len(intake.failures)}
    )


def _add_extras(ctx: PipelineContext, intake: Intake, scores: list[dict[str, Any]]) -> None:
    """The reader's extra columns (a span's trace id, ...) on the chunk's score and failure rows
    (every row of a table gets the same keys: the write takes one column list per table)."""
    extra = ctx.rows.extra_columns
    blank: dict[str, Any] = dict.fromkeys(extra)
    for rows, table in ((scores, ctx.tables.scores), (intake.failures, ctx.tables.failures)):
        names = [c for c in extra if c in table.c]
        for row in rows:
            values = intake.extras.get(row["log_id"], blank)
            row.update({c: values.get(c) for c in names})


def _write_back(ctx: PipelineContext, scores: list[dict[str, Any]]) -> None:
    """Annotate the chunk's spans in Phoenix (``traces/writeback.py``): after the chunk is
    committed, never failing it; what failed is recorded and sent again by the run's last sweep
    or the next run."""
    from ..traces.writeback import write_back

    target = ctx.config.phoenix
    assert target is not None
    try:
        result = write_back(ctx.engine, target, ctx.key, scores, schema=ctx.config.output_schema)
    except Exception as exc:  # the scores are committed; the sweep at the end sends them
        log.warning("write-back of a chunk to %s failed: %s: %s", target.name, type(exc).__name__, exc)
        return
    ctx.write_backs.target = target.name
    ctx.write_backs.add(result)


def finish_chunk(
    ctx: PipelineContext,
    chunk: Chunk,
    intake: Intake,
    results: list[MetricResult],
    run_id: str,
    started: float,
    *,
    claims: RowClaims | None = None,
    verdicts_saved: bool = False,
) -> ChunkResult:
    """Collect the judged cases and write the chunk in one transaction (the write side): with
    ``verdicts_saved`` its new judgments are in the cache already; ``claims``: whose claim row
    of the cases the write deletes."""
    result = ChunkResult(chunk.partition_key, chunk.index, rows_total=intake.all_rows, rows_sampled=len(intake.rows))
    if not intake.cases:
        scores: list[dict[str, Any]] = []
    elif not ctx.config.kind.needs_judge:
        scores = _collect_computed(ctx, chunk, intake, run_id)
    else:
        scores = _collect(ctx, chunk, intake, results, run_id, result)
    if intake.extras:
        _add_extras(ctx, intake, scores)
    _write(ctx, intake, scores, intake.cache, claims, verdicts_saved)
    if ctx.config.write_back and scores:  # committed: now the spans they came from
        _write_back(ctx, scores)
    result.rows_scored = len(intake.done_ids) + len(scores)
    # rows_total = scored + failed + deferred (deferred rows are written by a later pass)
    result.rows_cached += len(intake.done_ids)
    result.rows_failed = len(intake.failures)
    result.rows_held = len(intake.held)
    result.failures_by_type = dict(Counter(f["error_type"] for f in intake.failures))
    result.seconds = _time.perf_counter() - started
    breaker = ctx.guards.breaker
    if breaker is not None and breaker.gave_up and set(result.failures_by_type) - INPUT_PROBLEMS:
        result.error_message = breaker.gave_up  # the cause, for the run row and the one-line error
    elif ctx.guards.answers.tripped and set(result.failures_by_type) - INPUT_PROBLEMS:
        result.error_message = ctx.guards.answers.tripped  # the judge's answers were unusable: which way
    return result
