"""The nightly schedule: at 00:00 UTC, score the day that just ended (yesterday's partition).

``build_schedule_from_partitioned_job`` targets the last *complete* daily partition, so the run
started at 2026-11-29 00:00 UTC scores ``2026-11-28`` (as the Airflow DAG's ``{{ ds }}``).
The schedule starts stopped (Dagster's default); turn it on in the UI or with
``CTXPREC_SCHEDULE_RUNNING=1``.
"""

import os

from dagster import DefaultScheduleStatus, build_schedule_from_partitioned_job

from .jobs import score_partition_job

__all__ = ["nightly_schedule"]

_running = (os.environ.get("CTXPREC_SCHEDULE_RUNNING") or "").strip().lower() in ("1", "true", "yes", "on")

nightly_schedule = build_schedule_from_partitioned_job(
    score_partition_job,
    name="contextual_precision_nightly",
    description="Nightly: score yesterday's (UTC) retrieval and conversation logs.",
    hour_of_day=0,
    minute_of_hour=0,
    default_status=DefaultScheduleStatus.RUNNING if _running else DefaultScheduleStatus.STOPPED,
)
