"""The nightly job and schedule: kinds that are not nightly (labels: opt-in) are materialized on demand."""

from ctxprec_ops.config import Settings
from ctxprec_ops.dagster import build_nightly_schedule, build_score_job
from ctxprec_ops.pipeline.kinds import METRIC_KINDS

from .assets import scores_assets

score_job = build_score_job([scores_assets[name] for name, kind in METRIC_KINDS.items() if kind.nightly])
nightly_schedule = build_nightly_schedule(score_job, Settings.from_env())
