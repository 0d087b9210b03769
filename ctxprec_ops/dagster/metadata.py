"""A partition run's summary as Dagster materialization metadata, and the scores table's schema
and column lineage as Dagster renders them.

Numbers are typed ``MetadataValue.int``/``float`` so Dagster plots them across partitions (``cost``
is the judge spend in USD); a figure the run could not compute (e.g. the mean of an empty day) is
``null``, never a fake 0. ``dagster/row_count`` is the rows scored, ``summary`` a markdown table,
``dagster/column_lineage`` maps each ``ctxprec_scores`` column to the source columns it comes from
(through the run's column mapping); the asset's definition carries ``dagster/column_schema``.
Nothing secret goes in here: the warehouse URL is shown with its password masked.
"""

from collections.abc import Mapping
from typing import Any

from dagster import AssetKey, MetadataValue, TableColumn, TableColumnDep, TableColumnLineage, TableSchema

from ctxprec_ops.pipeline import RunSummary
from ctxprec_ops.pipeline.kinds import MetricKind

__all__ = [
    "INT_FIELDS",
    "FLOAT_FIELDS",
    "TEXT_FIELDS",
    "SCORES_SCHEMA",
    "summary_metadata",
    "summary_markdown",
    "column_lineage",
    "definition_metadata",
    "corrected_metadata",
]

#: the public columns of ctxprec_scores (never renamed)
SCORES_SCHEMA = TableSchema(
    columns=[
        TableColumn("log_id", "text", description="id of the source row"),
        TableColumn("partition_key", "text", description="UTC day of event_time, YYYY-MM-DD"),
        TableColumn("metric", "text"),
        TableColumn("score", "double precision", description="contextual precision, unrounded; NULL when failed"),
        TableColumn("success", "boolean", description="score >= threshold"),
        TableColumn("threshold", "double precision"),
        TableColumn("verdicts", "json", description="per node: {node, relevant, reason}"),
        TableColumn("reason", "text"),
        TableColumn("judge_model", "text"),
        TableColumn("prompt_version", "text"),
        TableColumn("prompt_tokens", "integer"),
        TableColumn("completion_tokens", "integer"),
        TableColumn("cost", "double precision", description="judge spend, USD"),
        TableColumn("run_id", "text"),
        TableColumn("scored_at", "timestamp"),
    ]
)
_JUDGED = ("score", "success", "verdicts", "reason")

INT_FIELDS = (
    "rows_total",
    "rows_scored",
    "rows_cached",
    "rows_failed",
    "prompt_tokens",
    "completion_tokens",
    "judge_calls",
)
FLOAT_FIELDS = ("mean_score", "median_score", "pass_rate", "ci_low", "ci_high", "cost")
TEXT_FIELDS = ("status", "judge_model", "prompt_version", "run_id")


def _number(value: Any, kind: type) -> MetadataValue:  # None -> null: Dagster plots skip it
    if value is None:
        return MetadataValue.null()
    return MetadataValue.int(int(value)) if kind is int else MetadataValue.float(float(value))


def summary_metadata(summary: RunSummary, extra: Mapping[str, Any] | None = None) -> dict[str, MetadataValue]:
    """Typed metadata for one ``RunSummary`` (plus ``extra`` text entries)."""
    md: dict[str, MetadataValue] = {}
    for name in INT_FIELDS:
        md[name] = _number(getattr(summary, name), int)
    for name in FLOAT_FIELDS:
        md[name] = _number(getattr(summary, name), float)
    for name in TEXT_FIELDS:
        value = getattr(summary, name)
        md[name] = MetadataValue.text(str(value)) if value is not None else MetadataValue.null()
    md["completed"] = MetadataValue.bool(summary.completed)
    if summary.failures_by_type:
        md["failures_by_type"] = MetadataValue.json(dict(summary.failures_by_type))
    if summary.error_message:
        md["error_message"] = MetadataValue.text(summary.error_message)
    if summary.started_at and summary.finished_at:
        md["duration_seconds"] = MetadataValue.float((summary.finished_at - summary.started_at).total_seconds())
    for key, value in (extra or {}).items():
        md[key] = MetadataValue.text(str(value))
    md["dagster/row_count"] = MetadataValue.int(int(summary.rows_scored or 0))
    md["summary"] = MetadataValue.md(summary_markdown(summary))
    return md


def _fmt(value: Any, pattern: str = "{}") -> str:
    return "n/a" if value is None else pattern.format(value)


def corrected_metadata(estimate: Any) -> dict[str, MetadataValue]:
    """The label-corrected mean of the partition (``monitoring.corrected.corrected_estimate``):
    ``corrected_mean`` with ``corrected_ci_low`` / ``corrected_ci_high`` (null with too few
    labelled rows) and ``labelled_rows``; nothing when no row is labelled."""
    if estimate is None:
        return {}
    return {
        "corrected_mean": _number(estimate.mean, float),
        "corrected_ci_low": _number(estimate.ci_low, float),
        "corrected_ci_high": _number(estimate.ci_high, float),
        "labelled_rows": MetadataValue.int(int(estimate.labelled_rows)),
        "corrected_method": MetadataValue.text(estimate.describe()),
    }


def summary_markdown(summary: RunSummary, corrected: Any = None) -> str:
    """A short markdown table of the run (the materialization's ``summary``; ``corrected``: the
    partition's label-corrected estimate, a row of its own)."""
    rows = [
        ("status", _fmt(summary.status)),
        ("rows scored / total", f"{summary.rows_scored} / {summary.rows_total}"),
        ("rows failed", _fmt(summary.rows_failed)),
        ("mean score", _fmt(summary.mean_score, "{:.3f}")),
        ("pass rate", _fmt(summary.pass_rate, "{:.1%}")),
        ("95% CI", "n/a" if summary.ci_low is None else f"{summary.ci_low:.3f} - {summary.ci_high:.3f}"),
        *([("corrected mean (labels)", corrected.describe())] if corrected is not None else []),
        ("judge", f"{summary.judge_model} ({summary.prompt_version})"),
        ("judge cost", _fmt(summary.cost, "${:.4f}")),
    ]
    if summary.failures_by_type:
        rows.append(("failures", ", ".join(f"{k}: {v}" for k, v in sorted(summary.failures_by_type.items()))))
    lines = [f"**{summary.partition_key}** {summary.metric}", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def column_lineage(
    kind: MetricKind, mapping: Mapping[str, str] | None = None, source: AssetKey | None = None
) -> TableColumnLineage:
    """Each ``ctxprec_scores`` column -> the columns of ``source`` (default: the kind's log table)
    it is computed from (``mapping``: logical name -> column, as the run reads them)."""
    columns = kind.columns.from_mapping(mapping).as_dict()
    source = source or AssetKey(kind.default_table)

    def deps(*logical: str) -> list[TableColumnDep]:
        return [TableColumnDep(asset_key=source, column_name=columns[n]) for n in logical]

    judged = [n for n in columns if n not in ("id", "event_time")]
    return TableColumnLineage(
        deps_by_column={
            "log_id": deps("id"),
            "partition_key": deps("event_time"),
            **{name: deps(*judged) for name in _JUDGED},
        }
    )


def definition_metadata(kind: MetricKind) -> dict[str, Any]:
    """The scores asset's definition metadata: table, metric, the table's column schema."""
    return {"table": "ctxprec_scores", "metric": kind.name, "dagster/column_schema": SCORES_SCHEMA}
