"""Declarative automation of the scores assets: an ``AutomationCondition`` (and optionally a
``FreshnessPolicy``) chosen by configuration, and the sensor that evaluates them.

``CTXPREC_DAGSTER_AUTOMATION`` says when a scores asset is requested:

- ``eager`` (default): when its source table reports new data (a materialization or observation
  of ``retrieval_logs`` / ``conversation_logs``); the latest day is scored.
- ``cron``: once after each tick of ``CTXPREC_DAGSTER_AUTOMATION_CRON`` (default ``0 0 * * *``,
  UTC), the latest day, whether or not the source reported anything (the schedule, as a condition).
- ``on_cron``: after each cron tick, once the source has reported new data since it (Dagster's
  ``AutomationCondition.on_cron``).
- ``none``: never by automation (the schedule and manual runs only).

``CTXPREC_DAGSTER_FRESHNESS_HOURS`` (unset: none): a ``FreshnessPolicy.time_window`` — the asset
is flagged when its last materialization is older than that many hours (warned an hour before).

Nothing runs until the automation sensor ``ctxprec_automation`` runs: it starts stopped (like the
nightly schedule) unless ``CTXPREC_AUTOMATION_RUNNING`` is true. Turn it on in the UI under
*Automation*. Each of these settings is declared once, in ``ctxprec_ops.config.Settings``.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dagster import (
    AssetsDefinition,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
    FreshnessPolicy,
)

from ctxprec_ops.config import Settings

__all__ = [
    "AUTOMATION_KINDS",
    "AutomationSettings",
    "automation_condition",
    "freshness_policy",
    "build_automation_sensor",
]

AUTOMATION_KINDS = Settings.choices("dagster_automation")
#: field of ``AutomationSettings`` -> the setting it is
_SETTINGS = {
    "kind": "dagster_automation",
    "cron": "dagster_automation_cron",
    "freshness_hours": "dagster_freshness_hours",
    "sensor_running": "automation_running",
}


@dataclass(frozen=True)
class AutomationSettings:
    """How the scores assets are automated (the Component's ``automation:`` block, or the
    settings: ``from_settings``); the defaults and bounds are the settings'."""

    kind: str = Settings.default("dagster_automation")
    cron: str = Settings.default("dagster_automation_cron")
    timezone: str = "UTC"
    freshness_hours: float | None = Settings.default("dagster_freshness_hours")
    sensor_running: bool = Settings.default("automation_running")

    def __post_init__(self) -> None:
        for name, setting in _SETTINGS.items():
            bounds = Settings.bounds(setting)
            if bounds is not None:
                bounds.check(name, getattr(self, name))

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> "AutomationSettings":
        """The automation ``settings`` (default: the environment's) configure."""
        s = settings or Settings.from_env()
        return cls(**{name: getattr(s, setting) for name, setting in _SETTINGS.items()})


def automation_condition(settings: AutomationSettings | None = None) -> AutomationCondition | None:
    """The scores assets' condition (None for ``none``)."""
    s = settings or AutomationSettings.from_settings()
    if s.kind == "none":
        return None
    if s.kind == "eager":
        return AutomationCondition.eager()
    if s.kind == "on_cron":
        return AutomationCondition.on_cron(s.cron, s.timezone)
    ac: Any = AutomationCondition  # (dagster's condition generics trip the type checker)
    condition: Any = (
        ac.in_latest_time_window() & ac.cron_tick_passed(s.cron, s.timezone).since_last_handled() & ~ac.in_progress()
    )
    return condition.with_label(f"latest day after each {s.cron} tick")


def freshness_policy(settings: AutomationSettings | None = None) -> FreshnessPolicy | None:
    s = settings or AutomationSettings.from_settings()
    if s.freshness_hours is None:
        return None
    fail = timedelta(hours=s.freshness_hours)
    return FreshnessPolicy.time_window(fail_window=fail, warn_window=fail - timedelta(hours=1))


def build_automation_sensor(
    assets: list[AssetsDefinition], settings: AutomationSettings | None = None, name: str = "ctxprec_automation"
) -> AutomationConditionSensorDefinition:
    """The sensor that evaluates the scores assets' conditions (stopped unless ``sensor_running``)."""
    s = settings or AutomationSettings.from_settings()
    return AutomationConditionSensorDefinition(
        name,
        target=assets,
        default_status=DefaultSensorStatus.RUNNING if s.sensor_running else DefaultSensorStatus.STOPPED,
        description=f"Declarative automation of the ctxprec scores assets ({s.kind}).",
    )
