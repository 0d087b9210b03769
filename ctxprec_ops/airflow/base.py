"""The base of the ctxprec operators: shared arguments, their resolution into a ``PipelineConfig``
(rendered fields, then the ``CTXPREC_*`` defaults), and the outcome policy in Airflow terms.

The judge API key never is a template field: it comes from the Airflow connection
``judge_conn_id`` (password; host or extra ``base_url`` = endpoint) or ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from ..config import Settings
from ..errors import CtxPrecError, JudgeUnavailableError
from ..pipeline.kinds import metric_kind
from ..pipeline.outcome import Decision, Outcome, decide_error
from ..secrets import redact
from .hooks import (
    DEFAULT_WAREHOUSE_CONN_ID,
    CtxPrecWarehouseHook,
    mask,
    mask_url_password,
    optional_connection,
)
from .lineage import LineageMixin
from .segments import parse_segment_arg
from .values import columns_value, opt_float, opt_int

__all__ = [
    "CtxPrecBaseOperator",
    "CtxPrecTaskError",
    "JudgeOutageError",
    "JudgeSettings",
    "DEFAULT_JUDGE_CONN_ID",
    "apply_decision",
]

DEFAULT_JUDGE_CONN_ID = "ctxprec_judge"


class CtxPrecTaskError(CtxPrecError):
    """A redacted library error re-raised in a task (Airflow retries it)."""


class JudgeOutageError(CtxPrecError):
    """Rows of a chunk failed because the judge was unavailable: Airflow retries the task,
    and the retry judges only the rows not yet scored (scores are upserted, verdicts cached)."""

    error_type = "judge_unavailable"


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


class CtxPrecBaseOperator(LineageMixin, BaseOperator):
    """Shared arguments: partition, metric, warehouse (connection or URL) and judge settings."""

    template_fields: Sequence[str] = (
        "partition_key",
        "metric",
        "warehouse_conn_id",
        "warehouse_url",
        "source_table",
        "columns",
        "segments",
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
        segments: list[str] | str | None = None,
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
        #: segment columns copied into the score rows (default CTXPREC_SEGMENTS); the alert task
        #: checks each of their values too
        self.segments = segments
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

    def _recorded_mapping(self, settings: Settings, metric: str) -> str:
        """The ``mapping`` this task's scores are recorded under: the fingerprint of its column
        mapping (``columns`` or the metric's ``CTXPREC_*_COLUMNS``, ``pipeline.mapping``)."""
        from ..pipeline import PipelineConfig
        from ..pipeline.mapping import mapping_of

        try:
            config = PipelineConfig.from_settings(
                settings, metric=metric, columns=columns_value(self.columns),
                source_format=self.source_format or None, stage=self.stage or None,
            )  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"invalid ctxprec settings: {redact(str(exc))}") from None
        return mapping_of(config)

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
        threshold = opt_float(self.threshold, "threshold", lo=0.0, hi=1.0)
        retries = opt_int(self.judge_max_retries, "judge_max_retries", lo=0)
        try:
            config = PipelineConfig.from_settings(
                settings,
                warehouse=engine,
                metric=metric,
                judge=judge.model,
                judge_base_url=judge.base_url,
                judge_api_key=judge.api_key,
                source_table=self.source_table or None,
                columns=columns_value(self.columns),
                segments=parse_segment_arg(self.segments),
                threshold=threshold,
                chunk_size=opt_int(self.chunk_size, "chunk_size"),
                concurrency=opt_int(self.concurrency, "concurrency"),
                max_cost=opt_float(self.max_cost, "max_cost", lo=0.0),
                max_retries=retries,
                max_rpm=opt_float(self.max_rpm, "max_rpm", lo=0.0),
                max_tpm=opt_float(self.max_tpm, "max_tpm", lo=0.0),
                outage_tolerance=opt_float(self.outage_tolerance, "outage_tolerance", lo=0.0),
                sample_rate=opt_float(self.sample_rate, "sample_rate", lo=0.0, hi=1.0),
                max_rows=opt_int(self.max_rows, "max_rows"),
                judge_mode=getattr(self, "judge_mode", None) or None,
                judge_samples=opt_int(self.judge_samples, "judge_samples"),
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

    def record_result(self, context: Any, result: dict[str, Any], *, partition_key: str, config: Any) -> None:
        """Keep ``result``'s figures for OpenLineage and attach them to the task's Asset outlets
        (the asset event's ``Metadata`` extra: partition, metric, source table, rows, mean, cost ...)."""
        from .assets import attach_run_metadata, run_extra

        extra = run_extra(result, partition_key=partition_key, metric=config.metric, source_table=config.table_name)
        judge = config.judge if isinstance(config.judge, str) else None
        self._lineage = {**extra, "judge_model": result.get("judge_model") or judge}
        for meta in attach_run_metadata(context, list(self.outlets or []), extra):
            self.log.info("asset event %s: %s", meta.asset.uri, meta.extra)

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
        except AirflowFailException as exc:
            self._lineage = {**(self._lineage or {}), "error": redact(f"AirflowFailException: {exc}")}
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {redact(str(exc))}"[:2000]
            self._lineage = {**(self._lineage or {}), "error": message}
            if decide_error(exc).outcome is Outcome.FAIL:
                raise AirflowFailException(message) from None
            self.log.error("%s", redact(traceback.format_exc()))
            cls = JudgeOutageError if isinstance(exc, JudgeUnavailableError) else CtxPrecTaskError
            raise cls(message) from None
