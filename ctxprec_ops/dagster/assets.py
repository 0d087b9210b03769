"""The scores asset builder: one daily partition = one ``score_partition`` call, as ``ctxprec score``.

Each asset reads its log table itself (the table is upstream only for lineage) and writes
``ctxprec_scores`` / ``ctxprec_failures`` / ``ctxprec_runs``; nothing goes through an IO manager.

Automation (``automation.py``: an ``AutomationCondition`` / ``FreshnessPolicy`` chosen by
configuration), resource keys, the asset key and the upstream source key are arguments, so the
``ContextualPrecisionComponent`` and ``dagster_defs`` build the same asset.

The outcome of a partition run is decided by ``ctxprec_ops.pipeline.outcome`` — the same
decision the CLI's exit code and the Airflow operators take: ``done`` materializes; ``retry``
(judge failures left after the per-request retries, an outage, the warehouse unreachable) fails
the step with ``allow_retries=True`` so the asset's ``RetryPolicy`` retries it, and a retry only
pays for rows not yet scored; ``fail`` (misconfiguration, bad names, a missing table,
``max_cost`` reached) fails at once, without retry.
"""

import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AutomationCondition,
    EnvVar,
    Failure,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    PartitionsDefinition,
    RetryPolicy,
    asset,
)

from ctxprec_ops.pipeline import PipelineConfig, RunSummary, score_partition
from ctxprec_ops.pipeline.kinds import metric_kind
from ctxprec_ops.pipeline.outcome import Decision, Outcome, decide, decide_error
from ctxprec_ops.secrets import redact, redact_url, register_secret

from .automation import automation_condition, freshness_policy
from .metadata import column_lineage, corrected_metadata, definition_metadata, summary_markdown, summary_metadata
from .partitions import build_daily_partitions
from .policies import scoring_retry_policy
from .progress import RunLogProgress
from .resources import AlertThresholdsResource, JudgeResource, WarehouseResource, resource_settings
from .sources import GROUP

__all__ = ["RESOURCE_KEYS", "apply_decision", "build_pipeline_config", "build_scores_asset"]

#: role -> resource key the scores asset and its checks use by default
RESOURCE_KEYS = {"warehouse": "warehouse", "judge": "judge", "thresholds": "thresholds"}
_UNSET: Any = object()


def build_pipeline_config(
    metric: str,
    warehouse: WarehouseResource,
    judge: JudgeResource,
    thresholds: AlertThresholdsResource,
    segments: Sequence[str] | None = None,
) -> PipelineConfig:
    """The ``PipelineConfig`` of a materialization, resolved as the CLI resolves its own: the
    settings the resources hold (``CTXPREC_*`` for what they leave unset; a component's own
    ``segments`` first), checked against the declaration."""
    # a resource built outside a run still holds EnvVar("NAME"), a string that is the variable's
    # name: its value is the key (the name is no secret, and masking it would hide it in errors)
    key = judge.api_key.get_value() if isinstance(judge.api_key, EnvVar) else judge.api_key
    register_secret(key)  # redact() now masks it wherever it shows up
    settings = resource_settings(warehouse, judge, thresholds, segments=list(segments) if segments else None)
    return settings.pipeline_config(metric=metric, judge_api_key=key)


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


def _segment_metadata(
    config: PipelineConfig, summary: RunSummary, partition_key: str, context: AssetExecutionContext
) -> dict[str, MetadataValue]:
    """Per-segment means of the partition: ``segments/<col>`` (a table as JSON) and one float
    ``mean[<col>=<value>]`` per value (at most 20 per column), so Dagster plots each segment."""
    if not config.segments or summary.judge_model is None or summary.prompt_version is None:
        return {}
    from ctxprec_ops.monitoring.population import Population
    from ctxprec_ops.monitoring.segment_data import partition_segment_means
    from ctxprec_ops.pipeline.context import source_table_name
    from ctxprec_ops.warehouse.engine import get_engine

    pop = Population.of(
        config.metric, summary.judge_model, summary.prompt_version,
        source_table_name(config.table_name, config.source_schema),
    )  # fmt: skip
    try:
        engine = config.warehouse if not isinstance(config.warehouse, str) else get_engine(config.warehouse)
        means = partition_segment_means(engine, pop, partition_key, config.segments)
    except Exception as exc:  # metadata is a bonus: never fail a materialization over it
        context.log.warning(f"per-segment means not recorded: {type(exc).__name__}: {redact(str(exc))[:200]}")
        return {}
    md: dict[str, MetadataValue] = {}
    for col, items in means.items():
        md[f"segments/{col}"] = MetadataValue.json(items)
        for item in items[:20]:
            md[f"mean[{col}={item['label']}]"] = MetadataValue.float(float(item["mean"]))
    return md


def _corrected_metadata(
    config: PipelineConfig, summary: RunSummary, partition_key: str, context: AssetExecutionContext, label_set: str
) -> dict[str, MetadataValue]:
    """The partition's label-corrected mean (``corrected_mean``, its CI, ``labelled_rows``) when
    rows of it are labelled in ``label_set``; the ``summary`` table gets a row for it too."""
    if summary.judge_model is None or summary.prompt_version is None or not summary.rows_scored:
        return {}
    from ctxprec_ops.monitoring.corrected import CORRECTABLE, corrected_estimate
    from ctxprec_ops.pipeline.context import source_table_name
    from ctxprec_ops.pipeline.mapping import mapping_of
    from ctxprec_ops.warehouse.engine import get_engine

    if config.metric not in CORRECTABLE:
        return {}
    try:
        engine = config.warehouse if not isinstance(config.warehouse, str) else get_engine(config.warehouse)
        table = source_table_name(config.table_name, config.source_schema)
        est = corrected_estimate(
            engine, partition_key, metric=config.metric, judge_model=summary.judge_model,
            prompt_version=summary.prompt_version, source_table=table, mapping=mapping_of(config), label_set=label_set,
        )  # fmt: skip
    except Exception as exc:  # metadata is a bonus: never fail a materialization over it
        context.log.warning(f"corrected mean not recorded: {type(exc).__name__}: {redact(str(exc))[:200]}")
        return {}
    if est is None:
        return {}
    context.log.info(f"{config.metric} {partition_key} labels: {est.describe()}")
    md = corrected_metadata(est)
    md["summary"] = MetadataValue.md(summary_markdown(summary, est))
    return md


def build_scores_asset(
    metric: str,
    *,
    partitions_def: PartitionsDefinition | None = None,
    retry_policy: RetryPolicy | None = None,
    name: str | None = None,
    source_key: AssetKey | str | None = None,
    resource_keys: Mapping[str, str] | None = None,
    segments: Sequence[str] | None = None,
    automation: AutomationCondition | None = _UNSET,
    freshness: FreshnessPolicy | None = _UNSET,
    group_name: str = GROUP,
) -> AssetsDefinition:
    """The daily-partitioned scores asset of ``metric`` (key ``<metric>_scores`` unless ``name``).

    ``automation`` / ``freshness`` default to ``CTXPREC_DAGSTER_AUTOMATION`` /
    ``CTXPREC_DAGSTER_FRESHNESS_HOURS``; ``resource_keys`` maps ``warehouse`` / ``judge`` /
    ``thresholds`` to other resource keys; ``source_key`` is the upstream log table (lineage)."""
    kind = metric_kind(metric)
    keys = {**RESOURCE_KEYS, **(resource_keys or {})}
    source = AssetKey.from_coercible(source_key or kind.default_table)

    @asset(
        name=name or f"{kind.name}_scores",
        description=f"{kind.description} Rows in ctxprec_scores (metric = {kind.name}).",
        partitions_def=partitions_def or build_daily_partitions(),
        deps=[source],
        retry_policy=retry_policy or scoring_retry_policy(),
        # no backfill_policy (a beta parameter that warns on every load): Dagster's default for an
        # asset without one is already one run per partition
        pool="ctxprec_judge",
        group_name=group_name,
        kinds={"python", "sql"},
        metadata=definition_metadata(kind),
        automation_condition=automation_condition() if automation is _UNSET else automation,
        freshness_policy=freshness_policy() if freshness is _UNSET else freshness,
        required_resource_keys=set(keys.values()),
    )
    def _scores(context: AssetExecutionContext) -> MaterializeResult:
        warehouse: WarehouseResource = getattr(context.resources, keys["warehouse"])
        judge: JudgeResource = getattr(context.resources, keys["judge"])
        thresholds: AlertThresholdsResource = getattr(context.resources, keys["thresholds"])
        partition_key = context.partition_key
        try:
            warehouse.checked_url()  # a SQLite file that does not exist: an error, never a new empty file
            config = build_pipeline_config(kind.name, warehouse, judge, thresholds, segments)
            at = f" at {redact_url(config.judge_base_url)}" if config.judge_base_url else ""
            context.log.info(
                f"scoring {kind.name} {partition_key} from {warehouse.display_url()} table {config.table_name} "
                f"with judge {config.judge}{at} (attempt {context.retry_number + 1})"
            )
            summary: RunSummary = score_partition(
                config, partition_key, run_id=_attempt_run_id(context), progress=RunLogProgress(context.log)
            )
        except Exception as exc:  # re-raised as a redacted Failure, retried or not by the policy
            raise _error_failure(exc, kind.name, partition_key) from None

        metadata: dict[str, Any] = summary_metadata(
            summary, {"warehouse": warehouse.display_url(), "source_table": config.table_name}
        )
        metadata["dagster/column_lineage"] = column_lineage(kind, warehouse.columns_for(kind.name), source)
        metadata.update(_segment_metadata(config, summary, partition_key, context))
        metadata.update(_corrected_metadata(config, summary, partition_key, context, thresholds.label_set))
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
