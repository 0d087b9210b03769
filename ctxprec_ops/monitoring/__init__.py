"""Trend monitoring: per-partition figures, alert rules, delivery sinks and the HTML report.

Entry points: ``check_partition`` (one partition -> ``CheckResult``), ``load_trend`` (recent
partitions -> DataFrame), ``format_trend_table`` (rich table), ``render_report`` (HTML file),
``deliver`` with the sinks of ``sinks`` (log, webhook, e-mail).
"""

from .alerts import Alert, AlertRules, RegressionTest
from .check import DEFAULT_METRIC, CheckResult, check_partition
from .history import Population
from .report import render_report
from .sinks import EmailSink, LogSink, SmtpSettings, WebhookSink, deliver, sinks_from_env
from .trend import format_trend_table, load_trend, trend_results

__all__ = [
    "Alert",
    "AlertRules",
    "RegressionTest",
    "CheckResult",
    "DEFAULT_METRIC",
    "Population",
    "check_partition",
    "load_trend",
    "trend_results",
    "format_trend_table",
    "render_report",
    "deliver",
    "sinks_from_env",
    "LogSink",
    "WebhookSink",
    "EmailSink",
    "SmtpSettings",
]
