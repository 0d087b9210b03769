"""The nightly schedule: at 00:00 UTC, score the day that just ended (yesterday's partition).

``build_schedule_from_partitioned_job`` targets the last *complete* daily partition, so the run
started at 2026-11-29 00:00 UTC scores ``2026-11-28`` (as the Airflow DAG's ``{{ ds }}``).
The schedule starts stopped (Dagster's default); turn it on in the UI or with
``CTXPREC_SCHEDULE_RUNNING=1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dagster import DefaultScheduleStatus, ScheduleDefinition, build_schedule_from_partitioned_job

from ctxprec_ops.config import Settings

if TYPE_CHECKING:  # what an asset job's schedule is until Definitions resolves it (not exported by dagster)
    from dagster._core.definitions.partitions.partitioned_schedule import (
        UnresolvedPartitionedAssetScheduleDefinition,
    )

__all__ = ["build_nightly_schedule"]


def build_nightly_schedule(
    job: Any, settings: Settings | None = None
) -> ScheduleDefinition | UnresolvedPartitionedAssetScheduleDefinition:
    running = (settings or Settings.from_env()).schedule_running
    return build_schedule_from_partitioned_job(
        job,
        name="contextual_precision_nightly",
        description="Nightly: score yesterday's (UTC) logs for every metric.",
        hour_of_day=0,
        minute_of_hour=0,
        default_status=DefaultScheduleStatus.RUNNING if running else DefaultScheduleStatus.STOPPED,
    )
