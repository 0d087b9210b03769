"""Trend monitoring: per-partition figures, alert rules, delivery sinks and the HTML report.

Entry points: ``check_partition`` (one partition -> ``CheckResult``), ``load_trend`` (recent
partitions -> DataFrame), ``format_trend_table`` (rich table), ``render_report`` (HTML file),
``deliver`` with the sinks of ``sinks`` (log, webhook, e-mail); per segment column
``check_segments`` / ``segment_trend`` (-> ``SegmentCheck``) and ``compare`` (-> ``Comparison``);
the trust tools ``sample_labels`` (a labelling sheet of rows drawn at random),
``corrected_estimate`` (a partition's label-corrected mean) and ``audit_position`` /
``estimate_position_audit`` (the judge's position-bias audit).

Names are imported lazily (PEP 562): an orchestrator step that only runs a check does not pay
for the report's or the trend's imports.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "Alert": "alerts",
    "AlertRules": "rules",
    "RegressionTest": "alerts",
    "CheckResult": "check",
    "DEFAULT_METRIC": "check",
    "check_partition": "check",
    "Population": "population",
    "render_report": "report",
    "deliver": "sinks",
    "alert_sinks": "sinks",
    "LogSink": "sinks",
    "WebhookSink": "sinks",
    "EmailSink": "sinks",
    "SmtpSettings": "sinks",
    "check_segments": "segments",
    "segment_trend": "segments",
    "SegmentCheck": "segments",
    "compare": "compare",
    "Comparison": "compare",
    "load_trend": "trend",
    "trend_results": "trend",
    "format_trend_table": "trend",
    "corrected_estimate": "corrected",
    "sample_labels": "label_sample",
    "audit_position": "position_audit",
    "estimate_position_audit": "position_audit",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, {k: f".{v}" for k, v in _EXPORTS.items()})
