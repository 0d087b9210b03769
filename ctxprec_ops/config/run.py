"""``Settings`` -> ``PipelineConfig``: the one way every face builds a run's configuration.

Each run setting (a ``Settings`` field declared with ``_run``) goes to its ``PipelineConfig`` field
by name; the input table and column mapping follow the metric's kind (and the source format); the
other metrics' configured tables and mappings go in too (``legacy_sources`` / ``legacy_mappings``:
what output rows written before those were recorded are taken to come from). So the resolved
``PipelineConfig`` is the whole truth about the run: nothing below reads the environment.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, Any

from ..pipeline.columns import ColumnSet, merge_columns
from ..pipeline.config import PipelineConfig
from ..pipeline.formats import SPAN_FORMATS, reads_spans
from ..pipeline.formats import recorded_source as _recorded
from ..pipeline.kinds import DEFAULT_METRIC, METRIC_KINDS, MetricKind, metric_kind
from ..pipeline.mapping import DEFAULT_MAPPING

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["pipeline_config", "recorded_source", "SPAN_ONLY"]

#: ``PipelineConfig`` fields that apply to a spans table only (a flat table's run refuses them)
SPAN_ONLY = ("stage", "expected_attribute", "gold_table", "documents_table")


def _run_values(s: Settings) -> dict[str, Any]:
    """``{PipelineConfig field: value}`` of every run setting."""
    out = {}
    for name in type(s).model_fields:
        run = type(s).extra(name).get("run")
        if run is not None:
            out[run] = getattr(s, name)
    return out


def pipeline_config(s: Settings, *, _legacy: bool = True, **overrides: Any) -> PipelineConfig:
    """See ``Settings.pipeline_config``."""
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(given) - {f.name for f in fields(PipelineConfig)}
    if unknown:
        raise TypeError(f"unknown pipeline settings: {', '.join(sorted(unknown))}")
    kind = metric_kind(given.get("metric", DEFAULT_METRIC))
    # CTXPREC_SOURCE_FORMAT configures the metrics that can read spans (single-turn, judged);
    # the others keep reading their tables
    fmt = given.get("source_format") or (s.source_format if reads_spans(kind) else "rows")
    spans = fmt in SPAN_FORMATS
    columns = given.pop("columns", None)
    if not isinstance(columns, ColumnSet):
        mapped = s.span_columns if spans else getattr(s, kind.columns_setting)
        columns = merge_columns(mapped, columns) or None
    base = _run_values(s)
    if not spans:  # the environment's span settings apply to spans tables; a face's are refused here
        for name in SPAN_ONLY:
            if not s.is_override(name):
                base.pop(name)
    # Phoenix is the source when it is configured and no input table is (the faces' rule: a
    # table named by a flag, an argument or a variable wins; Phoenix is then only the write-back)
    phoenix = s.phoenix_url is not None and reads_spans(kind) and not _table_named(s, kind, given)
    base.update(
        judge=s.judge,
        judge_base_url=s.openai_base_url,
        metric=kind.name,
        source_table=None if phoenix else (s.span_table if spans else getattr(s, kind.table_setting)),
        phoenix_source=phoenix,
        columns=columns,
        segments=tuple(s.segments),
        source_format=fmt,
        label_set=s.label_set,  # a cascade's calibration reference, as for the corrected figures
    )
    if _legacy:
        base["legacy_sources"] = {name: getattr(s, k.table_setting) for name, k in METRIC_KINDS.items()}
        base["legacy_mappings"] = _legacy_mappings(s)
    base.update(given)
    return PipelineConfig(**base)


def _table_named(s: Settings, kind: MetricKind, given: dict[str, Any]) -> bool:
    """Whether an input table other than the default was named: by the face, or by a setting (the
    span table's or the metric kind's; a resource field holding the default names none)."""
    if "source_table" in given:
        return True
    fields = type(s).model_fields
    return any(s.is_set(n) and getattr(s, n) != fields[n].default for n in ("span_table", kind.table_setting))


def _legacy_mappings(s: Settings) -> dict[str, str]:
    """metric -> the fingerprint of the mapping it is configured with now."""
    from ..pipeline.mapping import mapping_of

    out = {}
    for name in METRIC_KINDS:
        try:
            out[name] = mapping_of(pipeline_config(s, metric=name, _legacy=False))
        except (TypeError, ValueError):  # a metric these settings cannot run: its rows keep the default
            out[name] = DEFAULT_MAPPING
    return out


def recorded_source(s: Settings, kind: MetricKind, source_table: str | None = None) -> str:
    """The ``source_table`` the scores of ``kind`` are recorded under: the configured input table
    (a spans table's, for its stage), or ``source_table``."""
    from ..pipeline.context import source_table_name

    if s.phoenix_url is not None and reads_spans(kind) and source_table is None and not _table_named(s, kind, {}):
        from ..traces.phoenix import staging_table

        return staging_table(s.phoenix_project)
    if s.source_format in SPAN_FORMATS and reads_spans(kind):
        return _recorded(source_table_name(source_table or s.span_table, None), s.stage)
    return source_table_name(source_table or getattr(s, kind.table_setting), None)
