"""The threshold / regression / volume checks of every scores asset, partitioned like it."""

from ctxprec_ops.dagster import build_score_checks
from ctxprec_ops.pipeline.kinds import METRIC_KINDS

from .assets import scores_assets

score_checks = [build_score_checks(scores_assets[name], name) for name in METRIC_KINDS]
