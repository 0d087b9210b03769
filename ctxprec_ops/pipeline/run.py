"""``score_partition``: plan, score every chunk, finalize — the function every entry point calls.

One run path for every judge mode. A run scores the partition in passes of the same stream; the
transport (``transport.py``) decides how judge requests are answered. With the sync transport a
run is one pass. With a deferred one (the Batch API) the first pass writes what needs no new
judgment (bad input, cached rows, answers already back) and hands the rest to the transport; the
run waits for the provider (or, with ``wait=False``, returns a ``waiting`` run that is resumed
later with ``resume=``), takes the answers in and runs the next pass, until nothing is deferred.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Engine

from .._warm import warm_imports
from ..judge.budget import Budget
from ..warehouse.engine import check_reachable_from_a_thread, display_url
from ..warehouse.source import Partition
from .cascade import ensure_cascade
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .finalize import finalize_run, record_abort, run_row, write_run
from .plan import plan_chunks
from .records import (
    Chunk,
    ChunkResult,
    ProgressCallback,
    ProgressEvent,
    RunStatus,
    RunSummary,
    Waiting,
)
from .staging import stage_source
from .stream import score_chunks
from .transport import JudgeTransport, transport_for, transport_metric
from .workers import can_fork_out, score_in_processes

__all__ = ["score_partition"]

log = logging.getLogger("ctxprec_ops.pipeline")


def _now() -> datetime:
    return datetime.now(UTC)


def _score_chunks(
    ctx: PipelineContext,
    chunks: list[Chunk],
    run_id: str,
    progress: ProgressCallback | None,
    workers: int,
    transport: JudgeTransport,
) -> list[ChunkResult]:
    """Score the planned chunks: in worker processes when asked and possible, else here as one
    stream (one judging queue and one budget span them all; chunks another process has claimed
    are scored after the free ones, once released)."""
    config = ctx.config
    total = sum(c.rows for c in chunks)
    if workers > 1 and len(chunks) > 1 and transport.allows_workers and can_fork_out(config):
        return score_in_processes(config, chunks, run_id, workers, progress, total)
    budget = Budget(config.max_cost) if config.max_cost is not None else None
    return score_chunks(ctx, chunks, run_id=run_id, budget=budget, progress=progress, total=total)


def _start_run(ctx: PipelineContext, partition_key: str, run_id: str, transport: JudgeTransport) -> RunSummary:
    """Write the run's ``running`` row (replaced when the run ends) and log what it scores."""
    base = run_row(ctx, partition_key, run_id, RunStatus.RUNNING, started_at=_now())
    write_run(ctx, base)
    log.info(
        "scoring %s partition %s of %s in %s (judge %s, prompt %s, %s mode, run %s)",
        ctx.key.metric,
        partition_key,
        ctx.source.name,
        display_url(ctx.engine),
        ctx.key.judge_model,
        ctx.key.prompt_version,
        transport.name,
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
        bad = summary.input_problems
        done = summary.completed and bad
        note = f"done, {bad} bad input row(s) recorded" if done else summary.status
        if summary.rows_unaccounted:
            note += f", {summary.rows_unaccounted} row(s) unaccounted for"
        progress(ProgressEvent("finished", summary.partition_key, summary.rows_total, summary.rows_total, note))


def _warming(progress: ProgressCallback | None) -> ProgressCallback:
    """``progress``, which also starts importing finalize's numpy and ``scipy.special`` (~0.3 s, else
    paid after the last chunk) in a thread once the first chunk is written: the judging is under
    way then, its event loop mostly waiting on the network. Started with the run, the imports
    would compete for the GIL with its start-up and delay the first judge request as much."""
    started = False

    def on(ev: ProgressEvent) -> None:
        nonlocal started
        if not started and ev.kind == "chunk_done":
            started = True
            warm_imports("numpy", "scipy.special")
        if progress is not None:
            progress(ev)

    return on


def _spend(results: list[ChunkResult], carried: dict[str, Any] | None) -> list[ChunkResult]:
    """This invocation's chunk results plus what earlier invocations of the same run spent (a run
    resumed after waiting in another process), as one result list for ``finalize_run``."""
    if not carried:
        return results
    return [*results, ChunkResult.from_dict(carried)]


def _carry(results: list[ChunkResult], partition_key: str) -> dict[str, Any]:
    """The spend of ``results`` as one JSON-safe chunk result (carried across a wait)."""
    total = ChunkResult(partition_key, -1)
    for r in results:
        total.prompt_tokens += r.prompt_tokens
        total.completion_tokens += r.completion_tokens
        total.judge_calls += r.judge_calls
        total.cost = None if total.cost is None or r.cost is None else total.cost + r.cost
        total.nodes_judged += r.nodes_judged
        total.nodes_escalated += r.nodes_escalated
        total.cheap_cost = None if total.cheap_cost is None or r.cheap_cost is None else total.cheap_cost + r.cheap_cost
        total.strong_cost = (
            None if total.strong_cost is None or r.strong_cost is None else total.strong_cost + r.strong_cost
        )
    return total.to_dict()


def _waiting(
    ctx: PipelineContext,
    base: RunSummary,
    transport: JudgeTransport,
    ids: list[str],
    results: list[ChunkResult],
) -> RunSummary:
    """Return before the transport's work has ended: the run row says ``waiting``."""
    resume = {
        "started_at": base.started_at.isoformat() if base.started_at else None,
        "spend": _carry(results, base.partition_key),
        "transport": transport.state(),
    }
    summary = replace(base, status=RunStatus.WAITING.value)
    summary.error_message = "; ".join(transport.notes()) or None
    write_run(ctx, summary)
    summary.waiting = Waiting(transport.name, list(ids), transport.poll_seconds(), resume)
    log.info("partition %s: waiting for %d %s job(s): %s", base.partition_key, len(ids), transport.name, ", ".join(ids))
    return summary


def _passes(
    ctx: PipelineContext,
    partition: Partition,
    run_id: str,
    base: RunSummary,
    transport: JudgeTransport,
    progress: ProgressCallback | None,
    workers: int,
    wait: bool,
    carried: dict[str, Any] | None = None,
) -> tuple[list[ChunkResult], RunSummary | None]:
    """Score the partition pass after pass until the transport defers nothing more; returns the
    chunk results, or a ``waiting`` run when ``wait`` is False and the transport's work runs on
    (``carried``: what the run's earlier invocations spent)."""
    chunks = plan_chunks(ctx.config, partition, context=ctx)
    total = sum(c.rows for c in chunks)
    log.info("partition %s: %d rows in %d chunks of up to %d", partition, total, len(chunks), ctx.config.rows_per_chunk)
    if progress is not None:
        progress(ProgressEvent("planned", partition.key, 0, total, f"{total} rows in {len(chunks)} chunks"))
    results: list[ChunkResult] = []
    while True:
        ids = transport.pending()
        if ids:
            if not wait:
                # what earlier invocations of the run spent travels on with this one's (a run
                # can wait several times: a cascade's escalation batch follows the cheap one's)
                return results, _waiting(ctx, base, transport, ids, _spend(results, carried))
            transport.wait(progress)
        transport.collect()
        results += _score_chunks(ctx, chunks, run_id, progress, workers, transport)
        transport.settle()
        if not transport.flush(progress):
            return results, None


def score_partition(
    config: PipelineConfig,
    partition_key: str | Partition,
    *,
    run_id: str | None = None,
    progress: ProgressCallback | None = None,
    workers: int = 1,
    wait: bool = True,
    resume: dict[str, Any] | None = None,
    transport: JudgeTransport | None = None,
) -> RunSummary:
    """Score one partition (its key ``YYYY-MM-DD``, or a ``Partition``): plan, score every
    chunk, finalize. Returns the run row.

    Idempotent and resumable: rows already scored are skipped, failures of rows that now score
    are removed. With ``config.max_cost`` one budget spans all chunks. An exception aborts the
    run, records it as ``failed`` in ``ctxprec_runs`` (with a secret-free message) and is
    re-raised; chunks written before it stay written.

    ``config.judge_mode`` picks the transport (``transport`` overrides it with an instance). With
    a deferred transport and ``wait=False``, a run whose judge requests are still with the
    provider returns at once with status ``waiting`` and ``summary.waiting`` (the ids to poll and
    the ``resume`` state); call again with the same ``run_id`` and ``resume=summary.waiting.resume``
    once they have ended (Airflow's deferrable operator does).

    ``workers > 1`` scores chunks in that many worker processes (spawned, so safe inside
    threaded hosts) for CPU-bound judges on a multi-core machine; it needs a picklable config
    with a URL (not an ``Engine``) and no ``max_cost`` (a budget cannot span processes),
    otherwise chunks are scored in this process, in order.
    """
    partition = Partition.of(partition_key)  # parsed once, here: passed on as it is
    partition_key = partition.key
    if isinstance(config.warehouse, Engine):  # the caller's (one built from a URL shares a connection)
        check_reachable_from_a_thread(config.warehouse)
    run_id = run_id or uuid.uuid4().hex
    transport = transport or transport_for(config.judge_mode)
    stage_source(config, partition)  # a source outside the warehouse (Phoenix): staged first
    ctx = prepare(config)
    resume = dict(resume or {})
    if resume.get("started_at"):
        started = datetime.fromisoformat(resume["started_at"])
        base = run_row(ctx, partition_key, run_id, RunStatus.RUNNING, started_at=started)
        write_run(ctx, base)
    else:
        base = _start_run(ctx, partition_key, run_id, transport)
    try:
        transport.open(ctx, partition_key, run_id, resume.get("transport"))
        # a cascade's threshold: reused, or chosen on a sample of the partition (once per run, with
        # ordinary calls to the real judges whatever the transport)
        ready = ensure_cascade(ctx, partition, recalibrate=config.recalibrate and not resume, run_id=run_id)
        if ready is not None and progress is not None:
            progress(ProgressEvent("cascade", partition_key, 0, None, ready.note))
        judge = transport.judge()
        if judge is not ctx.judge:  # the transport answers the calls: the metric calls it
            ctx = replace(ctx, judge=judge, metric=transport_metric(config, judge, transport, ctx.metric))
        carried = resume.get("spend")
        if ready is not None and ready.spend is not None:  # calibrating is part of the run's spend,
            carried = _carry(_spend([ready.spend], carried), partition_key)  # carried across a wait too
        results, waiting = _passes(ctx, partition, run_id, base, transport, _warming(progress), workers, wait, carried)
        if waiting is not None:
            return waiting
        summary = finalize_run(
            config,
            partition,
            run_id=run_id,
            chunk_results=_spend(results, carried),
            started_at=base.started_at,
            context=ctx,
        )
        notes = transport.notes() + ctx.rows.notes()
        if ready is not None and ready.calibrated:
            notes.append(ready.note)
        cause = next((r.error_message for r in results if r.error_message), None)
        if cause and not summary.completed:
            notes.append(cause)  # e.g. "judge unreachable: connection refused at URL"
        if notes:
            summary.error_message = "; ".join([*notes, *([summary.error_message] if summary.error_message else [])])
            write_run(ctx, summary)
    except BaseException as exc:
        record_abort(ctx, base, exc)
        raise
    finally:
        transport.close()
    _report_end(summary, progress)
    return summary
