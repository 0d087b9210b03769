"""The daily partitions every scores asset shares: UTC days of ``event_time`` from CTXPREC_START_DATE."""

from dagster import DailyPartitionsDefinition

from ctxprec_ops.config import Settings

__all__ = ["build_daily_partitions"]


def build_daily_partitions(start_date: str | None = None) -> DailyPartitionsDefinition:
    """Daily UTC partitions keyed ``YYYY-MM-DD``; a day's partition exists once that day has ended."""
    return DailyPartitionsDefinition(
        start_date=start_date or Settings.from_env().start_date, timezone="UTC", fmt="%Y-%m-%d"
    )
