"""A partition run's summary as Dagster materialization metadata.

Numbers are typed ``MetadataValue.int``/``float`` so Dagster plots them across partitions; a
figure the run could not compute (e.g. the mean of an empty day) is ``null``, never a fake 0.
Nothing secret goes in here: the warehouse URL is shown with its password masked.
"""

from collections.abc import Mapping
from typing import Any

from dagster import MetadataValue

from ctxprec_ops.pipeline import RunSummary

__all__ = ["INT_FIELDS", "FLOAT_FIELDS", "TEXT_FIELDS", "summary_metadata"]

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
    return md
