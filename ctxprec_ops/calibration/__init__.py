"""Judge calibration against labelled data: ``ctxprec calibrate``.

- ``labels``: read node labels (``log_id,node,relevant``; node = 1-based rank) from a CSV file;
- ``stats``: agreement figures (verdict precision / recall / F1 / Cohen's κ, per-case score MAE
  and Spearman ρ against label-based scores) with case-level bootstrap CIs — pure math;
- ``table``: the ``ctxprec_calibrations`` table (one row per judge model, prompt version and
  label set);
- ``run``: ``calibrate()`` runs the judge(s) on the labelled cases and stores the figures;
- ``label_table``: ``ctxprec_labels``, node labels imported from files (``import_labels``) and
  read back as a ``LabelSet`` (``read_label_set``); ``label_sheet``: the labelling sheet (CSV /
  HTML) of ``ctxprec labels sample``;
- ``correction``: the label-corrected mean (``difference_estimate``, ``CorrectedEstimate``);
- ``audit`` / ``audit_table``: the position-bias audit of a judge and ``ctxprec_audits``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .audit import PositionAudit
    from .correction import CorrectedEstimate, difference_estimate
    from .label_table import ImportReport, import_labels, read_label_set
    from .labels import LabelSet, parse_labels, read_labels
    from .run import CalibrationResult, calibrate
    from .stats import Agreement, Estimate, agreement

#: public name -> its module (imported on first use, ``ctxprec_ops._lazy``)
_EXPORTS = {
    "LabelSet": ".labels",
    "parse_labels": ".labels",
    "read_labels": ".labels",
    "CalibrationResult": ".run",
    "calibrate": ".run",
    "Agreement": ".stats",
    "Estimate": ".stats",
    "agreement": ".stats",
    "ImportReport": ".label_table",
    "import_labels": ".label_table",
    "read_label_set": ".label_table",
    "CorrectedEstimate": ".correction",
    "difference_estimate": ".correction",
    "PositionAudit": ".audit",
}

__all__ = [
    "LabelSet",
    "parse_labels",
    "read_labels",
    "Agreement",
    "Estimate",
    "agreement",
    "CalibrationResult",
    "calibrate",
    "ImportReport",
    "import_labels",
    "read_label_set",
    "CorrectedEstimate",
    "difference_estimate",
    "PositionAudit",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
