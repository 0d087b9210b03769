"""Asset checks of every scores partition, from the monitoring rules (``check_partition``).

Per scores asset, three checks run after each partition is materialized:

- ``threshold`` (severity ERROR): mean below ``CTXPREC_MIN_MEAN`` or pass rate below
  ``CTXPREC_MIN_PASS_RATE``. Blocking unless ``CTXPREC_BLOCKING_CHECKS=0``: a breach fails the run
  (so run-failure sensors and alerts fire) and stops anything downstream of the scores.
- ``regression`` (WARN): the mean dropped significantly below the trailing baseline
  (more than ``min_drop`` and one-sided Welch's t-test p < ``alpha``).
- ``volume`` (WARN): far fewer rows than the baseline's median, or too many failed rows.

One ``multi_asset_check`` per asset loads the history once and answers all three; each check's
metadata carries the figures it judged and its partition. The checks are partitioned like their
asset: each result belongs to one day (the asset's partition page shows them day by day). Where the
check names segments (alerts with a ``segment``, once the run has ``segments``), the result lists
them in its description and in the ``segments`` metadata.
"""

import warnings
from collections.abc import Mapping
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetsDefinition,
    MetadataValue,
    PartitionsDefinition,
    multi_asset_check,
)

from ctxprec_ops.config import Settings
from ctxprec_ops.monitoring.check import CheckResult, check_partition

from .partitions import build_daily_partitions
from .resources import AlertThresholdsResource, WarehouseResource

__all__ = ["CHECK_KINDS", "build_score_checks", "check_metadata", "segment_lines"]

#: check name -> (severity when it fails, what it checks). The spec's description names the rule,
#: never an outcome: Dagster shows it next to a failed result too (the result's own description
#: says what was found).
CHECK_KINDS: dict[str, tuple[AssetCheckSeverity, str]] = {
    "threshold": (
        AssetCheckSeverity.ERROR,
        "Fails when the partition mean / pass rate is below CTXPREC_MIN_MEAN / CTXPREC_MIN_PASS_RATE.",
    ),
    "regression": (
        AssetCheckSeverity.WARN,
        "Fails when the mean drops significantly below the trailing baseline (previous scored partitions, "
        "regressed ones left out).",
    ),
    "volume": (
        AssetCheckSeverity.WARN,
        "Fails when rows fall below half the baseline's median or too many rows failed (max_failure_rate).",
    ),
}


def _num(value: Any) -> MetadataValue:
    if value is None:
        return MetadataValue.null()
    if isinstance(value, bool):
        return MetadataValue.bool(value)
    if isinstance(value, int):
        return MetadataValue.int(value)
    return MetadataValue.float(float(value))


def check_metadata(result: CheckResult, kind: str) -> dict[str, MetadataValue]:
    """The figures one check judged, typed so Dagster can plot them."""
    fig, base = result.figures, result.baseline
    s, b = fig.summary, base.summary
    md: dict[str, MetadataValue] = {
        "mean_score": _num(s.mean),
        "pass_rate": _num(s.pass_rate),
        "scored_cases": _num(s.n),
    }
    if kind == "threshold":
        md["min_mean"] = _num(result.rules.min_mean)
        md["min_pass_rate"] = _num(result.rules.min_pass_rate)
        md["ci_low"] = _num(s.ci_low)
        md["ci_high"] = _num(s.ci_high)
        md["use_corrected"] = MetadataValue.bool(result.rules.use_corrected)
        c = result.corrected
        if c is not None:
            md["corrected_mean"] = _num(c.mean)
            md["corrected_ci_low"] = _num(c.ci_low)
            md["corrected_ci_high"] = _num(c.ci_high)
            md["labelled_rows"] = _num(c.labelled_rows)
    elif kind == "regression":
        md["baseline_mean"] = _num(b.mean)
        md["baseline_cases"] = _num(b.n)
        md["baseline_partitions"] = MetadataValue.text(", ".join(base.partitions) or "none")
        md["baseline_excluded"] = MetadataValue.text(", ".join(base.excluded) or "none")
        md["baseline_not_yet_scored"] = MetadataValue.text(", ".join(base.missing) or "none")
        md["drop"] = _num(result.regression.drop)
        md["p_value"] = _num(result.regression.p_value)
        md["min_drop"] = _num(result.rules.min_drop)
        md["alpha"] = _num(result.rules.alpha)
        md["verdict"] = MetadataValue.text(result.regression.verdict)
    elif kind == "volume":
        md["rows"] = _num(fig.rows)
        md["rows_failed"] = _num(fig.rows_failed)
        md["failure_rate"] = _num(fig.failure_rate)
        md["baseline_median_rows"] = _num(base.median_rows)
        md["volume_ratio"] = _num(result.rules.volume_ratio)
        md["max_failure_rate"] = _num(result.rules.max_failure_rate)
    if result.population is not None:
        md["judge_model"] = MetadataValue.text(str(result.population.judge_model))
        md["prompt_version"] = MetadataValue.text(str(result.population.prompt_version))
    return md


def _description(result: CheckResult, kind: str) -> str:
    fired = result.alerts_of(kind)
    if kind == "regression":
        text = (
            "\n".join(a.message for a in fired)
            if fired
            else f"{result.regression.verdict}: {result.regression.detail}".rstrip(": ")
        )
        if result.baseline.missing:  # a backfill runs days concurrently: say what the baseline lacks
            text += f"\nbaseline incomplete: {', '.join(result.baseline.missing)} not yet scored"
        return text
    if fired:
        return "\n".join(a.message for a in fired)
    if kind == "threshold" and result.rules.min_mean is None and result.rules.min_pass_rate is None:
        return "no threshold configured (CTXPREC_MIN_MEAN / CTXPREC_MIN_PASS_RATE unset)"
    return result.headline()


def _add_segment_alerts(context: AssetCheckExecutionContext, result: CheckResult, warehouse: WarehouseResource) -> None:
    """Each segment column's values checked too (``check_segments``: per-segment rules, regression
    p-values Holm-corrected): their alerts join the partition's, each message naming its segment
    (``tenant=globex (120 rows): ...``), so the regression / threshold / volume check fails on them."""
    if not warehouse.segments or result.population is None:
        return
    from ctxprec_ops.monitoring.segment_data import SegmentError
    from ctxprec_ops.monitoring.segments import check_segments

    pop = result.population
    for col in warehouse.segments:
        try:
            seg = check_segments(
                warehouse.url, result.partition_key, col, metric=result.metric, rules=result.rules,
                judge_model=pop.judge_model, prompt_version=pop.prompt_version, source_table=pop.source_table,
                mapping=pop.mapping,
            )  # fmt: skip
        except SegmentError as exc:  # not recorded (yet) for this population: say so, check the rest
            context.log.warning(str(exc))
            continue
        context.log.info(seg.summary())
        result.alerts.extend(seg.alerts)
        few = seg.too_few_line()
        if few:
            result.notes.append(f"{col}: {few}")


def segment_lines(result: CheckResult, kind: str) -> list[str]:
    """``segment <value>: <message>`` for each alert of ``kind`` that names a segment (the hook for
    segment-aware checks: an alert without a ``segment`` attribute names none)."""
    named = [(getattr(a, "segment", None), a.message) for a in result.alerts_of(kind)]
    return [f"segment {segment}: {message}" for segment, message in named if segment not in (None, "")]


def build_score_checks(
    scores_asset: AssetsDefinition,
    metric: str,
    *,
    partitions_def: PartitionsDefinition | None = None,
    blocking: bool | None = None,
    resource_keys: Mapping[str, str] | None = None,
    name: str | None = None,
) -> AssetChecksDefinition:
    """The threshold / regression / volume checks of one scores asset (``blocking`` default:
    ``CTXPREC_BLOCKING_CHECKS``; ``resource_keys``: ``warehouse`` / ``thresholds`` -> resource keys)."""
    keys = {"warehouse": "warehouse", "thresholds": "thresholds", **(resource_keys or {})}
    blocking = Settings.from_env().blocking_checks if blocking is None else blocking
    partitions_def = partitions_def or build_daily_partitions()
    with warnings.catch_warnings():  # partitioned check specs are a Dagster "preview" feature
        warnings.simplefilter("ignore")
        specs = [
            AssetCheckSpec(
                name,
                asset=scores_asset,
                description=about,
                blocking=blocking and severity == AssetCheckSeverity.ERROR,
                partitions_def=partitions_def,
            )
            for name, (severity, about) in CHECK_KINDS.items()
        ]

    @multi_asset_check(
        name=name or f"{metric}_score_checks",
        specs=specs,
        can_subset=True,
        description=f"Threshold, regression and volume rules on each {metric} partition.",
        required_resource_keys={keys["warehouse"], keys["thresholds"]},
    )
    def _checks(context: AssetCheckExecutionContext):
        warehouse: WarehouseResource = getattr(context.resources, keys["warehouse"])
        thresholds: AlertThresholdsResource = getattr(context.resources, keys["thresholds"])
        partition_key = context.partition_key
        result = check_partition(
            warehouse.checked_url(),
            partition_key,
            metric=metric,
            source_table=warehouse.recorded_table_for(metric),
            mapping=warehouse.recorded_mapping_for(metric),
            **thresholds.rule_kwargs(),
        )
        context.log.info(result.summary())
        _add_segment_alerts(context, result, warehouse)
        for key in sorted(context.selected_asset_check_keys, key=lambda k: k.name):
            severity, _ = CHECK_KINDS[key.name]
            metadata = {**check_metadata(result, key.name), "partition_key": MetadataValue.text(partition_key)}
            description = _description(result, key.name)
            segments = segment_lines(result, key.name)
            if segments:  # the alerts' messages (the description) name their segments already
                metadata["segments"] = MetadataValue.text("\n".join(segments))
            yield AssetCheckResult(
                asset_key=key.asset_key,
                check_name=key.name,
                passed=not result.alerts_of(key.name),
                severity=severity,
                metadata=metadata,
                description=description,
            )

    return _checks
