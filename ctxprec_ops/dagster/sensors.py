"""Alert sensors: post the ctxprec alert JSON — the payload of ``ctxprec_ops.monitoring.notice``, the
one the Airflow notifier and ``ctxprec check``'s webhook sink send — when a scoring run fails or a
check fails.

- ``ctxprec_run_failure_alert`` (a ``run_failure_sensor``): a run that materialized a scores asset
  failed (a judge outage after the retries, a misconfiguration, a blocking ``threshold`` check):
  ``event="run_failed"``, with the run's failed checks as its alerts.
- ``ctxprec_check_failure_alert`` (a ``run_status_sensor`` on success): a run succeeded but some of
  its checks failed (``regression`` / ``volume`` warnings, a non-blocking ``threshold``):
  ``event="check_failed"``, one alert per failed check.

The webhook URL is in ``CTXPREC_ALERT_WEBHOOK`` (a setting: ``ctxprec_ops.config.Settings``), or
in the variable ``webhook_env`` names (read as a Dagster ``EnvVar``), read at each tick; it is a
secret: never logged, never in the message. A 5xx answer is retried; a delivery that still fails
fails the sensor tick. Both sensors start stopped unless that variable is set when the code
location loads.
"""

from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterRunStatus,
    DefaultSensorStatus,
    EnvVar,
    RunFailureSensorContext,
    RunStatusSensorContext,
    SensorDefinition,
    SkipReason,
    run_failure_sensor,
    run_status_sensor,
)

from ctxprec_ops.config import Settings
from ctxprec_ops.monitoring.notice import AlertNotice, webhook_payload
from ctxprec_ops.monitoring.sinks import WebhookSink
from ctxprec_ops.secrets import redact

from .checks import CHECK_KINDS

__all__ = ["WEBHOOK_ENV", "build_alert_sensors", "failed_checks", "run_notice"]

WEBHOOK_ENV = Settings.variable("alert_webhook")


def _webhook(webhook_env: str) -> str | None:
    """The webhook URL: the ``alert_webhook`` setting, or the variable ``webhook_env`` names."""
    if webhook_env == WEBHOOK_ENV:
        return Settings.from_env().alert_webhook
    return EnvVar(webhook_env).get_value() or None


def failed_checks(instance: Any, run_id: str) -> list[dict[str, Any]]:
    """The ctxprec checks that failed in a run, as notice alerts."""
    out = []
    for record in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION):
        ev = record.dagster_event.event_specific_data
        if ev.passed or ev.check_name not in CHECK_KINDS:
            continue
        out.append(
            {
                "rule": ev.check_name,
                "severity": "error" if ev.severity.value == "ERROR" else "warn",
                "message": redact(ev.description or ""),
                "asset": ev.asset_key.to_user_string(),
                "partition_key": ev.partition,
            }
        )
    return out


def _metric(asset_keys: Sequence[str]) -> str | None:
    names = sorted({k.removesuffix("_scores") for k in asset_keys})
    return names[0] if len(names) == 1 else None


def run_notice(context: RunStatusSensorContext, event: str, *, failure: str | None = None) -> AlertNotice | None:
    """The notice of a finished run (None when it holds nothing to report)."""
    run = context.dagster_run
    alerts = failed_checks(context.instance, run.run_id)
    if event == "check_failed" and not alerts:
        return None
    partition = run.tags.get("dagster/partition")
    assets = sorted(k.to_user_string() for k in (run.asset_selection or []))
    assets = assets or sorted({a["asset"] for a in alerts})
    metric = _metric(assets) if assets else None
    if event == "run_failed":
        title = f"[ctxprec] FAILED dagster run {run.run_id[:8]} ({run.job_name}) {partition or ''}".rstrip()
    else:
        names = ", ".join(sorted({a["rule"] for a in alerts}))
        title = f"[ctxprec] CHECK FAILED {partition or ''} {metric or ''}: {len(alerts)} check(s) ({names})"
    lines = [f"{a['asset']} {a['rule']} [{a['severity']}]: {a['message']}" for a in alerts]
    summary = "\n".join(([redact(failure)] if failure else []) + lines)
    return AlertNotice(
        source="dagster",
        event=event,
        title=redact(" ".join(title.split())),
        summary=summary,
        partition_key=partition,
        metric=metric,
        alerts=alerts,
        details={"run_id": run.run_id, "job_name": run.job_name, "assets": ", ".join(assets) or None},
    )


def _post(notice: AlertNotice, webhook_env: str) -> SkipReason | None:
    target = _webhook(webhook_env)
    if not target:
        return SkipReason(f"{webhook_env} is not set: nothing posted")
    WebhookSink(target).post(webhook_payload(notice))
    return None


def _ours(context: RunStatusSensorContext, asset_keys: set[AssetKey]) -> bool:
    selection = set(context.dagster_run.asset_selection or [])
    return bool(selection & asset_keys) if selection else True


def build_alert_sensors(
    scores_keys: Sequence[AssetKey], *, webhook_env: str = WEBHOOK_ENV, prefix: str = "ctxprec"
) -> list[SensorDefinition]:
    """The two alert sensors (``<prefix>_run_failure_alert``, ``<prefix>_check_failure_alert``) for runs
    that materialize ``scores_keys`` (see the module doc)."""
    keys = set(scores_keys)
    running = bool(_webhook(webhook_env))
    status = DefaultSensorStatus.RUNNING if running else DefaultSensorStatus.STOPPED

    @run_failure_sensor(
        name=f"{prefix}_run_failure_alert",
        default_status=status,
        description="Posts the ctxprec alert JSON to CTXPREC_ALERT_WEBHOOK when a scoring run fails.",
    )
    def _run_failed(context: RunFailureSensorContext) -> SkipReason | None:
        if not _ours(context, keys):
            return SkipReason("not a ctxprec scoring run")
        message = context.failure_event.message if context.failure_event else None
        notice = run_notice(context, "run_failed", failure=message)
        assert notice is not None
        return _post(notice, webhook_env)

    @run_status_sensor(
        name=f"{prefix}_check_failure_alert",
        run_status=DagsterRunStatus.SUCCESS,
        default_status=status,
        description="Posts the ctxprec alert JSON to CTXPREC_ALERT_WEBHOOK when a check of a scores asset fails.",
    )
    def _check_failed(context: RunStatusSensorContext) -> SkipReason | None:
        if not _ours(context, keys):
            return SkipReason("not a ctxprec scoring run")
        notice = run_notice(context, "check_failed")
        if notice is None:
            return SkipReason("every check passed")
        return _post(notice, webhook_env)

    return [_run_failed, _check_failed]
