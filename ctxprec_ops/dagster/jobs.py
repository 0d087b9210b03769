"""The asset job the nightly schedule and backfills launch: the scores assets and their checks."""

from collections.abc import Sequence
from typing import Any

from dagster import AssetsDefinition, AssetSelection, define_asset_job

__all__ = ["build_score_job"]


def build_score_job(scores_assets: Sequence[AssetsDefinition]) -> Any:  # dagster's unresolved job (not public)
    """One run = one day (the assets' daily partitions); checks on the selected assets run too."""
    return define_asset_job(
        name="contextual_precision_job",
        selection=AssetSelection.assets(*scores_assets),
        description="Score one day of logs for every metric, then run the threshold, regression and volume checks.",
        tags={"ctxprec/entry_point": "dagster"},
    )
