"""``score_partition``: plan, score every chunk, finalize — the function every entry point calls."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from ..judge.budget import Budget
from ..warehouse.engine import display_url
from ..warehouse.source import parse_partition_key
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .finalize import finalize_run, record_abort, run_row, write_run
from .plan import plan_chunks
from .records import Chunk, ChunkResult, ProgressCallback, ProgressEvent, RunStatus, RunSummary
from .stream import score_chunks
from .workers import can_fork_out, score_in_processes

__all__ = ["score_partition"]

log = logging.getLogger("ctxprec_ops.pipeline")


def _now() -> datetime:
    return datetime.now(UTC)


def _score_chunks(
    ctx: PipelineContext, chunks: list[Chunk], run_id: str, progress: ProgressCallback | None, workers: int
) -> list[ChunkResult]:
    """Score the planned chunks: in worker processes when asked and possible, else here as one
    stream (one judging queue and one budget span them all; chunks another process has claimed
    are scored after the free ones, once released)."""
    config = ctx.config
    total = sum(c.rows for c in chunks)
    if workers > 1 and len(chunks) > 1 and can_fork_out(config):
        return score_in_processes(config, chunks, run_id, workers, progress, total)
    budget = Budget(config.max_cost) if config.max_cost is not None else None
    return score_chunks(ctx, chunks, run_id=run_id, budget=budget, progress=progress, total=total)


def _start_run(ctx: PipelineContext, partition_key: str, run_id: str) -> RunSummary:
    """Write the run's ``running`` row (replaced when the run ends) and log what it scores."""
    base = run_row(ctx, partition_key, run_id, RunStatus.RUNNING, started_at=_now())
    write_run(ctx, base)
    log.info(
        "scoring %s partition %s of %s in %s (judge %s, prompt %s, run %s)",
        ctx.key.metric,
        partition_key,
        ctx.source.name,
        display_url(ctx.engine),
        ctx.key.judge_model,
        ctx.key.prompt_version,
        run_id,
    )
    return base


def _report_end(summary: RunSummary, progress: ProgressCallback | None) -> None:
    log.info(
        "partition %s: %s; %d scored (%d cached), %d failed; mean %s",
        summary.partition_key,
        summary.status,
        summary.rows_scored,
        summary.rows_cached,
        summary.rows_failed,
        "n/a" if summary.mean_score is None else f"{summary.mean_score:.4f}",
    )
    if progress is not None:
        # a run whose only failures are bad input rows is complete: say so, not "partial"
        done = summary.status == "partial" and summary.completed
        note = f"done, {summary.rows_failed} bad input row(s) recorded" if done else summary.status
        progress(ProgressEvent("finished", summary.partition_key, summary.rows_total, summary.rows_total, note))


def score_partition(
    config: PipelineConfig,
    partition_key: str,
    *,
    run_id: str | None = None,
    progress: ProgressCallback | None = None,
    workers: int = 1,
) -> RunSummary:
    """Score one partition: plan, score every chunk, finalize. Returns the run row.

    Idempotent and resumable: rows already scored are skipped, failures of rows that now score
    are removed. With ``config.max_cost`` one budget spans all chunks. An exception aborts the
    run, records it as ``failed`` in ``ctxprec_runs`` (with a secret-free message) and is
    re-raised; chunks written before it stay written.

    ``workers > 1`` scores chunks in that many worker processes (spawned, so safe inside
    threaded hosts) for CPU-bound judges on a multi-core machine; it needs a picklable config
    with a URL (not an ``Engine``) and no ``max_cost`` (a budget cannot span processes),
    otherwise chunks are scored in this process, in order.
    """
    parse_partition_key(partition_key)
    if config.judge_mode == "batch":  # OpenAI Batch API: submit or resume, poll, collect (ctxprec_ops/batch)
        from ..batch.partition import score_partition_batch

        return score_partition_batch(config, partition_key, run_id=run_id, progress=progress)
    run_id = run_id or uuid.uuid4().hex
    ctx = prepare(config)
    base = _start_run(ctx, partition_key, run_id)
    started = base.started_at
    try:
        chunks = plan_chunks(config, partition_key, context=ctx)
        total = sum(c.rows for c in chunks)
        log.info("partition %s: %d rows in %d chunks of up to %d", partition_key, total, len(chunks), config.chunk_size)
        if progress is not None:
            progress(ProgressEvent("planned", partition_key, 0, total, f"{total} rows in {len(chunks)} chunks"))
        results = _score_chunks(ctx, chunks, run_id, progress, workers)
        summary = finalize_run(
            config, partition_key, run_id=run_id, chunk_results=results, started_at=started, context=ctx
        )
        cause = next((r.error_message for r in results if r.error_message), None)
        if cause and not summary.completed:
            summary.error_message = cause  # e.g. "judge unreachable: connection refused at URL"
            write_run(ctx, summary)
    except BaseException as exc:
        record_abort(ctx, base, exc)
        raise
    _report_end(summary, progress)
    return summary
