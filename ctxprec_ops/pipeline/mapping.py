"""The column mapping as part of what identifies a score: ``mapping_id``, a short stable fingerprint.

A score is the judge's verdict on what the configured columns held: ``retrieval_context`` pointed
at another column of the same table is another measurement, even though every id, table, judge
and prompt stay the same. The fingerprint goes into ``ScoringKey.mapping`` and the ``mapping``
column of ``ctxprec_scores``, ``ctxprec_failures``, ``ctxprec_runs`` and ``ctxprec_segments``
(part of their primary keys): a changed mapping re-scores every row (the judgment cache answers
only nodes whose judge input — judge, prompt, question, expected output, node text — is identical,
``judge.cache.judgment_key``), and its scores never mix with those of the former mapping; back to
the former mapping, the former scores are found again.

What it covers: every logical column of the metric's column set (``ColumnSet``: ``id``,
``event_time``, the texts, the label columns) whose configured name differs from its default,
and for a spans source the trace options (convention, stage, reference attribute, gold and
documents tables), all of which shape what is judged. Canonical form: the sorted JSON of those
entries; the value is the first ``MAPPING_LENGTH`` (16) hex digits of its sha256. The default
mapping of a flat table is ``default`` (readable in dashboards, and what migrated rows without a
configured mapping get). Names are compared as configured: ``Contexts`` and ``contexts`` give two
fingerprints even where the warehouse folds case (a re-score answered by the judgment cache, never
a wrong reuse).

The segment columns are not in it: they do not change what the judge sees, so a score of the
same judge input stays the same measurement, and adding a segment keeps the trend's history.
They are part of a score's identity through ``ctxprec_segments.segment_columns``: a row whose
segment row records other columns is scored again (``pipeline.intake``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..warehouse.migrate import DEFAULT_MAPPING, MAPPING_LENGTH
from .columns import ColumnSet

if TYPE_CHECKING:
    from ..traces.options import TraceOptions
    from .config import PipelineConfig

__all__ = ["DEFAULT_MAPPING", "mapping_id", "mapping_of", "mapping_spec"]


def mapping_spec(columns: ColumnSet, trace: TraceOptions | None = None) -> dict[str, Any]:
    """The canonical mapping the fingerprint hashes: ``{"columns": {logical: column, ...}}`` of
    the columns mapped away from their default, plus ``"trace"`` for a spans source ({}: the
    default mapping of a flat table)."""
    default = type(columns)()
    changed = {k: v for k, v in sorted(columns.as_dict().items()) if getattr(default, k) != v}
    spec: dict[str, Any] = {}
    if changed:
        spec["columns"] = changed
    if trace is not None:
        spec["trace"] = {k: v for k, v in sorted(asdict(trace).items()) if v is not None}
    return spec


def mapping_id(columns: ColumnSet, trace: TraceOptions | None = None) -> str:
    """The fingerprint of a column mapping: ``default``, or 16 hex digits of the sha256 of
    ``mapping_spec`` as compact sorted JSON (stable across processes and versions)."""
    spec = mapping_spec(columns, trace)
    if not spec:
        return DEFAULT_MAPPING
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:MAPPING_LENGTH]


def mapping_of(config: PipelineConfig) -> str:
    """The fingerprint of the mapping a run of ``config`` reads its table with."""
    return mapping_id(config.source_columns, config.trace_options)
