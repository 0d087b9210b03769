"""Score a partition through the OpenAI Batch API (``judge_mode="batch"``).

Rounds: (1) the rows that need a judgment (not scored; nodes not in the judgment cache) become
one request line per judge call, ``custom_id`` = ``metric|log id|call index|prompt hash``; the
lines are split into files at the provider's limits, uploaded and submitted, and each batch is
recorded in ``ctxprec_batches`` as soon as it is created; (2) the open batches are polled with
backoff until they end; (3) their answers are collected through the ordinary chunk scoring path
(``AnsweredJudge``), which writes scores, failures and judgments with the usual upserts. Rows
whose lines got no answer (expired, cancelled, failed batch, error line) are recorded as
``judge_unavailable`` and submitted again in the next round, up to ``max_rounds``.

A re-run (or a restarted worker) finds the open batches of its partition and configuration and
resumes polling them: a submitted request is never paid for twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..errors import JudgeConfigurationError, one_line
from ..judge.cache import DictVerdictCache
from ..judge.calls import JudgeRun
from ..judge.limiter import AdaptiveLimiter
from ..judge.models.openai_judge import OpenAIJudge
from ..judge.pricing import batch_cost_of
from ..pipeline.config import PipelineConfig
from ..pipeline.context import PipelineContext, prepare
from ..pipeline.finalize import finalize_run, record_abort, run_row, write_run
from ..pipeline.intake import _intake
from ..pipeline.plan import plan_chunks
from ..pipeline.records import Chunk, ChunkResult, ProgressCallback, ProgressEvent, RunStatus, RunSummary
from ..pipeline.stream import score_chunk
from ..secrets import redact
from ..warehouse.engine import read_connection
from ..warehouse.source import parse_partition_key
from ..warehouse.store import load_judgments
from .api import (
    MAX_BYTES,
    MAX_REQUESTS,
    TERMINAL_STATUSES,
    BatchAnswer,
    BatchClient,
    parse_result_file,
    request_line,
    split_lines,
)
from .judges import AnsweredJudge, RecordingJudge
from .store import BatchRecord, batches_table, open_batches, partition_batches, record_batch, update_batch

__all__ = [
    "score_partition_batch",
    "batch_step",
    "BatchStep",
    "BatchOptions",
    "submit_round",
    "poll_batches",
    "collect_round",
    "batch_context",
]

log = logging.getLogger("ctxprec_ops.batch")


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class BatchOptions:
    """How batches are cut and waited for."""

    #: longest wait between two polls (seconds); polls start at ``first_poll`` and grow x1.5
    poll_seconds: float = 60.0
    first_poll: float = 1.0
    #: submit/collect rounds at most (a round re-queues what an expired batch did not answer)
    max_rounds: int = 3
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)


class _ReadOnlyCache:
    """The judgment cache as the submit step sees it: lookups only (placeholders are never stored)."""

    def __init__(self, inner: DictVerdictCache) -> None:
        self.inner = inner

    def get(self, key: bytes) -> Any:
        return self.inner.get(key)

    def put(self, key: bytes, verdict: Any) -> None:
        pass


@dataclass
class BatchContext:
    ctx: PipelineContext
    judge: OpenAIJudge
    client: BatchClient
    table: Any
    #: answers of the partition's finished batches, by prompt hash (loaded on first use)
    prior: dict[str, BatchAnswer] | None = None

    def prior_answers(self, partition_key: str) -> dict[str, BatchAnswer]:
        """What earlier batches of this partition and configuration already answered (paid for):
        a request they answered is never submitted again, e.g. the answered node group of a row
        whose other group expired."""
        if self.prior is None:
            self.prior = {}
            done = [
                r
                for r in partition_batches(self.ctx.engine, self.table, self.ctx.key, partition_key)
                if r.finished_at is not None and r.output_file_id
            ]
            for r in done:
                try:
                    text = self.client.client.files.content(r.output_file_id).text
                except Exception as exc:  # deleted or expired at the provider: ask again
                    log.info(
                        "output file of batch %s is gone (%s): its answers are not reused",
                        r.batch_id,
                        redact(str(exc))[:200],
                    )
                    continue
                for cid, a in parse_result_file(text).items():
                    if a.error is None:
                        self.prior[cid.rsplit("|", 1)[-1]] = a
        return self.prior


def batch_context(config: PipelineConfig, ctx: PipelineContext | None = None) -> BatchContext:
    ctx = ctx or prepare(config)
    judge = ctx.judge
    if not isinstance(judge, OpenAIJudge):
        what = f"{config.metric!r}, which calls no judge" if judge is None else repr(judge.get_model_name())
        raise JudgeConfigurationError(f"batch mode needs an OpenAI-compatible judge (a model name), not {what}")
    return BatchContext(ctx, judge, BatchClient(judge), batches_table(ctx.engine, config.output_schema))


# -- submit ----------------------------------------------------------------------------------
async def _record_prompts(ctx: PipelineContext, recorder: RecordingJudge, cases: list[Any]) -> None:
    with read_connection(ctx.engine) as conn:
        keys = [k for case in cases for k in ctx.metric.judgment_keys(case)]
        cache = DictVerdictCache(load_judgments(conn, ctx.tables, keys))
    metric = ctx.config.kind.build(ctx.config, recorder)
    run = JudgeRun(limiter=AdaptiveLimiter(1), cache=_ReadOnlyCache(cache), max_retries=0)
    for case in cases:
        recorder.start_case(str(case.id))
        await metric.score_case(case, run)


def build_requests(bctx: BatchContext, chunks: list[Chunk], run_id: str) -> list[dict[str, Any]]:
    """One request line per judge call the partition's unscored rows need (and no earlier batch
    of the partition answered)."""
    ctx = bctx.ctx
    recorder = RecordingJudge(bctx.judge)
    for chunk in chunks:
        intake = _intake(ctx, chunk, run_id)
        if intake.cases:
            asyncio.run(_record_prompts(ctx, recorder, intake.cases))
    if not recorder.prompts:
        return []
    prior = bctx.prior_answers(chunks[0].partition_key)
    metric = ctx.key.metric
    return [
        request_line(bctx.judge, f"{metric}|{p.case_id[:100]}|{p.index}|{h}", p.prompt, p.schema)
        for h, p in recorder.prompts.items()
        if h not in prior
    ]


def submit_round(
    bctx: BatchContext, partition_key: str, run_id: str, options: BatchOptions, chunks: list[Chunk] | None = None
) -> list[BatchRecord]:
    """Submit the partition's pending judge calls; each batch is recorded the moment it exists."""
    ctx = bctx.ctx
    chunks = chunks if chunks is not None else plan_chunks(ctx.config, partition_key, context=ctx)
    lines = build_requests(bctx, chunks, run_id)
    records: list[BatchRecord] = []
    for n, data in enumerate(split_lines(lines, options.max_requests, options.max_bytes)):
        count = data.count(b"\n")
        fid = bctx.client.upload(data, f"ctxprec-{partition_key}-{ctx.key.metric}-{n}.jsonl")
        batch = bctx.client.create(
            fid,
            {
                "partition_key": partition_key,
                "metric": ctx.key.metric,
                "judge_model": ctx.key.judge_model,
                "run_id": run_id,
            },
        )
        record = BatchRecord(
            batch_id=str(batch.id),
            partition_key=partition_key,
            metric=ctx.key.metric,
            judge_model=ctx.key.judge_model,
            prompt_version=ctx.key.prompt_version,
            status=str(batch.status),
            requests=count,
            input_file_id=fid,
            submitted_at=_now(),
            run_id=run_id,
        )
        record_batch(ctx.engine, bctx.table, record)  # before anything else can go wrong
        log.info("partition %s: submitted batch %s (%d requests)", partition_key, record.batch_id, count)
        records.append(record)
    return records


# -- poll ------------------------------------------------------------------------------------
def poll_once(bctx: BatchContext, records: list[BatchRecord]) -> dict[str, Any]:
    """Retrieve each batch once and record its status; returns the provider objects by id."""
    out = {}
    for r in records:
        batch = bctx.client.retrieve(r.batch_id)
        out[r.batch_id] = batch
        if str(batch.status) != r.status:
            r.status = str(batch.status)
            update_batch(bctx.ctx.engine, bctx.table, r.batch_id, status=r.status)
    return out


def poll_batches(
    bctx: BatchContext, records: list[BatchRecord], options: BatchOptions, progress: ProgressCallback | None = None
) -> dict[str, Any]:
    """Poll until every batch has ended (completed, expired, failed or cancelled)."""
    wait = min(options.first_poll, options.poll_seconds)
    started = time.monotonic()
    while True:
        batches = poll_once(bctx, records)
        if all(str(b.status) in TERMINAL_STATUSES for b in batches.values()):
            return batches
        done = sum(
            (b.request_counts.completed + b.request_counts.failed) if b.request_counts else 0 for b in batches.values()
        )
        total = sum(r.requests for r in records)
        states = ", ".join(f"{k}: {b.status}" for k, b in batches.items())
        log.info(
            "waiting for %d batch(es) (%s): %d of %d requests done after %.0f s",
            len(records),
            states,
            done,
            total,
            time.monotonic() - started,
        )
        if progress is not None and records:
            progress(ProgressEvent("batch_waiting", records[0].partition_key, done, total, states))
        options.sleep(wait)
        wait = min(options.poll_seconds, wait * 1.5)


# -- collect ---------------------------------------------------------------------------------
def _answers(
    bctx: BatchContext, records: list[BatchRecord], batches: dict[str, Any]
) -> tuple[dict[str, BatchAnswer], dict[str, str]]:
    answers: dict[str, BatchAnswer] = {}
    pending: dict[str, str] = {}
    for r in records:
        batch = batches[r.batch_id]
        got = bctx.client.answers(batch)
        by_hash = {cid.rsplit("|", 1)[-1]: a for cid, a in got.items()}
        answered = {h: a for h, a in by_hash.items() if a.error is None}
        answers.update(answered)
        # every request of the batch without an answer goes back to the queue
        for h, a in by_hash.items():
            if a.error is not None:
                pending[h] = f"batch {r.batch_id} ({batch.status}) did not answer: {a.error}; re-queued"
        r.output_file_id, r.error_file_id = batch.output_file_id, batch.error_file_id
        r.answered = len(answered)
        r.failed = r.requests - len(answered)
        pt = sum(a.prompt_tokens or 0 for a in answered.values())
        ct = sum(a.completion_tokens or 0 for a in answered.values())
        r.prompt_tokens, r.completion_tokens = pt, ct
        r.cost = batch_cost_of(r.judge_model, pt, ct)
        if str(batch.status) != "completed" and r.failed:
            log.warning(
                "batch %s ended %s: %d of %d requests answered; the rest is re-queued",
                r.batch_id,
                batch.status,
                r.answered,
                r.requests,
            )
    return answers, pending


def _missing_lines(
    bctx: BatchContext,
    records: list[BatchRecord],
    answers: dict[str, BatchAnswer],
    pending: dict[str, str],
    batches: dict[str, Any],
) -> None:
    """Lines of a failed batch appear in no file: every request not answered is pending too."""
    for r in records:
        if str(batches[r.batch_id].status) == "completed":
            continue
        data = bctx.client.client.files.content(r.input_file_id).text
        for raw in data.splitlines():
            if not raw.strip():
                continue
            h = str(json.loads(raw).get("custom_id", "")).rsplit("|", 1)[-1]
            if h not in answers and h not in pending:
                pending[h] = f"batch {r.batch_id} {batches[r.batch_id].status} before answering; re-queued"


def collect_round(
    bctx: BatchContext,
    partition_key: str,
    run_id: str,
    records: list[BatchRecord],
    batches: dict[str, Any],
    chunks: list[Chunk] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[list[ChunkResult], int]:
    """Write what the ended batches answered; returns the chunk results and the re-queued count."""
    ctx = bctx.ctx
    answers, pending = _answers(bctx, records, batches)
    _missing_lines(bctx, records, answers, pending, batches)
    prior = bctx.prior_answers(partition_key)  # the earlier batches (these are not finished yet)
    merged = {**prior, **answers}
    pending = {h: why for h, why in pending.items() if h not in merged}
    results, sync_calls = score_with_answers(ctx, partition_key, run_id, merged, pending, chunks, progress)
    now = _now()
    for r in records:
        update_batch(
            ctx.engine,
            bctx.table,
            r.batch_id,
            status=str(batches[r.batch_id].status),
            output_file_id=r.output_file_id,
            error_file_id=r.error_file_id,
            finished_at=now,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            cost=r.cost,
            answered=r.answered,
            failed=r.failed,
        )
    prior.update(answers)
    if sync_calls:
        log.info("partition %s: %d repair call(s) went out as sync calls", partition_key, sync_calls)
    return results, len(pending)


def score_with_answers(
    ctx: PipelineContext,
    partition_key: str,
    run_id: str,
    answers: dict[str, BatchAnswer],
    pending: dict[str, str],
    chunks: list[Chunk] | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[list[ChunkResult], int]:
    """Score every chunk through the sync path, the judge answering from ``answers``."""
    if ctx.judge is None:  # batch_context refuses such a context; this keeps the contract explicit
        raise JudgeConfigurationError(f"batch answers need a judge; metric {ctx.config.metric!r} calls none")
    judge = AnsweredJudge(ctx.judge, answers, pending)
    metric = ctx.config.kind.build(ctx.config, judge)
    answered_ctx = PipelineContext(ctx.config, ctx.engine, ctx.tables, ctx.source, metric, judge, ctx.key)
    chunks = chunks if chunks is not None else plan_chunks(ctx.config, partition_key, context=ctx)
    results = [score_chunk(ctx.config, c, run_id=run_id, context=answered_ctx, progress=progress) for c in chunks]
    return results, judge.sync_calls


class _Lazy(dict[str, BatchAnswer]):
    """Answers loaded on the first lookup (a complete partition's re-run never downloads them)."""

    def __init__(self, load: Callable[[], dict[str, BatchAnswer]]) -> None:
        super().__init__()
        self._load: Callable[[], dict[str, BatchAnswer]] | None = load

    def get(self, key: str, default: Any = None) -> Any:
        if self._load is not None:
            self.update(self._load())
            self._load = None
        return super().get(key, default)


# -- the whole partition, one step at a time ------------------------------------------------
@dataclass
class BatchStep:
    """Where a batch run stands: still ``waiting`` for batches (their ids), or ``summary`` (done).

    ``state`` is JSON-safe: an orchestrator that stops between steps (Airflow's deferral) passes
    it back to the next ``batch_step``."""

    waiting: list[str] = field(default_factory=list)
    summary: RunSummary | None = None
    state: dict[str, Any] = field(default_factory=dict)


def _finish(
    ctx: PipelineContext, config: PipelineConfig, partition_key: str, run_id: str, state: dict[str, Any]
) -> RunSummary:
    started = datetime.fromisoformat(state["started_at"]) if state.get("started_at") else None
    summary = finalize_run(config, partition_key, run_id=run_id, started_at=started, context=ctx)
    if state.get("notes"):
        summary.error_message = "batch mode: " + "; ".join(state["notes"])
        write_run(ctx, summary)
    return summary


def batch_step(
    config: PipelineConfig,
    partition_key: str,
    *,
    run_id: str,
    state: dict[str, Any] | None = None,
    options: BatchOptions | None = None,
    wait: bool = False,
    progress: ProgressCallback | None = None,
) -> BatchStep:
    """Advance a batch run: collect the open batches once they have ended, submit what is still
    to judge, finalize when nothing is. With ``wait`` it polls (blocking) until the run is done."""
    parse_partition_key(partition_key)
    options = options or BatchOptions(poll_seconds=config.batch_poll_seconds)
    state = dict(state or {})
    state.setdefault("round", 0)
    state.setdefault("notes", [])
    ctx = prepare(config)
    if not state.get("started_at"):
        started = _now()
        state["started_at"] = started.isoformat()
        write_run(ctx, run_row(ctx, partition_key, run_id, RunStatus.RUNNING, started_at=started))
    bctx = batch_context(config, ctx)
    try:
        chunks = plan_chunks(config, partition_key, context=ctx)
        while True:
            records = open_batches(ctx.engine, bctx.table, ctx.key, partition_key)
            if records:
                if wait:
                    batches = poll_batches(bctx, records, options, progress)
                else:
                    batches = poll_once(bctx, records)
                    if not all(str(b.status) in TERMINAL_STATUSES for b in batches.values()):
                        return BatchStep(waiting=[r.batch_id for r in records], state=state)
                _, requeued = collect_round(bctx, partition_key, run_id, records, batches, chunks)
                ended = sorted({str(b.status) for b in batches.values()} - {"completed"})
                if ended:
                    state["notes"].append(f"batch(es) {', '.join(ended)}: {requeued} request(s) re-queued")
                if requeued and state["round"] >= options.max_rounds:
                    return BatchStep(summary=_finish(ctx, config, partition_key, run_id, state), state=state)
            records = submit_round(bctx, partition_key, run_id, options, chunks)
            if records:
                state["round"] += 1
                if not wait:
                    return BatchStep(waiting=[r.batch_id for r in records], state=state)
                continue
            # nothing (more) to judge: write what needs no judge call (bad input, cached rows)
            score_with_answers(ctx, partition_key, run_id, _Lazy(lambda: bctx.prior_answers(partition_key)), {}, chunks)
            return BatchStep(summary=_finish(ctx, config, partition_key, run_id, state), state=state)
    finally:
        bctx.client.close()


def score_partition_batch(
    config: PipelineConfig,
    partition_key: str,
    *,
    run_id: str | None = None,
    progress: ProgressCallback | None = None,
    options: BatchOptions | None = None,
) -> RunSummary:
    """``score_partition`` in batch mode: submit (or resume), poll, collect, finalize."""
    run_id = run_id or uuid.uuid4().hex
    state: dict[str, Any] = {}
    try:
        step = batch_step(
            config, partition_key, run_id=run_id, state=state, options=options, wait=True, progress=progress
        )
    except BaseException as exc:
        _record_abort(config, partition_key, run_id, exc)
        raise
    assert step.summary is not None
    summary = step.summary
    log.info(
        "partition %s (batch mode): %s; %d scored, %d failed",
        partition_key,
        summary.status,
        summary.rows_scored,
        summary.rows_failed,
    )
    if progress is not None:
        progress(ProgressEvent("finished", partition_key, summary.rows_total, summary.rows_total, summary.status))
    return summary


def _record_abort(config: PipelineConfig, partition_key: str, run_id: str, exc: BaseException) -> None:
    try:
        ctx = prepare(config)
    except Exception:  # the original error matters more
        log.error("partition %s batch run %s aborted: %s", partition_key, run_id, redact(one_line(exc)))
        return
    record_abort(ctx, run_row(ctx, partition_key, run_id, RunStatus.FAILED), exc)
