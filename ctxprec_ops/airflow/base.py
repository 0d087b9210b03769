"""The base of the ctxprec operators: shared arguments, their resolution into a ``PipelineConfig``
(the rendered arguments over the ``CTXPREC_*`` settings, each checked against the one declaration,
``ctxprec_ops.config.Settings``), and the outcome policy in Airflow terms.

Each setting argument names its ``Settings`` field (``SETTING_ARGUMENTS``; ``settings`` takes any
other by name): its type, default, bounds and meaning are the declaration's. The judge API key
never is a template field: it comes from the Airflow connection ``judge_conn_id`` (password; host
or extra ``base_url`` = endpoint) or ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from ..config import Settings, SettingsError
from ..errors import CtxPrecError, JudgeUnavailableError
from ..pipeline.kinds import metric_kind
from ..pipeline.outcome import Decision, Outcome, decide_error
from ..secrets import redact, redact_url
from .hooks import (
    DEFAULT_WAREHOUSE_CONN_ID,
    CtxPrecWarehouseHook,
    mask,
    mask_url_password,
    optional_connection,
)
from .lineage import LineageMixin
from .segments import parse_segment_arg
from .values import NONE_STRINGS, columns_value

__all__ = [
    "CtxPrecBaseOperator",
    "CtxPrecTaskError",
    "JudgeOutageError",
    "JudgeSettings",
    "DEFAULT_JUDGE_CONN_ID",
    "SETTING_ARGUMENTS",
    "apply_decision",
]

DEFAULT_JUDGE_CONN_ID = "ctxprec_judge"

#: operator argument -> the ``Settings`` field it sets (the same name unless it says otherwise)
SETTING_ARGUMENTS: dict[str, str] = {
    name: name
    for name in (
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
}


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and value.strip().lower() in NONE_STRINGS)


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
        base_url = None if self.base_url is None else redact_url(self.base_url)
        return f"JudgeSettings(model={self.model!r}, base_url={base_url!r})"


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
        *SETTING_ARGUMENTS,
        "settings",
    )
    ui_color = "#e8f4f8"
    #: argument -> ``Settings`` field, of this operator (subclasses add theirs)
    setting_arguments: Mapping[str, str] = SETTING_ARGUMENTS

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
        settings: dict[str, Any] | str | None = None,
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
        #: any other setting by its ``Settings`` name, e.g. ``{"batch_retry": "sync"}`` (a mapping, or
        #: the JSON object a template rendered); checked against the declaration like the others
        self.settings = settings

    # -- resolution (at execute time, after rendering) -------------------------------------
    def _metric(self) -> str:
        try:
            return metric_kind(self.metric).name
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from None

    def resolved_settings(self, **more: Any) -> Settings:
        """The settings of this task: ``CTXPREC_*`` with its rendered setting arguments (and
        ``more``, fields) on top, each checked against the declaration; a bad one fails the task at
        once (a retry cannot fix it), naming the argument."""
        values: dict[str, Any] = {}
        names: dict[str, str] = {}
        for arg, field in self.setting_arguments.items():
            value = getattr(self, arg, None)
            if _given(value):
                values[field], names[field] = value, arg
        for field, value in _settings_arg(self.settings).items():
            if _given(value):
                values[field], names[field] = value, f"settings[{field!r}]"
        values.update({k: v for k, v in more.items() if v is not None})
        try:
            return Settings.from_env(**values)
        except SettingsError as exc:
            named = exc.named(names[exc.field]) if exc.field in names else exc
            raise AirflowFailException(f"invalid ctxprec settings: {redact(str(named))}") from None
        except TypeError as exc:  # a name that is no setting
            raise AirflowFailException(f"invalid ctxprec settings: {exc}") from None

    def _source_table_name(self, metric: str, settings: Settings | None = None) -> str:
        """The input table this task's scores come from (``source_table`` or the metric's
        configured table), as recorded in ``ctxprec_scores.source_table`` (``settings``: this
        task's, ``resolved_settings``)."""
        settings = settings or self.resolved_settings()
        try:
            return settings.recorded_source(metric_kind(metric), self.source_table or None)
        except ValueError as exc:
            raise AirflowFailException(str(exc)) from None

    def _recorded_mapping(self, settings: Settings, metric: str) -> str:
        """The ``mapping`` this task's scores are recorded under: the fingerprint of its column
        mapping (``columns`` or the metric's ``CTXPREC_*_COLUMNS``, ``pipeline.mapping``)."""
        try:
            return settings.mapping_for(metric_kind(metric), columns_value(self.columns))
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"invalid ctxprec settings: {redact(str(exc))}") from None

    def _warehouse_hook(self) -> CtxPrecWarehouseHook:
        return CtxPrecWarehouseHook(warehouse_conn_id=self.warehouse_conn_id, warehouse_url=self.warehouse_url)

    def _judge_settings(self) -> JudgeSettings:
        """The judge's model, endpoint and key: the arguments, else the ``judge_conn_id`` connection
        (model in its extra, endpoint in its host or extra ``base_url``, key as its password)."""
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
        return JudgeSettings(model=model or "", base_url=base_url or None, api_key=api_key)

    def pipeline_config(self) -> Any:
        """The ``PipelineConfig`` for this task (rendered arguments over the ``CTXPREC_*`` settings)."""
        metric = self._metric()
        judge = self._judge_settings()
        settings = self.resolved_settings(
            judge=judge.model or None,
            openai_base_url=judge.base_url,
            segments=parse_segment_arg(self.segments),
        )
        hook = self._warehouse_hook()
        try:
            engine = hook.get_engine()
        except ValueError as exc:
            raise AirflowFailException(redact(str(exc))) from None
        self.log.info("warehouse: %s", hook.describe())
        try:
            config = settings.pipeline_config(
                warehouse=engine,
                metric=metric,
                judge_api_key=judge.api_key,
                source_table=self.source_table or None,
                columns=columns_value(self.columns),
            )
        except (TypeError, ValueError) as exc:  # bad names or numbers: retrying cannot help
            raise AirflowFailException(f"invalid ctxprec settings: {redact(str(exc))}") from None
        self.log.info(
            "metric %s, judge %s%s, source table %s, threshold %s, chunk size %s, concurrency %s",
            metric,
            config.judge,
            f" at {redact_url(config.judge_base_url)}" if config.judge_base_url else "",
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


def _settings_arg(value: Any) -> dict[str, Any]:
    """The ``settings`` argument: a mapping, or the JSON object a template rendered."""
    if not _given(value):
        return {}
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise AirflowFailException(f"settings must be a JSON object of settings, got {value!r}") from None
    if not isinstance(value, Mapping):
        raise AirflowFailException(f"settings must map setting names to values, got {value!r}")
    return dict(value)
