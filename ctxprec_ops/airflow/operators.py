"""Airflow operators over ``ctxprec_ops.pipeline`` and ``ctxprec_ops.monitoring``.

- ``ContextualPrecisionPlanOperator``: cut a partition into chunks (XCom: list of chunk dicts).
- ``ContextualPrecisionOperator``: score one chunk (mapped: ``.partial(...).expand(chunk=...)``)
  or, without ``chunk``, the whole partition. XCom: a few counts, never rows, never secrets.
- ``ContextualPrecisionFinalizeOperator``: the partition's ``ctxprec_runs`` row (RunSummary dict).
- ``ContextualPrecisionAlertOperator``: ``check_partition``; raises ``AirflowFailException``
  (not retried) when an alert fires, so failure callbacks and notifiers run.

Every numeric argument is templated and accepts the string Jinja renders (``"{{ params.x }}"``).
The judge API key never is a template field: it comes from the Airflow connection
``judge_conn_id`` (password; host or extra ``base_url`` = endpoint) or ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from ..config import Settings
from ..errors import CtxPrecError, JudgeUnavailableError
from ..pipeline.kinds import metric_kind
from ..pipeline.outcome import Decision, Outcome, decide, decide_error
from ..pipeline.records import ChunkResult, RunSummary
from ..secrets import redact
from ..warehouse.source import PartitionKeyError, parse_partition_key
from .hooks import (
    DEFAULT_WAREHOUSE_CONN_ID,
    CtxPrecWarehouseHook,
    mask,
    mask_url_password,
    optional_connection,
)

__all__ = [
    "ContextualPrecisionPlanOperator",
    "ContextualPrecisionOperator",
    "ContextualPrecisionFinalizeOperator",
    "ContextualPrecisionAlertOperator",
    "JudgeOutageError",
    "CtxPrecTaskError",
    "DEFAULT_JUDGE_CONN_ID",
    "apply_decision",
]

DEFAULT_JUDGE_CONN_ID = "ctxprec_judge"
_NONE_STRINGS = ("", "none", "null")


class CtxPrecTaskError(CtxPrecError):
    """A redacted library error re-raised in a task (Airflow retries it)."""


class JudgeOutageError(CtxPrecError):
    """Rows of a chunk failed because the judge was unavailable: Airflow retries the task,
    and the retry judges only the rows not yet scored (scores are upserted, verdicts cached)."""

    error_type = "judge_unavailable"


# -- coercion of rendered template values --------------------------------------------------
def _opt_float(value: Any, name: str, *, lo: float | None = None, hi: float | None = None) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_STRINGS):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise AirflowFailException(f"{name} must be a number, got {value!r}") from None
    if math.isnan(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise AirflowFailException(f"{name} must be between {lo} and {hi}, got {value!r}")
    return v


def _opt_int(value: Any, name: str, *, lo: int = 1) -> int | None:
    v = _opt_float(value, name)
    if v is None:
        return None
    if v != int(v) or v < lo:
        raise AirflowFailException(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(v)


def _partition(value: Any) -> str:
    key = "" if value is None else str(value).strip()
    if key.lower() in _NONE_STRINGS:
        raise AirflowFailException(
            "no partition to score: this run has no logical date; trigger it with the "
            "partition_key param (YYYY-MM-DD) or with a logical date"
        )
    try:
        parse_partition_key(key)
    except PartitionKeyError as exc:
        raise AirflowFailException(str(exc)) from None
    return key


def _columns(value: Any) -> dict[str, str] | None:
    """The ``columns`` argument: a mapping, or the JSON object a template rendered."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_STRINGS):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise AirflowFailException(f"columns must be a JSON object of column names, got {value!r}") from None
    if not isinstance(value, dict):
        raise AirflowFailException(f"columns must map logical column names to columns, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def apply_decision(decision: Decision) -> None:
    """The outcome policy in Airflow terms: ``done`` returns, ``retry`` raises an exception Airflow
    retries (``JudgeOutageError``), ``fail`` raises ``AirflowFailException`` (no retry)."""
    if decision.outcome is Outcome.DONE:
        return
    if decision.outcome is Outcome.FAIL:
        raise AirflowFailException(decision.reason)
    raise JudgeOutageError(decision.reason)


@dataclass(frozen=True)
class JudgeSettings:
    model: str
    base_url: str | None
    api_key: str | None  # never logged, never in XCom

    def __repr__(self) -> str:
        return f"JudgeSettings(model={self.model!r}, base_url={self.base_url!r})"


class CtxPrecBaseOperator(BaseOperator):
    """Shared arguments: partition, metric, warehouse (connection or URL) and judge settings."""

    template_fields: Sequence[str] = (
        "partition_key",
        "metric",
        "warehouse_conn_id",
        "warehouse_url",
        "source_table",
        "columns",
        "judge",
        "judge_base_url",
        "judge_conn_id",
        "threshold",
        "chunk_size",
        "concurrency",
        "max_cost",
        "judge_max_retries",
        "max_rpm",
        "max_tpm",
        "outage_tolerance",
        "sample_rate",
        "max_rows",
        "judge_samples",
        "source_format",
        "stage",
    )
    ui_color = "#e8f4f8"

    def __init__(
        self,
        *,
        partition_key: str = "{{ ds }}",
        metric: str = "contextual_precision",
        warehouse_conn_id: str | None = DEFAULT_WAREHOUSE_CONN_ID,
        warehouse_url: str | None = None,
        source_table: str | None = None,
        columns: dict[str, str] | str | None = None,
        judge: str | None = None,
        judge_base_url: str | None = None,
        judge_conn_id: str | None = DEFAULT_JUDGE_CONN_ID,
        threshold: float | str | None = None,
        chunk_size: int | str | None = None,
        concurrency: int | str | None = None,
        max_cost: float | str | None = None,
        judge_max_retries: int | str | None = None,
        max_rpm: float | str | None = None,
        max_tpm: float | str | None = None,
        outage_tolerance: float | str | None = None,
        sample_rate: float | str | None = None,
        max_rows: int | str | None = None,
        judge_samples: int | str | None = None,
        source_format: str | None = None,
        stage: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        mask_url_password(warehouse_url)  # a literal URL's password stays out of rendered fields
        self.partition_key = partition_key
        self.metric = metric
        self.warehouse_conn_id = warehouse_conn_id
        self.warehouse_url = warehouse_url
        self.source_table = source_table
        self.columns = columns
        self.judge = judge
        self.judge_base_url = judge_base_url
        self.judge_conn_id = judge_conn_id
        self.threshold = threshold
        self.chunk_size = chunk_size
        self.concurrency = concurrency
        self.max_cost = max_cost
        self.judge_max_retries = judge_max_retries
        self.max_rpm = max_rpm  # this task's share of the judge quota (see docs/scaling.md)
        self.max_tpm = max_tpm
        self.outage_tolerance = outage_tolerance
        self.sample_rate = sample_rate  # deterministic sample of each partition (docs: pipeline.sampling)
        self.max_rows = max_rows
        #: self-consistency: sampled judge answers per node, odd (default CTXPREC_JUDGE_SAMPLES or 1)
        self.judge_samples = judge_samples
        #: a spans table (``openinference`` / ``otel-genai``) and its stage (docs/traces.md);
        #: default CTXPREC_SOURCE_FORMAT / CTXPREC_STAGE; the reference and documents tables: CTXPREC_*
        self.source_format = source_format
        self.stage = stage

    # -- resolution (at execute time, after rendering) -------------------------------------
    def _metric(self) -> str:
        try:
            return metric_kind(self.metric).name
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from None

    def _source_table_name(self, settings: Settings, metric: str) -> str:
        """The input table this task's scores come from (``source_table`` or the metric's
        configured table), as recorded in ``ctxprec_scores.source_table``."""
        from ..pipeline.context import source_table_name
        from ..pipeline.formats import SPAN_FORMATS, reads_spans, recorded_source

        kind = metric_kind(metric)
        fmt = self.source_format or (settings.source_format if reads_spans(kind) else "rows")
        try:
            if fmt in SPAN_FORMATS:
                return recorded_source(
                    source_table_name(self.source_table or settings.span_table, None), self.stage or settings.stage
                )
            return source_table_name(self.source_table or getattr(settings, kind.table_setting), None)
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from None

    def _warehouse_hook(self) -> CtxPrecWarehouseHook:
        return CtxPrecWarehouseHook(warehouse_conn_id=self.warehouse_conn_id, warehouse_url=self.warehouse_url)

    def _judge_settings(self, settings: Settings) -> JudgeSettings:
        model, base_url, api_key = self.judge, self.judge_base_url, None
        if self.judge_conn_id:
            conn = optional_connection(self.judge_conn_id)
            if conn is not None:
                extra = conn.extra_dejson or {}
                api_key = conn.password or None
                host = conn.host or ""
                base_url = base_url or extra.get("base_url") or (host if "://" in host else None)
                model = model or extra.get("model")
        mask(api_key)
        return JudgeSettings(model=model or settings.judge, base_url=base_url or None, api_key=api_key)

    def pipeline_config(self) -> Any:
        """The ``PipelineConfig`` for this task (rendered fields, then ``CTXPREC_*`` defaults)."""
        from ..pipeline import PipelineConfig

        settings = Settings.from_env()
        metric = self._metric()
        hook = self._warehouse_hook()
        try:
            engine = hook.get_engine()
        except ValueError as exc:
            raise AirflowFailException(redact(str(exc))) from None
        self.log.info("warehouse: %s", hook.describe())
        judge = self._judge_settings(settings)
        threshold = _opt_float(self.threshold, "threshold", lo=0.0, hi=1.0)
        retries = _opt_int(self.judge_max_retries, "judge_max_retries", lo=0)
        try:
            config = PipelineConfig.from_settings(
                settings,
                warehouse=engine,
                metric=metric,
                judge=judge.model,
                judge_base_url=judge.base_url,
                judge_api_key=judge.api_key,
                source_table=self.source_table or None,
                columns=_columns(self.columns),
                threshold=threshold,
                chunk_size=_opt_int(self.chunk_size, "chunk_size"),
                concurrency=_opt_int(self.concurrency, "concurrency"),
                max_cost=_opt_float(self.max_cost, "max_cost", lo=0.0),
                max_retries=retries,
                max_rpm=_opt_float(self.max_rpm, "max_rpm", lo=0.0),
                max_tpm=_opt_float(self.max_tpm, "max_tpm", lo=0.0),
                outage_tolerance=_opt_float(self.outage_tolerance, "outage_tolerance", lo=0.0),
                sample_rate=_opt_float(self.sample_rate, "sample_rate", lo=0.0, hi=1.0),
                max_rows=_opt_int(self.max_rows, "max_rows"),
                judge_mode=getattr(self, "judge_mode", None) or None,
                judge_samples=_opt_int(self.judge_samples, "judge_samples"),
                source_format=self.source_format or None,
                stage=self.stage or None,
            )
        except (TypeError, ValueError) as exc:  # bad names or numbers: retrying cannot help
            raise AirflowFailException(f"invalid ctxprec settings: {redact(str(exc))}") from None
        self.log.info(
            "metric %s, judge %s%s, source table %s, threshold %s, chunk size %s, concurrency %s",
            metric,
            judge.model,
            f" at {judge.base_url}" if judge.base_url else "",
            config.table_name,
            config.threshold,
            config.chunk_size,
            config.concurrency,
        )
        return config

    @staticmethod
    def ctxprec_run_id(context: Any) -> str:
        """One ctxprec run id per Airflow DAG run, shared by every chunk task of that run."""
        ti = context["ti"]
        return f"airflow:{ti.dag_id}:{context['run_id']}"

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call the library. An error the outcome policy says no retry can fix fails the task at
        once; anything else is re-raised redacted (its traceback logged redacted) so Airflow
        retries it."""
        try:
            return fn(*args, **kwargs)
        except AirflowFailException:
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {redact(str(exc))}"[:2000]
            if decide_error(exc).outcome is Outcome.FAIL:
                raise AirflowFailException(message) from None
            self.log.error("%s", redact(traceback.format_exc()))
            cls = JudgeOutageError if isinstance(exc, JudgeUnavailableError) else CtxPrecTaskError
            raise cls(message) from None


class ContextualPrecisionPlanOperator(CtxPrecBaseOperator):
    """Cut the partition into keyset chunks; returns ``[chunk.to_dict(), ...]`` for mapping.

    At most ``max_chunks`` chunks (default: Airflow's ``[core] max_map_length``): a larger
    partition gets proportionally larger chunks instead of failing the mapping.
    """

    template_fields: Sequence[str] = (*CtxPrecBaseOperator.template_fields, "max_chunks")

    def __init__(self, *, max_chunks: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_chunks = max_chunks

    def _max_chunks(self) -> int:
        explicit = _opt_int(self.max_chunks, "max_chunks")
        if explicit:
            return explicit
        from airflow.sdk import conf

        return conf.getint("core", "max_map_length", fallback=1024)

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from ..pipeline import plan_chunks

        key = _partition(self.partition_key)
        config = self.pipeline_config()
        chunks = self._call(plan_chunks, config, key)
        limit = self._max_chunks()
        if len(chunks) > limit:
            rows = sum(c.rows for c in chunks)
            config.chunk_size = math.ceil(rows / limit)
            self.log.info(
                "%d chunks exceed max_chunks=%d: re-planning with chunk size %d", len(chunks), limit, config.chunk_size
            )
            chunks = self._call(plan_chunks, config, key)
        rows = sum(c.rows for c in chunks)
        self.log.info(
            "partition %s (%s): %d rows in %d chunk(s) of at most %d",
            key,
            config.metric,
            rows,
            len(chunks),
            config.chunk_size,
        )
        return [c.to_dict() for c in chunks]


class ContextualPrecisionOperator(CtxPrecBaseOperator):
    """Score one planned ``chunk`` (a dict from the plan task), or the whole partition.

    Mapped over the plan: ``ContextualPrecisionOperator.partial(task_id=..., ...)
    .expand(chunk=plan.output)``. Returns a small summary (counts, tokens, cost; the mean
    too when scoring a whole partition). Rows whose judge calls kept failing raise
    ``JudgeOutageError`` so Airflow retries the task (``fail_on_judge_errors``); the retry
    re-judges only what is still missing.
    """

    template_fields: Sequence[str] = (*CtxPrecBaseOperator.template_fields, "chunk", "judge_mode")

    def __init__(
        self,
        *,
        chunk: dict[str, Any] | None = None,
        fail_on_judge_errors: bool = True,
        judge_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.chunk = chunk
        self.fail_on_judge_errors = fail_on_judge_errors
        #: ``sync`` or ``batch`` (default: CTXPREC_JUDGE_MODE); batch mode scores the whole
        #: partition and defers to ``BatchPollTrigger`` while the provider works
        self.judge_mode = judge_mode

    def execute(self, context: Any) -> dict[str, Any]:
        from ..pipeline import Chunk, score_chunk, score_partition

        config = self.pipeline_config()
        run_id = self.ctxprec_run_id(context)
        if config.judge_mode == "batch":
            if self.chunk:
                raise AirflowFailException("batch mode scores a whole partition: do not map it over chunks")
            return self._batch_step(context, config, {})
        if self.chunk:
            try:
                chunk = Chunk.from_dict(dict(self.chunk))
            except TypeError as exc:
                raise AirflowFailException(f"chunk is not a planned chunk: {exc}") from None
            self.log.info(
                "scoring chunk %d of %s: %d row(s), ids (%r, %r]",
                chunk.index,
                chunk.partition_key,
                chunk.rows,
                chunk.after_id,
                chunk.upto_id,
            )
            result = self._call(score_chunk, config, chunk, run_id=run_id)
            out = _public(result.to_dict())
        else:
            key = _partition(self.partition_key)
            self.log.info("scoring the whole partition %s", key)
            summary = self._call(score_partition, config, key, run_id=run_id)
            out = _public(summary.to_dict())
            result = summary
        self.log.info("result: %s", out)
        self.finish(result)
        return out

    def _batch_step(self, context: Any, config: Any, resume: dict[str, Any]) -> dict[str, Any]:
        """Score the partition (the one run path) without blocking on the provider: defer to the
        trigger while its batches run (the run's ``waiting`` state), finish when nothing is left."""
        from ..pipeline import score_partition

        key = _partition(self.partition_key)
        run_id = self.ctxprec_run_id(context)
        summary = self._call(score_partition, config, key, run_id=run_id, wait=False, resume=resume or None)
        waiting = summary.waiting
        if waiting is not None:
            from .triggers import BatchPollTrigger

            self.log.info(
                "partition %s: deferring while %d batch(es) run: %s", key, len(waiting.ids), ", ".join(waiting.ids)
            )
            self.defer(
                trigger=BatchPollTrigger(
                    waiting.ids,
                    base_url=config.judge_base_url,
                    judge_conn_id=self.judge_conn_id,
                    poll_seconds=waiting.poll_seconds,
                ),
                method_name="resume_batch",
                kwargs={"state": waiting.resume},
            )
        out = _public(summary.to_dict())
        self.log.info("result: %s", out)
        self.finish(summary)
        return out

    def resume_batch(
        self, context: Any, event: dict[str, Any] | None = None, state: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Back from the trigger: the next pass writes what the batches answered (or submits the next round)."""
        if event and event.get("status") == "error":
            raise CtxPrecTaskError(f"polling the batches failed: {event.get('message')}")
        if event:
            self.log.info("batches ended: %s", event.get("batches"))
        return self._batch_step(context, self.pipeline_config(), dict(state or {}))

    def finish(self, result: ChunkResult | RunSummary) -> None:
        """Apply the outcome policy to a chunk's or partition's result (``fail_on_judge_errors=False``
        turns a ``retry`` into success: the failed rows wait for the next run)."""
        decision = decide(result)
        self.log.info("outcome: %s: %s", decision.outcome, decision.reason)
        if decision.outcome is Outcome.RETRY and not self.fail_on_judge_errors:
            return
        apply_decision(decision)


class ContextualPrecisionFinalizeOperator(CtxPrecBaseOperator):
    """Aggregate the partition into its ``ctxprec_runs`` row; returns the RunSummary dict.

    ``chunk_results``: the mapped scoring task's output (``score.output``), optional.
    """

    template_fields: Sequence[str] = (*CtxPrecBaseOperator.template_fields, "chunk_results")

    def __init__(self, *, chunk_results: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chunk_results = chunk_results

    def execute(self, context: Any) -> dict[str, Any]:
        from ..pipeline import finalize_run

        key = _partition(self.partition_key)
        config = self.pipeline_config()
        results = [ChunkResult.from_dict(dict(r)) for r in (self.chunk_results or []) if r]
        dag_run = context.get("dag_run")
        started = getattr(dag_run, "start_date", None)
        summary = self._call(
            finalize_run,
            config,
            key,
            run_id=self.ctxprec_run_id(context),
            chunk_results=results,
            started_at=started if isinstance(started, datetime) else None,
        )
        out = _public(summary.to_dict())
        self.log.info(
            "partition %s %s: status %s, %s/%s scored, %s failed, mean %s, pass rate %s",
            key,
            config.metric,
            out.get("status"),
            out.get("rows_scored"),
            out.get("rows_total"),
            out.get("rows_failed"),
            out.get("mean_score"),
            out.get("pass_rate"),
        )
        return out


class ContextualPrecisionAlertOperator(CtxPrecBaseOperator):
    """Check the partition (thresholds, regression vs. the trailing baseline, volume).

    Raises ``AirflowFailException`` — failed at once, never retried — when an alert fires
    (``fail_on="any"``) or when an ``error``-severity alert fires (``fail_on="error"``), so
    ``on_failure_callback`` and notifiers run. Otherwise returns ``CheckResult.to_dict()``.
    """

    template_fields: Sequence[str] = (
        *CtxPrecBaseOperator.template_fields,
        "min_mean",
        "min_pass_rate",
        "min_drop",
        "max_failure_rate",
    )

    def __init__(
        self,
        *,
        min_mean: float | str | None = None,
        min_pass_rate: float | str | None = None,
        min_drop: float | str | None = 0.05,
        max_failure_rate: float | str | None = 0.2,
        fail_on: Literal["any", "error"] = "any",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_mean = min_mean
        self.min_pass_rate = min_pass_rate
        self.min_drop = min_drop
        self.max_failure_rate = max_failure_rate
        self.fail_on = fail_on

    def execute(self, context: Any) -> dict[str, Any]:
        from ..monitoring import check_partition

        key = _partition(self.partition_key)
        metric = self._metric()
        settings = Settings.from_env()
        hook = self._warehouse_hook()
        try:
            engine = hook.get_engine()
        except ValueError as exc:
            raise AirflowFailException(redact(str(exc))) from None
        min_mean = _opt_float(self.min_mean, "min_mean", lo=0.0, hi=1.0)
        min_pass_rate = _opt_float(self.min_pass_rate, "min_pass_rate", lo=0.0, hi=1.0)
        min_drop = _opt_float(self.min_drop, "min_drop", lo=0.0, hi=1.0)
        result = self._call(
            check_partition,
            engine,
            key,
            metric=metric,
            source_table=self._source_table_name(settings, metric),
            min_mean=settings.min_mean if min_mean is None else min_mean,
            min_pass_rate=settings.min_pass_rate if min_pass_rate is None else min_pass_rate,
            min_drop=0.05 if min_drop is None else min_drop,
            max_failure_rate=_opt_float(self.max_failure_rate, "max_failure_rate", lo=0.0, hi=1.0),
        )
        summary = redact(result.summary())
        for line in summary.splitlines():
            self.log.info("%s", line)
        failing = result.alerts if self.fail_on == "any" else result.errors
        if failing:
            rules = ", ".join(sorted({a.rule for a in failing}))
            messages = "; ".join(redact(a.message) for a in failing)
            raise AirflowFailException(f"ctxprec alert on {key} ({metric}): {rules}: {messages}")
        return result.to_dict()


def _public(d: dict[str, Any]) -> dict[str, Any]:
    """Only JSON scalars, rounded for display; nothing that could carry a row or a secret."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, float):
            out[k] = None if math.isnan(v) else round(v, 6)
        elif v is None or isinstance(v, (int, bool)):
            out[k] = v
        elif isinstance(v, str):
            out[k] = redact(v)
        elif isinstance(v, dict) and all(isinstance(x, (int, float)) for x in v.values()):
            out[k] = dict(v)
    return out
