"""The scores asset builder: one daily partition = one ``score_partition`` call, as ``ctxprec score``.

Each asset reads its log table itself (the table is upstream only for lineage) and writes
``ctxprec_scores`` / ``ctxprec_failures`` / ``ctxprec_runs``; nothing goes through an IO manager.

The outcome of a partition run is decided by ``ctxprec_ops.pipeline.outcome`` — the same
decision the CLI's exit code and the Airflow operators take: ``done`` materializes; ``retry``
(judge failures left after the per-request retries, an outage, the warehouse unreachable) fails
the step with ``allow_retries=True`` so the asset's ``RetryPolicy`` retries it, and a retry only
pays for rows not yet scored; ``fail`` (misconfiguration, bad names, a missing table,
``max_cost`` reached) fails at once, without retry.
"""

import traceback

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    PartitionsDefinition,
    RetryPolicy,
    asset,
)

from ctxprec_ops.pipeline import PipelineConfig, RunSummary, score_partition
from ctxprec_ops.pipeline.kinds import metric_kind
from ctxprec_ops.pipeline.outcome import Decision, Outcome, decide, decide_error
from ctxprec_ops.secrets import redact, register_secret

from .metadata import summary_metadata
from .partitions import build_daily_partitions
from .policies import scoring_retry_policy
from .progress import RunLogProgress
from .resources import AlertThresholdsResource, JudgeResource, WarehouseResource
from .sources import GROUP

__all__ = ["apply_decision", "build_pipeline_config", "build_scores_asset"]


def build_pipeline_config(
    metric: str, warehouse: WarehouseResource, judge: JudgeResource, thresholds: AlertThresholdsResource
) -> PipelineConfig:
    """The same ``PipelineConfig`` the CLI builds, from the Dagster resources."""
    register_secret(judge.api_key)  # redact() now masks it wherever it shows up
    return PipelineConfig(
        warehouse=warehouse.url,
        metric=metric,
        judge=judge.model,
        judge_base_url=judge.base_url,
        judge_api_key=judge.api_key,
        judge_timeout=judge.timeout,
        source_table=warehouse.table_for(metric),
        columns=warehouse.columns_for(metric) or None,
        threshold=thresholds.threshold,
        chunk_size=judge.chunk_size,
        concurrency=judge.concurrency,
        max_cost=judge.max_cost,
        max_retries=judge.max_retries,
        max_rpm=judge.max_rpm,
        max_tpm=judge.max_tpm,
        outage_tolerance=judge.outage_tolerance,
        sample_rate=judge.sample_rate,
        max_rows=judge.max_rows,
        judge_mode=judge.judge_mode,
        batch_poll_seconds=judge.batch_poll_seconds,
        judge_samples=judge.samples,
        **warehouse.traces_for(metric),
    )


def apply_decision(decision: Decision, metadata: dict | None = None) -> None:
    """The outcome policy in Dagster terms: ``done`` returns; ``retry`` and ``fail`` raise a
    ``Failure`` that the ``RetryPolicy`` may retry (``allow_retries``) or not."""
    if decision.outcome is Outcome.DONE:
        return
    raise Failure(description=decision.reason, metadata=metadata or {}, allow_retries=decision.outcome is Outcome.RETRY)


def _attempt_run_id(context: AssetExecutionContext) -> str:
    """``ctxprec_runs.run_id``: the Dagster run id, suffixed by the retry number on a retry."""
    run_id = context.run.run_id  # (context.run_id is deprecated)
    return run_id if context.retry_number == 0 else f"{run_id}.retry{context.retry_number}"


def _error_failure(exc: BaseException, metric: str, partition_key: str) -> Failure:
    """A redacted Failure for an error; the original exception is not chained (its message
    could carry a secret), its redacted traceback is kept in the failure metadata."""
    decision = decide_error(exc)
    return Failure(
        description=redact(f"{metric} {partition_key}: {decision.reason}"),
        metadata={
            "error_type": getattr(exc, "error_type", type(exc).__name__),
            "retryable": decision.retryable,
            "traceback": MetadataValue.text(redact(traceback.format_exc())),
        },
        allow_retries=decision.retryable,
    )


def build_scores_asset(
    metric: str,
    *,
    partitions_def: PartitionsDefinition | None = None,
    retry_policy: RetryPolicy | None = None,
) -> AssetsDefinition:
    """The daily-partitioned scores asset of ``metric`` (``<metric>_scores``)."""
    kind = metric_kind(metric)

    @asset(
        name=f"{kind.name}_scores",
        description=f"{kind.description} Rows in ctxprec_scores (metric = {kind.name}).",
        partitions_def=partitions_def or build_daily_partitions(),
        deps=[kind.default_table],
        retry_policy=retry_policy or scoring_retry_policy(),
        # no backfill_policy (a beta parameter that warns on every load): Dagster's default for an
        # asset without one is already one run per partition
        pool="ctxprec_judge",
        group_name=GROUP,
        kinds={"python", "sql"},
        metadata={"table": "ctxprec_scores", "metric": kind.name},
    )
    def _scores(
        context: AssetExecutionContext,
        warehouse: WarehouseResource,
        judge: JudgeResource,
        thresholds: AlertThresholdsResource,
    ) -> MaterializeResult:
        partition_key = context.partition_key
        try:
            config = build_pipeline_config(kind.name, warehouse, judge, thresholds)
            context.log.info(
                f"scoring {kind.name} {partition_key} from {warehouse.display_url()} table {config.table_name} "
                f"with judge {judge.model}{' at ' + judge.base_url if judge.base_url else ''} "
                f"(attempt {context.retry_number + 1})"
            )
            summary: RunSummary = score_partition(
                config, partition_key, run_id=_attempt_run_id(context), progress=RunLogProgress(context.log)
            )
        except Exception as exc:  # re-raised as a redacted Failure, retried or not by the policy
            raise _error_failure(exc, kind.name, partition_key) from None

        metadata = summary_metadata(summary, {"warehouse": warehouse.display_url(), "source_table": config.table_name})
        decision = decide(summary)
        if summary.rows_failed:
            by_type = ", ".join(f"{k}: {v}" for k, v in sorted(summary.failures_by_type.items()))
            context.log.warning(
                f"{summary.rows_failed} of {summary.rows_total} rows went to ctxprec_failures "
                f"({by_type}); {decision.outcome}: {decision.reason}"
            )
        apply_decision(decision, metadata)
        mean = f"{summary.mean_score:.3f}" if summary.mean_score is not None else "n/a"
        rate = f"{summary.pass_rate:.1%}" if summary.pass_rate is not None else "n/a"
        context.log.info(
            f"{kind.name} {partition_key}: {summary.status}, {summary.rows_scored}/{summary.rows_total} scored, "
            f"mean {mean}, pass rate {rate}, judge {summary.judge_model}"
        )
        return MaterializeResult(metadata=metadata)

    return _scores
