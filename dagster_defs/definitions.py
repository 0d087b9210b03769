"""Compose the Dagster definitions: one scores asset (with its checks) per metric kind, the
log tables for lineage, the job and the nightly schedule; the resource set per deployment
comes from ``CTXPREC_DEPLOYMENT`` (``local``: SQLite by default; ``production``: the warehouse
URL and judge key required from the environment). The judge is ``CTXPREC_JUDGE`` in both.
"""

from dagster import Definitions

from ctxprec_ops.config import Settings
from ctxprec_ops.dagster import (
    build_nightly_schedule,
    build_score_checks,
    build_score_job,
    build_scores_asset,
    log_table_spec,
    resources_for,
)
from ctxprec_ops.pipeline.kinds import METRIC_KINDS

settings = Settings.from_env()
# one spec per log table (several kinds may read the same table)
log_tables = list({kind.default_table: log_table_spec(kind) for kind in METRIC_KINDS.values()}.values())
scores_assets = {name: build_scores_asset(name) for name in METRIC_KINDS}
score_checks = [build_score_checks(scores_assets[name], name) for name in METRIC_KINDS]
# the nightly job: kinds that are not nightly (labels: opt-in) are materialized on demand
score_job = build_score_job([scores_assets[name] for name, kind in METRIC_KINDS.items() if kind.nightly])

defs = Definitions(
    assets=[*log_tables, *scores_assets.values()],
    asset_checks=score_checks,
    jobs=[score_job],
    schedules=[build_nightly_schedule(score_job, settings)],
    resources=resources_for(settings=settings),
)
