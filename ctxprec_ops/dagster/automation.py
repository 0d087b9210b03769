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
nightly schedule) unless ``CTXPREC_AUTOMATION_RUNNING=1``. Turn it on in the UI under *Automation*.
"""

import os
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

__all__ = [
    "AUTOMATION_KINDS",
    "AutomationSettings",
    "automation_condition",
    "freshness_policy",
    "build_automation_sensor",
]

AUTOMATION_KINDS = ("eager", "cron", "on_cron", "none")
_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class AutomationSettings:
    """How the scores assets are automated (the Component's ``automation:`` block, or the environment)."""

    kind: str = "eager"
    cron: str = "0 0 * * *"
    timezone: str = "UTC"
    freshness_hours: float | None = None
    sensor_running: bool = False

    def __post_init__(self) -> None:
        if self.kind not in AUTOMATION_KINDS:
            raise ValueError(f"automation must be one of {', '.join(AUTOMATION_KINDS)}, got {self.kind!r}")
        if self.freshness_hours is not None and self.freshness_hours <= 1:
            raise ValueError(f"freshness_hours must be more than 1, got {self.freshness_hours!r}")

    @classmethod
    def from_env(cls) -> "AutomationSettings":
        hours = os.environ.get("CTXPREC_DAGSTER_FRESHNESS_HOURS", "").strip()
        try:
            freshness = float(hours) if hours else None
        except ValueError:
            raise ValueError(f"CTXPREC_DAGSTER_FRESHNESS_HOURS must be a number of hours, got {hours!r}") from None
        return cls(
            kind=os.environ.get("CTXPREC_DAGSTER_AUTOMATION", "eager").strip().lower() or "eager",
            cron=os.environ.get("CTXPREC_DAGSTER_AUTOMATION_CRON", "0 0 * * *").strip() or "0 0 * * *",
            freshness_hours=freshness,
            sensor_running=os.environ.get("CTXPREC_AUTOMATION_RUNNING", "").strip().lower() in _TRUE,
        )


def automation_condition(settings: AutomationSettings | None = None) -> AutomationCondition | None:
    """The scores assets' condition (None for ``none``)."""
    s = settings or AutomationSettings.from_env()
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
    s = settings or AutomationSettings.from_env()
    if s.freshness_hours is None:
        return None
    fail = timedelta(hours=s.freshness_hours)
    return FreshnessPolicy.time_window(fail_window=fail, warn_window=fail - timedelta(hours=1))


def build_automation_sensor(
    assets: list[AssetsDefinition], settings: AutomationSettings | None = None, name: str = "ctxprec_automation"
) -> AutomationConditionSensorDefinition:
    """The sensor that evaluates the scores assets' conditions (stopped unless ``sensor_running``)."""
    s = settings or AutomationSettings.from_env()
    return AutomationConditionSensorDefinition(
        name,
        target=assets,
        default_status=DefaultSensorStatus.RUNNING if s.sensor_running else DefaultSensorStatus.STOPPED,
        description=f"Declarative automation of the ctxprec scores assets ({s.kind}).",
    )
