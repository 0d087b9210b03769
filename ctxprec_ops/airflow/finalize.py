"""The operators that close a partition run: aggregate it into its ``ctxprec_runs`` row, and alert.

- ``ContextualPrecisionFinalizeOperator``: the partition's ``ctxprec_runs`` row (RunSummary dict).
- ``ContextualPrecisionAlertOperator``: ``check_partition``; raises ``AirflowFailException``
  (not retried) when an alert fires, so failure callbacks and notifiers run.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from airflow.sdk.exceptions import AirflowFailException

from ..pipeline.records import ChunkResult
from ..secrets import redact
from .base import SETTING_ARGUMENTS, CtxPrecBaseOperator
from .segments import parse_segment_arg, segment_alerts
from .values import partition_value, public

__all__ = ["ContextualPrecisionFinalizeOperator", "ContextualPrecisionAlertOperator"]


class ContextualPrecisionFinalizeOperator(CtxPrecBaseOperator):
    """Aggregate the partition into its ``ctxprec_runs`` row; returns the RunSummary dict.

    ``chunk_results``: the mapped scoring task's output (``score.output``), optional.
    """

    template_fields: Sequence[str] = (*CtxPrecBaseOperator.template_fields, "chunk_results")
    lineage_outputs = ("ctxprec_scores", "ctxprec_failures", "ctxprec_runs")

    def __init__(self, *, chunk_results: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chunk_results = chunk_results

    def execute(self, context: Any) -> dict[str, Any]:
        from ..pipeline import finalize_run

        key = partition_value(self.partition_key)
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
        out = public(summary.to_dict())
        self.record_result(context, out, partition_key=key, config=config)
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
    ``on_failure_callback`` and notifiers run. Otherwise returns ``CheckResult.to_dict()``
    (``corrected``: the partition's label-corrected mean from ``label_set``, or None). With
    ``use_corrected`` (default ``CTXPREC_USE_CORRECTED``) ``min_mean`` compares the corrected mean.
    """

    template_fields: Sequence[str] = (
        *CtxPrecBaseOperator.template_fields,
        "min_mean",
        "min_pass_rate",
        "min_drop",
        "max_failure_rate",
        "by",
        "use_corrected",
        "label_set",
    )
    lineage_inputs = ("ctxprec_scores", "ctxprec_runs")  # the check reads the scores, writes nothing
    lineage_outputs = ()
    setting_arguments = {
        **SETTING_ARGUMENTS,
        **{
            name: name
            for name in ("min_mean", "min_pass_rate", "min_drop", "max_failure_rate", "use_corrected", "label_set")
        },
    }

    def __init__(
        self,
        *,
        by: list[str] | str | None = None,
        min_mean: float | str | None = None,
        min_pass_rate: float | str | None = None,
        min_drop: float | str | None = None,
        max_failure_rate: float | str | None = None,
        fail_on: Literal["any", "error"] = "any",
        use_corrected: bool | str | None = None,
        label_set: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.min_mean = min_mean
        self.min_pass_rate = min_pass_rate
        self.min_drop = min_drop
        self.max_failure_rate = max_failure_rate
        self.fail_on = fail_on
        #: segment columns whose values are checked too (default: ``segments``, else CTXPREC_SEGMENTS)
        self.by = by
        self.use_corrected = use_corrected
        self.label_set = label_set

    def execute(self, context: Any) -> dict[str, Any]:
        from ..monitoring import check_partition

        key = partition_value(self.partition_key)
        metric = self._metric()
        settings = self.resolved_settings()
        hook = self._warehouse_hook()
        try:
            engine = hook.get_engine()
        except ValueError as exc:
            raise AirflowFailException(redact(str(exc))) from None
        result = self._call(
            check_partition,
            engine,
            key,
            metric=metric,
            source_table=self._source_table_name(metric, settings),
            mapping=self._recorded_mapping(settings, metric),
            min_mean=settings.min_mean,
            min_pass_rate=settings.min_pass_rate,
            min_drop=settings.min_drop,
            alpha=settings.alpha,
            baseline_partitions=settings.baseline_partitions,
            volume_ratio=settings.volume_ratio,
            max_failure_rate=settings.max_failure_rate,
            use_corrected=settings.use_corrected,
            label_set=settings.label_set,
        )
        summary = redact(result.summary())
        for line in summary.splitlines():
            self.log.info("%s", line)
        by = parse_segment_arg(self.by, "by") or parse_segment_arg(self.segments) or list(settings.segments)
        result.alerts.extend(segment_alerts(self._call, self.log, engine, key, metric, result, by))
        self.leave_notice(context, result)
        failing = result.alerts if self.fail_on == "any" else result.errors
        if failing:
            rules = ", ".join(sorted({a.rule for a in failing}))
            messages = "; ".join(redact(a.message) for a in failing)
            raise AirflowFailException(f"ctxprec alert on {key} ({metric}): {rules}: {messages}")
        return result.to_dict()

    def leave_notice(self, context: Any, result: Any) -> None:
        """Leave the check's notice in XCom (``ctxprec_notice``) for the notifiers of this task."""
        from ..monitoring.notice import notice_from_check
        from .notifiers import NOTICE_XCOM_KEY

        ti = context.get("ti") if hasattr(context, "get") else None
        if ti is not None:
            ti.xcom_push(key=NOTICE_XCOM_KEY, value=notice_from_check(result, source="airflow").to_dict())
