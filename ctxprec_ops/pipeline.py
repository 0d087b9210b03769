"""The partition-scoring function that the CLI, the Airflow operator and the Dagster asset call.

``score_partition`` = ``plan_chunks`` + ``score_chunk`` for every chunk + ``finalize_run``.
Each step can run on its own (Airflow maps ``score_chunk`` over the planned chunks):

- ``plan_chunks`` streams the partition's ids (never the rows) and cuts keyset boundaries;
- ``score_chunk`` reads one chunk, validates rows, skips rows already scored for this
  (metric, judge model, prompt version), judges the rest through ``evaluate`` with the judgment
  cache preloaded, and writes scores, failures and new cache entries in one transaction;
- ``finalize_run`` computes the partition's figures from ``ctxprec_scores``/``ctxprec_failures``
  and upserts the ``ctxprec_runs`` row.

Row accounting (chunks and runs): ``rows_total = rows_scored + rows_failed``.
``rows_scored`` counts rows that have a score after the run, however it was obtained;
``rows_cached`` is the part of ``rows_scored`` that cost no judge call in this run: rows already
scored by an earlier run (skipped, not re-judged) plus rows whose every node verdict came from the
judgment cache. ``rows_failed`` counts rows in ``ctxprec_failures`` (bad input, judge failures after
retries, budget exhausted). Re-running a partition is idempotent and only judges what is missing.
"""

from __future__ import annotations

import logging
import time as _time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Literal

from sqlalchemy.engine import Engine

from .breaker import BreakerEvent, CircuitBreaker
from .budget import Budget
from .cache import DictVerdictCache
from .errors import BudgetExhaustedError, InvalidTestCaseError, NotScorableError
from .judges.base import JudgeModel
from .judging import JudgeGuards, use_guards
from .limiter import RequestQuota
from .run_figures import run_figures
from .secrets import redact, register_secret
from .warehouse.engine import display_url, get_engine, read_connection, write_transaction
from .warehouse.identifiers import split_table_name, validate_identifier
from .warehouse.rows import row_to_conversation, row_to_test_case
from .warehouse.schema import OutputTables, ensure_output_tables
from .warehouse.source import (
    SourceTable,
    count_null_ids,
    iter_partition_ids,
    parse_partition_key,
    read_chunk_rows,
    reflect_source,
)
from .warehouse.store import (
    ScoringKey,
    failure_counts,
    load_judgments,
    partition_counts,
    partition_scores,
    mark_interrupted_runs,
    run_spend,
    scored_ids,
    write_chunk,
)
from .warehouse.upsert import upsert

__all__ = [
    "MetricName",
    "SourceColumns",
    "ConversationColumns",
    "PipelineConfig",
    "PipelineContext",
    "Chunk",
    "ChunkResult",
    "RunSummary",
    "ProgressEvent",
    "ProgressCallback",
    "prepare",
    "plan_chunks",
    "score_chunk",
    "finalize_run",
    "score_partition",
    "INPUT_PROBLEMS",
]

log = logging.getLogger("ctxprec_ops.pipeline")

MetricName = Literal["contextual_precision", "turn_contextual_precision"]
_METRICS = ("contextual_precision", "turn_contextual_precision")
DEFAULT_TABLES = {"contextual_precision": "retrieval_logs", "turn_contextual_precision": "conversation_logs"}

#: failure types that are problems of the data, not of the run: a partition whose only failures
#: are of these types counts as completed (``RunSummary.completed``)
INPUT_PROBLEMS = frozenset({InvalidTestCaseError.error_type, NotScorableError.error_type})


@dataclass(frozen=True)
class SourceColumns:
    """Column names of the retrieval-log table (validated identifiers)."""

    id: str = "id"
    event_time: str = "event_time"
    input: str = "input"
    actual_output: str = "actual_output"
    expected_output: str = "expected_output"
    retrieval_context: str = "retrieval_context"

    def __post_init__(self) -> None:
        for f in fields(self):
            validate_identifier(getattr(self, f.name), f"column name for {f.name!r}")


@dataclass(frozen=True)
class ConversationColumns:
    """Column names of the conversation-log table (validated identifiers)."""

    id: str = "id"
    event_time: str = "event_time"
    turns: str = "turns"
    expected_outcome: str = "expected_outcome"

    def __post_init__(self) -> None:
        for f in fields(self):
            validate_identifier(getattr(self, f.name), f"column name for {f.name!r}")


@dataclass
class PipelineConfig:
    """What to score, where, and with which judge. ``from_settings`` fills it from the env.

    Table, schema and column names are validated as identifiers on construction
    (``IdentifierError``); ``source_table`` may be ``schema.table``.
    """

    warehouse: str | Engine = "sqlite:///ctxprec.db"
    metric: MetricName = "contextual_precision"
    judge: str | JudgeModel = "lexical"
    judge_base_url: str | None = None
    judge_api_key: str | None = field(default=None, repr=False)
    judge_timeout: float = 60.0
    source_table: str | None = None  # default per metric: retrieval_logs / conversation_logs
    source_schema: str | None = None
    columns: SourceColumns | ConversationColumns | None = None
    threshold: float = 0.5
    strict_mode: bool = False
    chunk_size: int = 500
    concurrency: int = 16
    max_cost: float | None = None
    max_nodes_per_call: int = 20
    window_size: int = 10
    max_retries: int = 6
    #: schema of the ctxprec_* output tables (default: the connection's default schema)
    output_schema: str | None = None
    #: seconds a judge outage may last before the run gives up (default CTXPREC_OUTAGE_TOLERANCE or 600)
    outage_tolerance: float | None = None
    #: provider quota, kept before each request: requests / tokens per minute (None: no cap)
    max_rpm: float | None = None
    max_tpm: float | None = None

    def __post_init__(self) -> None:
        if self.metric not in _METRICS:
            raise ValueError(f"metric must be one of {', '.join(_METRICS)}, got {self.metric!r}")
        if self.source_table is not None:
            split_table_name(self.source_table, self.source_schema, "source table name")
        elif self.source_schema is not None:
            validate_identifier(self.source_schema, "source schema name")
        if self.output_schema is not None:
            validate_identifier(self.output_schema, "output schema name")
        want = ConversationColumns if self.is_conversation else SourceColumns
        if self.columns is not None and not isinstance(self.columns, want):
            raise TypeError(f"columns for metric {self.metric!r} must be a {want.__name__}")
        if not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {self.chunk_size!r}")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency must be a positive integer, got {self.concurrency!r}")
        if isinstance(self.threshold, bool) or not 0.0 <= float(self.threshold) <= 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {self.threshold!r}")
        if self.max_cost is not None and self.max_cost < 0:
            raise ValueError(f"max_cost must be >= 0, got {self.max_cost!r}")
        if self.outage_tolerance is not None and not self.outage_tolerance >= 0:
            raise ValueError(f"outage_tolerance must be >= 0 seconds, got {self.outage_tolerance!r}")
        for name in ("max_rpm", "max_tpm"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        register_secret(self.judge_api_key)

    @property
    def is_conversation(self) -> bool:
        return self.metric == "turn_contextual_precision"

    @property
    def table_name(self) -> str:
        return self.source_table or DEFAULT_TABLES[self.metric]

    @property
    def source_columns(self) -> SourceColumns | ConversationColumns:
        if self.columns is not None:
            return self.columns
        return ConversationColumns() if self.is_conversation else SourceColumns()

    @classmethod
    def from_settings(cls, settings: Any = None, **overrides: Any) -> "PipelineConfig":
        """A config from ``config.Settings`` (default: ``Settings.from_env()``).

        ``overrides`` are PipelineConfig fields; ``None`` values mean "not given" (CLI flags).
        The source table defaults to the settings' conversation table for the turn metric.
        """
        from .config import Settings

        s = settings if settings is not None else Settings.from_env()
        given = {k: v for k, v in overrides.items() if v is not None}
        known = {f.name for f in fields(cls)}
        unknown = set(given) - known
        if unknown:
            raise TypeError(f"unknown pipeline settings: {', '.join(sorted(unknown))}")
        metric = given.get("metric", "contextual_precision")
        base: dict[str, Any] = {
            "warehouse": s.warehouse_url,
            "judge": s.judge,
            "metric": metric,
            "source_table": s.conversation_table if metric == "turn_contextual_precision" else s.source_table,
            "threshold": s.threshold,
            "concurrency": s.concurrency,
            "chunk_size": s.chunk_size,
            "outage_tolerance": getattr(s, "outage_tolerance", None),
            "max_rpm": getattr(s, "max_rpm", None),
            "max_tpm": getattr(s, "max_tpm", None),
        }
        base.update(given)
        return cls(**base)


@dataclass(frozen=True)
class Chunk:
    """One keyset slice of a partition: ids in (after_id, upto_id], in id order."""

    partition_key: str
    index: int
    after_id: Any | None
    upto_id: Any
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Chunk":
        return cls(**d)


@dataclass
class ChunkResult:
    partition_key: str
    index: int
    rows_total: int = 0
    rows_scored: int = 0
    rows_cached: int = 0
    rows_failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    judge_calls: int = 0
    #: ``{error_type: rows}`` of this chunk's failures
    failures_by_type: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ChunkResult":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class RunSummary:
    """The ``ctxprec_runs`` row of one partition run (JSON-safe via ``to_dict``).

    ``status``: ``succeeded`` (no failure records), ``partial`` (some rows in failures),
    ``budget_exhausted`` (some rows could not be afforded under ``max_cost``), ``failed`` (rows
    exist but none could be scored because of judge errors, or the run aborted), ``running``
    (written when a run starts; replaced when it ends), ``interrupted`` (a ``running`` row that a
    later run of the same partition and configuration found when it finished: the process was
    killed before it could record its end; ``finished_at`` stays NULL).
    """

    run_id: str
    partition_key: str
    metric: str
    status: str
    rows_total: int = 0
    rows_scored: int = 0
    rows_cached: int = 0
    rows_failed: int = 0
    mean_score: float | None = None
    median_score: float | None = None
    pass_rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    judge_model: str | None = None
    prompt_version: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    threshold: float | None = None
    judge_calls: int = 0
    failures_by_type: dict[str, int] = field(default_factory=dict)
    error_message: str | None = None

    @property
    def completed(self) -> bool:
        """The partition is done: every row is scored, or failed only for bad input (a
        scheduler's "exit 0"). Judge or budget failures leave it incomplete (retry later)."""
        if self.status == "succeeded":
            return True
        if self.status != "partial":
            return False
        return all(t in INPUT_PROBLEMS for t in self.failures_by_type)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("started_at", "finished_at"):
            if d[k] is not None:
                d[k] = d[k].isoformat()
        return d


@dataclass(frozen=True)
class ProgressEvent:
    #: ``judge_outage``: the circuit breaker paused, probed, resumed or gave up (``message`` says
    #: which, why and for how long)
    kind: Literal["planned", "chunk_started", "rows_done", "chunk_done", "finished", "judge_outage"]
    partition_key: str
    done: int = 0
    total: int | None = None
    message: str = ""


ProgressCallback = Callable[[ProgressEvent], None]


# -- resolved resources ---------------------------------------------------------------------


@dataclass
class PipelineContext:
    """What a config resolves to (engine, tables, judge, metric); build once with ``prepare``
    and pass to ``plan_chunks``/``score_chunk``/``finalize_run`` to avoid re-resolving."""

    config: PipelineConfig
    engine: Engine
    tables: OutputTables
    source: SourceTable
    metric: Any
    judge: JudgeModel
    key: ScoringKey
    #: circuit breaker and quota shared by every chunk scored with this context
    guards: JudgeGuards = field(default_factory=JudgeGuards)

    @property
    def judge_is_offline(self) -> bool:
        return bool(getattr(self.judge, "offline", False))


def _make_metric(config: PipelineConfig, judge: JudgeModel) -> Any:
    common = dict(
        threshold=config.threshold,
        model=judge,
        strict_mode=config.strict_mode,
        max_nodes_per_call=config.max_nodes_per_call,
        max_retries=config.max_retries,
    )
    if config.is_conversation:
        from .metrics.turn_contextual_precision import TurnContextualPrecisionMetric

        return TurnContextualPrecisionMetric(window_size=config.window_size, **common)
    from .metrics.contextual_precision import ContextualPrecisionMetric

    return ContextualPrecisionMetric(**common)


def prepare(config: PipelineConfig) -> PipelineContext:
    """Resolve the config: engine, output tables (created if missing), source table
    (reflected and checked), judge and metric."""
    from .judges import make_judge

    engine = get_engine(config.warehouse)
    tables = ensure_output_tables(engine, config.output_schema)
    source = reflect_source(engine, config.table_name, config.source_schema, asdict(config.source_columns))
    judge = make_judge(
        config.judge, base_url=config.judge_base_url, api_key=config.judge_api_key, timeout=config.judge_timeout
    )
    metric = _make_metric(config, judge)
    key = ScoringKey(metric.metric_name, metric.evaluation_model, metric.prompt_version)
    guards = JudgeGuards(breaker=CircuitBreaker(config.outage_tolerance, endpoint=getattr(judge, "endpoint", None)),
                         quota=RequestQuota.from_env(config.max_rpm, config.max_tpm))
    return PipelineContext(config, engine, tables, source, metric, judge, key, guards)


def _now() -> datetime:
    return datetime.now(timezone.utc)


# -- plan -----------------------------------------------------------------------------------


def plan_chunks(config: PipelineConfig, partition_key: str, *, context: PipelineContext | None = None) -> list[Chunk]:
    """Cut the partition into chunks of ``config.chunk_size`` rows by keyset on ``id``.

    Streams ids only (memory: the boundaries, not the rows). A chunk is ``(after_id, upto_id]``;
    rows added to the partition later inside a chunk's range are scored with that chunk.
    """
    parse_partition_key(partition_key)
    ctx = context or prepare(config)
    size = config.chunk_size
    chunks: list[Chunk] = []
    after: Any = None
    last: Any = None
    n = 0
    with read_connection(ctx.engine) as conn:
        for value in iter_partition_ids(conn, ctx.source, partition_key):
            n += 1
            last = value
            if n == size:
                chunks.append(Chunk(partition_key, len(chunks), after, last, n))
                after, n = last, 0
        nulls = count_null_ids(conn, ctx.source, partition_key)
    if nulls:  # no log_id to record them under: say so rather than drop them silently
        log.warning("partition %s of %s: %d row(s) have a NULL %s and cannot be scored or recorded as "
                    "failures; give them ids", partition_key, ctx.source.name, nulls, ctx.source.id.name)
    if n:
        chunks.append(Chunk(partition_key, len(chunks), after, last, n))
    return chunks


# -- score one chunk ------------------------------------------------------------------------


class _Throttle:
    """Forward ``rows_done`` progress at most every ``interval`` seconds (and at the end)."""

    def __init__(self, progress: ProgressCallback | None, partition_key: str, base: int, total: int,
                 interval: float = 0.25) -> None:
        self.progress, self.pk, self.base, self.total, self.interval = progress, partition_key, base, total, interval
        self.last = 0.0

    def __call__(self, done: int, _total: int) -> None:
        if self.progress is None:
            return
        now = _time.monotonic()
        if done >= _total or now - self.last >= self.interval:
            self.last = now
            self.progress(ProgressEvent("rows_done", self.pk, self.base + done, self.total))


@contextmanager
def _breaker_progress(breaker: CircuitBreaker | None, progress: ProgressCallback | None,
                      partition_key: str) -> Iterator[None]:
    """Forward the breaker's state changes (paused, probing, resumed, gave up) as
    ``judge_outage`` progress events while a chunk is judged."""
    if breaker is None or progress is None:
        yield
        return

    def forward(ev: BreakerEvent) -> None:
        progress(ProgressEvent("judge_outage", partition_key, 0, None, ev.message))

    breaker.listeners.append(forward)
    try:
        yield
    finally:
        breaker.listeners.remove(forward)


def _remaining_budget(ctx: PipelineContext, run_id: str) -> Budget | None:
    """``max_cost`` minus what this run already spent (chunks scored on other workers)."""
    if ctx.config.max_cost is None:
        return None
    with read_connection(ctx.engine) as conn:
        spent = run_spend(conn, ctx.tables, ctx.key, run_id)["cost"] or 0.0
    return Budget(max(0.0, ctx.config.max_cost - spent))


def score_chunk(
    config: PipelineConfig,
    chunk: Chunk,
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
    if isinstance(chunk, dict):
        chunk = Chunk.from_dict(chunk)
    parse_partition_key(chunk.partition_key)
    started = _time.perf_counter()
    ctx = context or prepare(config)
    key, pk = ctx.key, chunk.partition_key
    if progress is not None:
        progress(ProgressEvent("chunk_started", pk, 0, chunk.rows, f"chunk {chunk.index}"))

    with read_connection(ctx.engine) as conn:
        rows = read_chunk_rows(conn, ctx.source, pk, chunk.after_id, chunk.upto_id)
        done_ids = scored_ids(conn, ctx.tables, key, [str(r["id"]) for r in rows])

    now = _now()
    failures: list[dict[str, Any]] = []
    cases: list[Any] = []
    to_case = row_to_conversation if config.is_conversation else row_to_test_case
    id_counts = Counter(str(r["id"]) for r in rows)
    for log_id, n in id_counts.items():
        if n > 1 and log_id not in done_ids:
            # which of the rows is the real one is unknowable: score none, say why (once per id)
            msg = (f"column 'id' value {log_id[:100]!r} is not unique: {n} rows of partition {pk} share it; "
                   "none of them is scored until the duplicates are removed")
            failures.append(_failure(log_id, pk, key, InvalidTestCaseError.error_type, msg, 0, run_id, now,
                                     chunk.index))
    for row in rows:
        log_id = str(row["id"])
        if log_id in done_ids or id_counts[log_id] > 1:
            continue
        try:
            cases.append(to_case(row))
        except InvalidTestCaseError as exc:
            failures.append(_failure(log_id, pk, key, exc.error_type, redact(str(exc)), 0, run_id, now, chunk.index))

    result = ChunkResult(pk, chunk.index, rows_total=len(rows))
    cache: DictVerdictCache | None = None
    scores: list[dict[str, Any]] = []
    if cases:
        if not ctx.judge_is_offline:
            # offline judges are free and instant: nothing worth caching
            with read_connection(ctx.engine) as conn:
                keys = [k for case in cases for k in ctx.metric.judgment_keys(case)]
                cache = DictVerdictCache(load_judgments(conn, ctx.tables, keys))
        if budget is None:
            budget = _remaining_budget(ctx, run_id)
        from .evaluate import evaluate

        base = len(rows) - len(cases)
        with use_guards(ctx.guards), _breaker_progress(ctx.guards.breaker, progress, pk):
            evaluation = evaluate(
                cases,
                [ctx.metric],
                concurrency=config.concurrency,
                max_retries=config.max_retries,
                show_progress=False,
                cache=cache,
                budget=budget,
                progress_callback=_Throttle(progress, pk, base, len(rows)),
            )
        scored_at = _now()
        for case, r in zip(cases, evaluation.results):
            log_id = str(case.id)
            result.judge_calls += r.judge_calls
            result.prompt_tokens += r.prompt_tokens or 0
            result.completion_tokens += r.completion_tokens or 0
            if result.cost is not None:
                result.cost = None if r.cost is None else result.cost + r.cost
            if r.error is not None or r.score is None:
                failures.append(_failure(log_id, pk, key, r.error_type or "error", r.error or "scoring failed",
                                         r.attempts, run_id, scored_at, chunk.index))
                continue
            if r.judge_calls == 0 and r.cached_nodes > 0:
                result.rows_cached += 1
            scores.append({
                "log_id": log_id,
                "partition_key": pk,
                "metric": r.metric,
                "score": float(r.score),
                "success": bool(r.success),
                "threshold": float(r.threshold),
                "verdicts": [{"node": v.node, "relevant": v.relevant, "reason": v.reason} for v in r.verdicts],
                "reason": r.reason,
                "judge_model": r.judge_model or key.judge_model,
                "prompt_version": r.prompt_version or key.prompt_version,
                "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens,
                "cost": r.cost,
                "run_id": run_id,
                "scored_at": scored_at,
                "judge_calls": r.judge_calls,
                "cached_nodes": r.cached_nodes,
                "chunk_index": chunk.index,
            })

    judgments = []
    if cache is not None and cache.added:
        judgments = [
            {"key": k, "judge_model": key.judge_model, "prompt_version": key.prompt_version,
             "relevant": bool(v.relevant), "reason": v.reason, "created_at": now}
            for k, v in cache.added.items()
        ]
    with write_transaction(ctx.engine) as conn:
        write_chunk(conn, ctx.tables, key, log_ids=[str(r["id"]) for r in rows],
                    scores=scores, failures=failures, judgments=judgments)

    result.rows_scored = len(done_ids) + len(scores)
    result.rows_cached += len(done_ids)
    result.rows_failed = len(failures)
    for f in failures:
        result.failures_by_type[f["error_type"]] = result.failures_by_type.get(f["error_type"], 0) + 1
    result.seconds = _time.perf_counter() - started
    if progress is not None:
        progress(ProgressEvent("chunk_done", pk, len(rows), len(rows),
                               f"chunk {chunk.index}: {result.rows_scored} scored, {result.rows_failed} failed"))
    return result


def _failure(log_id: str, pk: str, key: ScoringKey, error_type: str, message: str, attempts: int,
             run_id: str, at: datetime, chunk_index: int) -> dict[str, Any]:
    return {
        "log_id": log_id,
        "partition_key": pk,
        "metric": key.metric,
        "judge_model": key.judge_model,
        "prompt_version": key.prompt_version,
        "error_type": error_type,
        "error_message": message[:4000],
        "attempts": int(attempts or 0),
        "run_id": run_id,
        "failed_at": at,
        "chunk_index": chunk_index,
    }


# -- finalize -------------------------------------------------------------------------------


def _status(scored: int, failed_by_type: dict[str, int]) -> str:
    if not failed_by_type:
        return "succeeded"
    if BudgetExhaustedError.error_type in failed_by_type:
        return "budget_exhausted"
    if scored == 0 and any(t not in INPUT_PROBLEMS for t in failed_by_type):
        return "failed"
    return "partial"


def finalize_run(
    config: PipelineConfig,
    partition_key: str,
    *,
    run_id: str,
    chunk_results: list[ChunkResult] | None = None,
    started_at: datetime | None = None,
    context: PipelineContext | None = None,
) -> RunSummary:
    """Compute the partition's figures and upsert its ``ctxprec_runs`` row.

    Counts and score figures come from the tables (so a partition scored in mapped chunks, or
    resumed after a crash, is summarised as a whole). Tokens, cost and judge calls come from
    ``chunk_results`` when given (they include spend on rows that failed), else from the scores
    this ``run_id`` wrote.
    """
    parse_partition_key(partition_key)
    ctx = context or prepare(config)
    key = ctx.key
    chunk_results = [ChunkResult.from_dict(c) if isinstance(c, dict) else c for c in (chunk_results or [])]
    # one snapshot: the counts and the streamed scores must describe the same rows
    with read_connection(ctx.engine, snapshot=True) as conn:
        counts = partition_counts(conn, ctx.tables, key, partition_key, run_id)
        failed = failure_counts(conn, ctx.tables, key, partition_key)
        figures = run_figures(partition_scores(conn, ctx.tables, key, partition_key), counts["scored"],
                              counts["passed"])
        spend = run_spend(conn, ctx.tables, key, run_id, partition_key) if not chunk_results else None
    if chunk_results:
        costs = [c.cost for c in chunk_results]
        spend = {
            "prompt_tokens": sum(c.prompt_tokens for c in chunk_results),
            "completion_tokens": sum(c.completion_tokens for c in chunk_results),
            "cost": None if any(c is None for c in costs) else float(sum(costs)),  # type: ignore[arg-type]
            "judge_calls": sum(c.judge_calls for c in chunk_results),
        }
    assert spend is not None
    rows_failed = sum(failed.values())
    summary = RunSummary(
        run_id=run_id,
        partition_key=partition_key,
        metric=key.metric,
        status=_status(counts["scored"], failed),
        rows_total=counts["scored"] + rows_failed,
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
        **figures,
    )
    _write_run(ctx, summary)
    _mark_interrupted(ctx, summary)
    return summary


def _mark_interrupted(ctx: PipelineContext, summary: RunSummary) -> None:
    """Earlier runs of this partition still marked ``running`` were killed (or are about to
    overwrite this mark with their own end): say so instead of leaving them ``running``."""
    message = (f"interrupted: this run recorded no end (its process was killed or died); run "
               f"{summary.run_id} finished the partition at {summary.finished_at:%Y-%m-%d %H:%M:%S} UTC")
    with write_transaction(ctx.engine) as conn:
        n = mark_interrupted_runs(conn, ctx.tables, ctx.key, summary.partition_key, summary.run_id,
                                  summary.started_at or summary.finished_at, message)
    if n:
        log.warning("partition %s: %d earlier run(s) never recorded an end; marked interrupted",
                    summary.partition_key, n)


def _write_run(ctx: PipelineContext, summary: RunSummary) -> None:
    row = asdict(summary)
    with write_transaction(ctx.engine) as conn:
        upsert(conn, ctx.tables.runs, [row])


# -- the whole partition --------------------------------------------------------------------


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
    run_id = run_id or uuid.uuid4().hex
    ctx = prepare(config)
    started = _now()
    base = RunSummary(run_id=run_id, partition_key=partition_key, metric=ctx.key.metric, status="running",
                      judge_model=ctx.key.judge_model, prompt_version=ctx.key.prompt_version,
                      started_at=started, threshold=ctx.metric.threshold)
    _write_run(ctx, base)
    log.info("scoring %s partition %s of %s in %s (judge %s, prompt %s, run %s)", ctx.key.metric, partition_key,
             ctx.source.name, display_url(ctx.engine), ctx.key.judge_model, ctx.key.prompt_version, run_id)
    try:
        chunks = plan_chunks(config, partition_key, context=ctx)
        total = sum(c.rows for c in chunks)
        log.info("partition %s: %d rows in %d chunks of up to %d", partition_key, total, len(chunks), config.chunk_size)
        if progress is not None:
            progress(ProgressEvent("planned", partition_key, 0, total, f"{total} rows in {len(chunks)} chunks"))
        if workers > 1 and len(chunks) > 1 and _can_fork_out(config):
            results = _score_in_processes(config, chunks, run_id, workers, progress, total)
        else:
            budget = Budget(config.max_cost) if config.max_cost is not None else None
            results = []
            done = 0
            for chunk in chunks:
                results.append(score_chunk(config, chunk, run_id=run_id, budget=budget, context=ctx,
                                           progress=_offset(progress, done, total)))
                done += chunk.rows
        summary = finalize_run(config, partition_key, run_id=run_id, chunk_results=results,
                               started_at=started, context=ctx)
        breaker = ctx.guards.breaker
        if breaker is not None and breaker.gave_up and not summary.completed:
            summary.error_message = breaker.gave_up  # the cause, for ctxprec_runs and the CLI line
            _write_run(ctx, summary)
    except BaseException as exc:
        base.status = "failed"
        base.finished_at = _now()
        base.error_message = redact(f"{type(exc).__name__}: {exc}")[:4000]
        log.error("partition %s run %s aborted: %s", partition_key, run_id, base.error_message)
        try:
            _write_run(ctx, base)
        except Exception:  # the original error matters more
            pass
        raise
    log.info("partition %s: %s; %d scored (%d cached), %d failed; mean %s", partition_key, summary.status,
             summary.rows_scored, summary.rows_cached, summary.rows_failed,
             "n/a" if summary.mean_score is None else f"{summary.mean_score:.4f}")
    if progress is not None:
        progress(ProgressEvent("finished", partition_key, summary.rows_total, summary.rows_total, summary.status))
    return summary


def _offset(progress: ProgressCallback | None, base: int, total: int) -> ProgressCallback | None:
    """Translate a chunk's events (counted within the chunk) to partition-wide counts."""
    if progress is None:
        return None

    def forward(ev: ProgressEvent) -> None:
        progress(ProgressEvent(ev.kind, ev.partition_key, base + ev.done, total, ev.message))

    return forward


# -- worker processes -----------------------------------------------------------------------

_worker_ctx: PipelineContext | None = None


def _can_fork_out(config: PipelineConfig) -> bool:
    import pickle

    if not isinstance(config.warehouse, str) or config.max_cost is not None:
        return False
    if config.warehouse.startswith("sqlite") and (":memory:" in config.warehouse or config.warehouse == "sqlite://"):
        return False  # each process would see its own empty in-memory database
    try:
        pickle.dumps(config)
    except Exception:
        log.info("config is not picklable (custom judge?): scoring chunks in this process")
        return False
    return True


def _worker_init(config: PipelineConfig) -> None:
    global _worker_ctx
    _worker_ctx = prepare(config)


def _worker_score(chunk: dict[str, Any], run_id: str) -> dict[str, Any]:
    assert _worker_ctx is not None
    return score_chunk(_worker_ctx.config, Chunk.from_dict(chunk), run_id=run_id, context=_worker_ctx).to_dict()


def _score_in_processes(config: PipelineConfig, chunks: list[Chunk], run_id: str, workers: int,
                        progress: ProgressCallback | None, total: int) -> list[ChunkResult]:
    """Score ``chunks`` in a pool of spawned processes; chunk writes are independent upserts."""
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    pk = chunks[0].partition_key
    results: list[ChunkResult] = []
    done = 0
    pool = ProcessPoolExecutor(max_workers=min(workers, len(chunks)), mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init, initargs=(config,))
    try:
        pending = {pool.submit(_worker_score, c.to_dict(), run_id) for c in chunks}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in finished:
                r = ChunkResult.from_dict(fut.result())  # re-raises a worker's exception
                results.append(r)
                done += r.rows_total
                if progress is not None:
                    progress(ProgressEvent("chunk_done", pk, done, total,
                                           f"chunk {r.index}: {r.rows_scored} scored, {r.rows_failed} failed"))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return sorted(results, key=lambda r: r.index)
