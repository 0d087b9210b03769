"""Compose the Dagster definitions (each part in its own module, as Dagster's example projects do):
``assets`` (log tables, one scores asset per metric kind), ``checks``, ``schedules`` (the job and
the nightly schedule), ``sensors`` (automation, alerts) and ``resources`` (per ``CTXPREC_DEPLOYMENT``).
"""

from dagster import Definitions

from .assets import log_tables, scores_assets
from .checks import score_checks
from .resources import resources
from .schedules import nightly_schedule, score_job
from .sensors import alert_sensors, automation_sensor

__all__ = ["defs", "log_tables", "scores_assets", "score_checks", "score_job"]

defs = Definitions(
    assets=[*log_tables, *scores_assets.values()],
    asset_checks=score_checks,
    jobs=[score_job],
    schedules=[nightly_schedule],
    sensors=[automation_sensor, *alert_sensors],
    resources=resources,
)
