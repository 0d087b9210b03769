"""The asset job the nightly schedule and backfills launch: both scores assets and their checks."""

from dagster import AssetSelection, define_asset_job

from .assets import contextual_precision_scores, turn_contextual_precision_scores

__all__ = ["score_partition_job"]

#: one run = one day (the assets' daily partitions); checks on the selected assets run too
score_partition_job = define_asset_job(
    name="contextual_precision_job",
    selection=AssetSelection.assets(contextual_precision_scores, turn_contextual_precision_scores),
    description="Score one day of retrieval and conversation logs, then run the threshold, "
    "regression and volume checks.",
    tags={"ctxprec/entry_point": "dagster"},
)
