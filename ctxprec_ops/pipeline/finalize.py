"""Summarise a partition into its ``ctxprec_runs`` row (from the tables, not from memory)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TypeVar

from ..errors import one_line
from ..secrets import redact
from ..warehouse.engine import connections_at_once, read_connection, write_retrying
from ..warehouse.source import Partition
from ..warehouse.store import failure_counts, mark_interrupted_runs, partition_counts, partition_scores, run_spend
from ..warehouse.upsert import upsert
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .ledger import reconcile
from .outcome import unaccounted_text
from .records import ChunkResult, RunStatus, RunSummary, run_status
from .run_figures import ScoresChanged, run_figures

__all__ = ["finalize_run", "write_run", "run_row", "record_abort"]

log = logging.getLogger("ctxprec_ops.pipeline")

T = TypeVar("T")

#: reads of the figures at most, when a concurrent writer changes the scores between the count and
#: the stream (a family without snapshot reads)
FIGURE_READS = 5


def _now() -> datetime:
    return datetime.now(UTC)


def _total(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))


def _spend(chunk_results: list[ChunkResult]) -> dict[str, Any]:
    return {
        "prompt_tokens": sum(c.prompt_tokens for c in chunk_results),
        "completion_tokens": sum(c.completion_tokens for c in chunk_results),
        "cost": _total([c.cost for c in chunk_results]),
        "judge_calls": sum(c.judge_calls for c in chunk_results),
    }


def _cascade_figures(ctx: PipelineContext, results: list[ChunkResult]) -> dict[str, Any]:
    """A cascade's run-row figures (nothing for one judge): node counts and each judge's spend from
    the chunk results (None without them), the threshold and its calibration's agreement."""
    cascade = getattr(ctx.metric, "cascade", None)
    if cascade is None:
        return {}
    if not cascade.calibrated:  # summarised apart from its chunks (a task of its own)
        from .cascade import ensure_cascade

        ensure_cascade(ctx, None, calibrate=False)
    out: dict[str, Any] = {"escalate_below": cascade.escalate_below}
    if cascade.calibration is not None:
        out["calibration_agreement"] = cascade.calibration.agreement
    if results:
        judged = sum(c.nodes_judged for c in results)
        escalated = sum(c.nodes_escalated for c in results)
        out.update(
            nodes_judged=judged,
            nodes_escalated=escalated,
            escalation_rate=escalated / judged if judged else None,
            cheap_cost=_total([c.cheap_cost for c in results]),
            strong_cost=_total([c.strong_cost for c in results]),
        )
    return out


def _rows_outside(ctx: PipelineContext, partition: Partition) -> tuple[int, int]:
    """Rows of the source in no partition, and rows of this partition without an id (warned)."""
    with read_connection(ctx.engine) as conn:
        unpartitioned = ctx.rows.count_unpartitioned(conn)
        without_id = ctx.rows.count_null_ids(conn, partition)
    if unpartitioned:
        log.warning(
            "%s: %d row(s) belong to no partition (%s is NULL or not readable as a time) and are "
            "never scored; see docs/internals.md for the forms read",
            ctx.source.name,
            unpartitioned,
            ctx.source.event_time.name,
        )
    return unpartitioned, without_id


def _beside(ctx: PipelineContext, fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """``fn(*args)`` started on a thread of its own where the engine can serve a second connection
    at the same time (not one connection shared by every thread, nor one per thread of an
    in-memory database); returns how to wait for its result."""
    if not connections_at_once(ctx.engine):
        value = fn(*args)
        return lambda: value
    pool = ThreadPoolExecutor(1, thread_name_prefix="ctxprec-finalize")
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)  # the thread ends with its one task
    return future.result


def _figures(
    ctx: PipelineContext, partition_key: str, run_id: str, results: list[ChunkResult]
) -> tuple[dict[str, Any], dict[str, int], dict[str, float | None], dict[str, Any]]:
    """The partition's counts, failure counts, score figures and the run's spend, read as one
    snapshot: the counts and the streamed scores must describe the same rows. Where a read
    transaction is not one snapshot (BigQuery and ClickHouse run each statement on its own, a
    Snowflake transaction reads committed rows per statement), a concurrent run writing this
    partition between the two reads makes them disagree: read again (``FIGURE_READS`` times)."""
    key = ctx.key
    for attempt in range(1, FIGURE_READS + 1):
        with read_connection(ctx.engine, snapshot=True) as conn:
            counts = partition_counts(conn, ctx.tables, key, partition_key, run_id)
            failed = failure_counts(conn, ctx.tables, key, partition_key)
            try:
                figures = run_figures(
                    partition_scores(conn, ctx.tables, key, partition_key), counts["scored"], counts["passed"]
                )
            except ScoresChanged as exc:
                if attempt == FIGURE_READS:
                    raise
                log.info("partition %s: %s (a concurrent run wrote scores); reading again", partition_key, exc)
                continue
            spend = _spend(results) if results else run_spend(conn, ctx.tables, key, run_id, partition_key)
        return counts, failed, figures, spend
    raise AssertionError("unreachable")


def finalize_run(
    config: PipelineConfig,
    partition_key: str | Partition,
    *,
    run_id: str,
    chunk_results: list[ChunkResult] | list[dict[str, Any]] | None = None,
    started_at: datetime | None = None,
    context: PipelineContext | None = None,
) -> RunSummary:
    """Compute the partition's figures and upsert its ``ctxprec_runs`` row.

    The ledger first reconciles the partition's source rows with its output rows
    (``pipeline/ledger.py``): ``rows_total`` is the partition's rows in the source now,
    ``rows_sampled`` those in the run's sample, ``rows_unaccounted`` the sampled rows in neither
    output table — a run with any is never ``succeeded``. Counts and score figures come from the
    tables (so a partition scored in mapped chunks, or resumed after a crash, is summarised as a
    whole); the score figures (mean, CI) are those of the scored rows.
    Tokens, cost and judge calls come from
    ``chunk_results`` when given (they include spend on rows that failed), else from the scores
    this ``run_id`` wrote. ``partition_key``: the key ``YYYY-MM-DD`` or its ``Partition``.
    """
    partition = Partition.of(partition_key)
    partition_key = partition.key
    ctx = context or prepare(config)
    key = ctx.key
    results = [ChunkResult.from_dict(c) if isinstance(c, dict) else c for c in (chunk_results or [])]
    outside = _beside(ctx, _rows_outside, ctx, partition)  # a scan of its own, while the ledger reads
    ledger = reconcile(ctx, partition)
    counts, failed, figures, spend = _figures(ctx, partition_key, run_id, results)
    unpartitioned, without_id = outside()
    sample = ctx.config.sample
    rows_failed = sum(failed.values())
    summary = RunSummary(
        run_id=run_id,
        partition_key=partition_key,
        metric=key.metric,
        status=run_status(counts["scored"], failed, ledger.unaccounted).value,
        rows_total=ledger.source_rows,
        rows_scored=counts["scored"],
        rows_cached=counts["cached"],
        rows_failed=rows_failed,
        prompt_tokens=spend["prompt_tokens"],
        completion_tokens=spend["completion_tokens"],
        cost=spend["cost"],
        judge_model=key.judge_model,
        prompt_version=key.prompt_version,
        started_at=started_at,
        finished_at=_now(),
        threshold=ctx.metric.threshold,
        judge_calls=spend["judge_calls"],
        failures_by_type=failed,
        rows_unpartitioned=unpartitioned,
        rows_without_id=without_id + ledger.refused + ledger.shared,
        source_table=key.source_table,
        mapping=key.mapping,
        sample_rate=float(sample.rate),
        rows_sampled=ledger.sampled_rows,
        rows_unaccounted=ledger.unaccounted,
        unaccounted_ids=list(ledger.examples),
        mean_score=figures["mean_score"],
        median_score=figures["median_score"],
        pass_rate=figures["pass_rate"],
        ci_low=figures["ci_low"],
        ci_high=figures["ci_high"],
        **_cascade_figures(ctx, results),
    )
    notes = []
    if ledger.unaccounted:
        notes.append(unaccounted_text(summary))
        log.error("partition %s: %s", partition_key, notes[-1])
    if ledger.refused:
        notes.append(ledger.refused_text())
        log.warning("partition %s: %s", partition_key, notes[-1])
    if ledger.shared:
        notes.append(ledger.shared_text())
        log.warning("partition %s: %s", partition_key, notes[-1])
    if notes:
        summary.error_message = "; ".join(notes)
    sent = _write_back(ctx, partition_key)
    if sent:
        summary.error_message = "; ".join([*([summary.error_message] if summary.error_message else []), *sent])
    write_run(ctx, summary)
    _mark_interrupted(ctx, summary)
    return summary


def _write_back(ctx: PipelineContext, partition_key: str) -> list[str]:
    """Send the partition's score rows not written back yet (failed before, or rows scored by an
    earlier run or another worker's chunk); a line for the run's notes. Never raises: the
    scores are in the warehouse, a failed write-back is sent again by the next run."""
    target = ctx.config.phoenix if ctx.config.write_back else None
    if target is None:
        return []
    from ..traces.writeback import write_back_partition

    try:
        result = write_back_partition(ctx.engine, ctx.tables, ctx.key, partition_key, target)
    except Exception as exc:  # the scores are in the warehouse: the next run sends them
        log.warning("partition %s: write-back to %s failed: %s", partition_key, target.name, redact(str(exc)))
        return [f"write-back to {target.name} failed ({type(exc).__name__}); the next run sends it again"]
    chunks = ctx.write_backs
    chunks.target = target.name
    chunks.add(result)
    return [chunks.summary()] if chunks.written or chunks.failed else []


def _mark_interrupted(ctx: PipelineContext, summary: RunSummary) -> None:
    """Earlier runs of this partition still marked ``running`` were killed (or are about to
    overwrite this mark with their own end): say so instead of leaving them ``running``."""
    assert summary.finished_at is not None
    message = (
        f"interrupted: this run recorded no end (its process was killed or died); run "
        f"{summary.run_id} finished the partition at {summary.finished_at:%Y-%m-%d %H:%M:%S} UTC"
    )
    started = summary.started_at or summary.finished_at
    # a concurrent run's own row update may conflict with this one (DuckDB): retried
    n = write_retrying(
        ctx.engine,
        lambda conn: mark_interrupted_runs(
            conn, ctx.tables, ctx.key, summary.partition_key, summary.run_id, started, message
        ),
    )
    if n:
        log.warning(
            "partition %s: %d earlier run(s) never recorded an end; marked interrupted", summary.partition_key, n
        )


def run_row(
    ctx: PipelineContext, partition_key: str, run_id: str, status: RunStatus, started_at: datetime | None = None
) -> RunSummary:
    """A ``ctxprec_runs`` row of this context's scoring key, before the run has figures."""
    return RunSummary(
        run_id=run_id,
        partition_key=partition_key,
        metric=ctx.key.metric,
        status=status,
        judge_model=ctx.key.judge_model,
        prompt_version=ctx.key.prompt_version,
        source_table=ctx.key.source_table,
        mapping=ctx.key.mapping,
        started_at=started_at,
        threshold=ctx.metric.threshold,
    )


def record_abort(ctx: PipelineContext, run: RunSummary, exc: BaseException) -> None:
    """Mark ``run`` failed by ``exc`` (one secret-free line: no SQL or row data) and write it;
    best effort, since the original error matters more."""
    run.status = RunStatus.FAILED.value
    run.finished_at = _now()
    run.error_message = redact(one_line(exc))[:4000]
    log.error("partition %s run %s aborted: %s", run.partition_key, run.run_id, run.error_message)
    try:
        write_run(ctx, run)
    except Exception:  # the original error matters more
        pass


def write_run(ctx: PipelineContext, summary: RunSummary) -> None:
    """Upsert ``summary`` as the run's ``ctxprec_runs`` row."""
    columns = ctx.tables.runs.c
    row = {k: v for k, v in asdict(summary).items() if k in columns}  # ``waiting`` is not a column
    # run again if it loses a conflict to a concurrent run's commit (DuckDB, fakesnow)
    write_retrying(ctx.engine, lambda conn: upsert(conn, ctx.tables.runs, [row]))
