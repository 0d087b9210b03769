"""One chunk's stages: intake (rows -> cases or failures, judgment cache preloaded), collect
(judged cases -> score and failure rows) and the write (one transaction); ``score_chunk``.

The judging between intake and collect is ``stream``'s: it keeps one judging queue across chunks.
"""

from __future__ import annotations

import time as _time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..budget import Budget
from ..cache import DictVerdictCache, remembered_keys
from ..errors import InvalidTestCaseError
from ..results import MetricResult
from ..secrets import redact
from ..warehouse.engine import read_connection, write_transaction
from ..warehouse.source import parse_partition_key, read_chunk_rows
from ..warehouse.store import ScoringKey, load_judgments, run_spend, scored_ids, write_chunk
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .records import Chunk, ChunkResult, ProgressCallback

__all__ = ["score_chunk", "read_intake", "finish_chunk", "remaining_budget"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class _Intake:
    """A chunk's rows sorted into: already scored, to judge (as cases), failed on their content."""

    rows: list[dict[str, Any]]
    done_ids: set[str]
    cases: list[Any] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    #: the judgment cache preloaded for ``cases`` (None for offline judges)
    cache: DictVerdictCache | None = None
    #: the cases' judgment keys by ``judgment_keys`` arguments (computed once, see ``remembered_keys``)
    key_memo: dict[tuple, list[str]] = field(default_factory=dict)


def _failure(log_id: str, pk: str, key: ScoringKey, error_type: str, message: str, attempts: int,
             run_id: str, at: datetime, chunk_index: int) -> dict[str, Any]:
    return {
        "log_id": log_id, "partition_key": pk, "metric": key.metric, "judge_model": key.judge_model,
        "prompt_version": key.prompt_version, "error_type": error_type, "error_message": message[:4000],
        "attempts": int(attempts or 0), "run_id": run_id, "failed_at": at, "chunk_index": chunk_index,
    }


def _intake(ctx: PipelineContext, chunk: Chunk, run_id: str) -> _Intake:
    """Read the chunk, skip rows already scored, turn the rest into cases or ``invalid_input``."""
    key, pk = ctx.key, chunk.partition_key
    with read_connection(ctx.engine) as conn:
        rows = read_chunk_rows(conn, ctx.source, pk, chunk.after_id, chunk.upto_id)
        done_ids = scored_ids(conn, ctx.tables, key, [str(r["id"]) for r in rows])
    intake = _Intake(rows, done_ids)
    now = _now()
    to_case = ctx.config.kind.row_to_case
    id_counts = Counter(str(r["id"]) for r in rows)
    for log_id, n in id_counts.items():
        if n > 1 and log_id not in done_ids:
            # which of the rows is the real one is unknowable: score none, say why (once per id)
            msg = (f"column 'id' value {log_id[:100]!r} is not unique: {n} rows of partition {pk} share it; "
                   "none of them is scored until the duplicates are removed")
            intake.failures.append(_failure(log_id, pk, key, InvalidTestCaseError.error_type, msg, 0, run_id, now,
                                            chunk.index))
    for row in rows:
        log_id = str(row["id"])
        if log_id in done_ids or id_counts[log_id] > 1:
            continue
        try:
            intake.cases.append(to_case(row))
        except InvalidTestCaseError as exc:
            intake.failures.append(_failure(log_id, pk, key, exc.error_type, redact(str(exc)), 0, run_id, now,
                                            chunk.index))
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


def _score_row(r: MetricResult, log_id: str, pk: str, key: ScoringKey, run_id: str, at: datetime,
               chunk_index: int) -> dict[str, Any]:
    return {
        "log_id": log_id, "partition_key": pk, "metric": r.metric, "score": float(r.score),  # type: ignore[arg-type]
        "success": bool(r.success), "threshold": float(r.threshold),
        "verdicts": [{"node": v.node, "relevant": v.relevant, "reason": v.reason} for v in r.verdicts],
        "reason": r.reason, "judge_model": r.judge_model or key.judge_model,
        "prompt_version": r.prompt_version or key.prompt_version, "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens, "cost": r.cost, "run_id": run_id, "scored_at": at,
        "judge_calls": r.judge_calls, "cached_nodes": r.cached_nodes, "chunk_index": chunk_index,
    }


def _collect(ctx: PipelineContext, chunk: Chunk, intake: _Intake, results: list[MetricResult], run_id: str,
             result: ChunkResult) -> list[dict[str, Any]]:
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
            intake.failures.append(_failure(log_id, pk, key, r.error_type or "error", r.error or "scoring failed",
                                            r.attempts, run_id, scored_at, chunk.index))
            continue
        if r.judge_calls == 0 and r.cached_nodes > 0:
            result.rows_cached += 1
        scores.append(_score_row(r, log_id, pk, key, run_id, scored_at, chunk.index))
    return scores


def _write(ctx: PipelineContext, intake: _Intake, scores: list[dict[str, Any]],
           cache: DictVerdictCache | None) -> None:
    """Scores, failures and new judgments of the chunk in one transaction."""
    now = _now()
    judgments = []
    if cache is not None and cache.added:
        judgments = [
            {"key": k, "judge_model": ctx.key.judge_model, "prompt_version": ctx.key.prompt_version,
             "relevant": bool(v.relevant), "reason": v.reason, "created_at": now}
            for k, v in cache.added.items()
        ]
    with write_transaction(ctx.engine) as conn:
        write_chunk(conn, ctx.tables, ctx.key, log_ids=[str(r["id"]) for r in intake.rows],
                    scores=scores, failures=intake.failures, judgments=judgments)


def finish_chunk(ctx: PipelineContext, chunk: Chunk, intake: _Intake, results: list[MetricResult], run_id: str,
                 started: float) -> ChunkResult:
    """Collect the judged cases and write the chunk in one transaction (the write side)."""
    result = ChunkResult(chunk.partition_key, chunk.index, rows_total=len(intake.rows))
    scores = _collect(ctx, chunk, intake, results, run_id, result) if intake.cases else []
    _write(ctx, intake, scores, intake.cache)
    result.rows_scored = len(intake.done_ids) + len(scores)
    result.rows_cached += len(intake.done_ids)
    result.rows_failed = len(intake.failures)
    result.failures_by_type = dict(Counter(f["error_type"] for f in intake.failures))
    result.seconds = _time.perf_counter() - started
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
    ``run_id`` has already spent.
    """
    from .stream import score_chunks

    if isinstance(chunk, dict):
        chunk = Chunk.from_dict(chunk)
    parse_partition_key(chunk.partition_key)
    ctx = context or prepare(config)
    return score_chunks(ctx, [chunk], run_id=run_id, budget=budget, progress=progress)[0]
