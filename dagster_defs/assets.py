"""The scores assets: one daily partition = one ``score_partition`` call, as in ``ctxprec score``.

Each asset reads its log table itself (the table is upstream only for lineage) and writes
``ctxprec_scores`` / ``ctxprec_failures`` / ``ctxprec_runs``; nothing goes through an IO manager.

Outcome of a partition run (``RunSummary.status``):
- ``failed`` (rows exist but the judge scored none of them) or an exception (warehouse down,
  judge outage): the step fails and the ``RetryPolicy`` retries it; a retry only pays for rows
  not yet scored (upserts + judgment cache);
- misconfiguration (bad table/column name, unknown judge, invalid URL): fails at once, no retry;
- ``succeeded``; ``partial`` (some rows in ``ctxprec_failures``: bad input, or judge errors left
  after the per-request retries) and ``budget_exhausted`` (``max_cost`` reached): the
  materialization succeeds; ``status``, ``completed``, ``rows_failed`` and ``failures_by_type``
  say what happened, the ``volume`` check warns when too many rows failed, and the next run of
  the partition picks the failed rows up again.
"""

import traceback

from dagster import (
    AssetExecutionContext,
    Failure,
    MaterializeResult,
    MetadataValue,
    PartitionsDefinition,
    RetryPolicy,
    asset,
)

from ctxprec_ops.pipeline import PipelineConfig, RunSummary, score_partition
from ctxprec_ops.secrets import redact, register_secret
from ctxprec_ops.warehouse.source import SourceTableError

from .metadata import summary_metadata
from .partitions import daily_partitions
from .policies import one_partition_per_run, scoring_retry_policy
from .progress import RunLogProgress
from .resources import AlertThresholdsResource, JudgeResource, WarehouseResource
from .sources import GROUP, SOURCE_FOR_METRIC

__all__ = [
    "METRICS",
    "HARD_FAILURE_STATUSES",
    "build_pipeline_config",
    "build_scores_asset",
    "contextual_precision_scores",
    "turn_contextual_precision_scores",
]

METRICS = ("contextual_precision", "turn_contextual_precision")
#: run statuses that fail the step (and so trigger the RetryPolicy)
HARD_FAILURE_STATUSES = frozenset({"failed"})
#: errors a retry cannot fix (bad identifiers, judge or URL settings, a missing source table): fail at once
_NOT_RETRYABLE = (ValueError, TypeError, SourceTableError)

_DESCRIPTIONS = {
    "contextual_precision": "Contextual precision of every retrieval logged that day (UTC), judged by the LLM judge; "
    "rows in ctxprec_scores (metric = contextual_precision).",
    "turn_contextual_precision": "Turn contextual precision of every conversation logged that day (UTC); "
    "rows in ctxprec_scores (metric = turn_contextual_precision).",
}


def build_pipeline_config(
    metric: str, warehouse: WarehouseResource, judge: JudgeResource, thresholds: AlertThresholdsResource
) -> PipelineConfig:
    """The same ``PipelineConfig`` the CLI builds, from the Dagster resources."""
    register_secret(judge.api_key)  # redact() now masks it wherever it shows up
    return PipelineConfig(
        warehouse=warehouse.url,
        metric=metric,  # type: ignore[arg-type]
        judge=judge.model,
        judge_base_url=judge.base_url,
        judge_api_key=judge.api_key,
        judge_timeout=judge.timeout,
        source_table=warehouse.table_for(metric),
        threshold=thresholds.threshold,
        chunk_size=judge.chunk_size,
        concurrency=judge.concurrency,
        max_cost=judge.max_cost,
        max_retries=judge.max_retries,
        max_rpm=judge.max_rpm,
        max_tpm=judge.max_tpm,
        outage_tolerance=judge.outage_tolerance,
    )


def _attempt_run_id(context: AssetExecutionContext) -> str:
    """``ctxprec_runs.run_id``: the Dagster run id, suffixed by the retry number on a retry."""
    return context.run_id if context.retry_number == 0 else f"{context.run_id}.retry{context.retry_number}"


def _failure(exc: BaseException, metric: str, partition_key: str) -> Failure:
    """A Dagster Failure whose text is redacted; the original exception is not chained (its
    message could carry a secret), its redacted traceback is kept in the failure metadata."""
    retryable = not isinstance(exc, _NOT_RETRYABLE)
    return Failure(
        description=redact(f"{metric} {partition_key}: {type(exc).__name__}: {exc}"),
        metadata={
            "error_type": getattr(exc, "error_type", type(exc).__name__),
            "retryable": retryable,
            "traceback": MetadataValue.text(redact(traceback.format_exc())),
        },
        allow_retries=retryable,
    )


def build_scores_asset(
    metric: str,
    *,
    partitions_def: PartitionsDefinition = daily_partitions,
    retry_policy: RetryPolicy | None = None,
):
    """The daily-partitioned scores asset of ``metric`` (``<metric>_scores``)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(METRICS)}")

    @asset(
        name=f"{metric}_scores",
        description=_DESCRIPTIONS[metric],
        partitions_def=partitions_def,
        deps=[SOURCE_FOR_METRIC[metric]],
        retry_policy=retry_policy or scoring_retry_policy(),
        backfill_policy=one_partition_per_run,
        pool="ctxprec_judge",
        group_name=GROUP,
        kinds={"python", "sql"},
        metadata={"table": "ctxprec_scores", "metric": metric},
    )
    def _scores(
        context: AssetExecutionContext,
        warehouse: WarehouseResource,
        judge: JudgeResource,
        thresholds: AlertThresholdsResource,
    ) -> MaterializeResult:
        partition_key = context.partition_key
        try:
            config = build_pipeline_config(metric, warehouse, judge, thresholds)
            context.log.info(
                f"scoring {metric} {partition_key} from {warehouse.display_url()} table {config.table_name} "
                f"with judge {judge.model} (attempt {context.retry_number + 1})"
            )
            summary: RunSummary = score_partition(
                config, partition_key, run_id=_attempt_run_id(context), progress=RunLogProgress(context.log)
            )
        except Exception as exc:  # noqa: BLE001 - re-raised as a redacted Failure
            raise _failure(exc, metric, partition_key) from None

        metadata = summary_metadata(
            summary, {"warehouse": warehouse.display_url(), "source_table": config.table_name}
        )
        if summary.status in HARD_FAILURE_STATUSES:
            raise Failure(
                description=f"{metric} {partition_key}: run {summary.status}: "
                f"{summary.rows_failed} of {summary.rows_total} rows could not be scored",
                metadata=metadata,
                allow_retries=True,
            )
        if summary.rows_failed:
            by_type = ", ".join(f"{k}: {v}" for k, v in sorted(summary.failures_by_type.items()))
            context.log.warning(
                f"{summary.rows_failed} of {summary.rows_total} rows went to ctxprec_failures ({by_type}); "
                + ("bad input is fixed at the source" if summary.completed else "re-materialize to retry them")
            )
        mean = f"{summary.mean_score:.3f}" if summary.mean_score is not None else "n/a"
        rate = f"{summary.pass_rate:.1%}" if summary.pass_rate is not None else "n/a"
        context.log.info(
            f"{metric} {partition_key}: {summary.status}, {summary.rows_scored}/{summary.rows_total} scored, "
            f"mean {mean}, pass rate {rate}"
        )
        return MaterializeResult(metadata=metadata)

    return _scores


contextual_precision_scores = build_scores_asset("contextual_precision")
turn_contextual_precision_scores = build_scores_asset("turn_contextual_precision")
