"""Dagster 1.13 integration (``pip install "ctxprec-ops[dagster]"``): resources, the scores-asset
and asset-check builders, partitions, policies, automation, the job, the nightly schedule, the alert
sensors, and ``ContextualPrecisionComponent`` (the evaluation declared in a project's defs.yaml).

The core package never imports Dagster; only this subpackage does. ``dagster_defs`` composes
these into ``defs`` (one scores asset per metric kind of ``ctxprec_ops.pipeline.kinds``).
"""

from .assets import apply_decision, build_pipeline_config, build_scores_asset
from .automation import AutomationSettings, automation_condition, build_automation_sensor, freshness_policy
from .checks import CHECK_KINDS, build_score_checks
from .component import ContextualPrecisionComponent
from .jobs import build_score_job
from .partitions import build_daily_partitions
from .policies import scoring_retry_policy
from .resources import AlertThresholdsResource, JudgeResource, WarehouseResource, resources_for
from .schedules import build_nightly_schedule
from .sensors import build_alert_sensors
from .sources import log_table_spec

__all__ = [
    "AlertThresholdsResource",
    "JudgeResource",
    "WarehouseResource",
    "resources_for",
    "build_scores_asset",
    "build_pipeline_config",
    "apply_decision",
    "build_score_checks",
    "CHECK_KINDS",
    "build_score_job",
    "build_nightly_schedule",
    "build_daily_partitions",
    "scoring_retry_policy",
    "log_table_spec",
    "AutomationSettings",
    "automation_condition",
    "freshness_policy",
    "build_automation_sensor",
    "build_alert_sensors",
    "ContextualPrecisionComponent",
]
