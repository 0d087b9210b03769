"""The assets: one external log table per source (lineage only) and one scores asset per metric kind.
The nightly kinds carry the automation condition ``CTXPREC_DAGSTER_AUTOMATION`` picks (default
``eager``: score the latest day when the log table reports new data); the opt-in label kind has none."""

from ctxprec_ops.dagster import build_scores_asset, log_table_spec
from ctxprec_ops.pipeline.kinds import METRIC_KINDS

# one spec per log table (several kinds may read the same table)
log_tables = list({kind.default_table: log_table_spec(kind) for kind in METRIC_KINDS.values()}.values())
scores_assets = {
    name: build_scores_asset(name) if kind.nightly else build_scores_asset(name, automation=None)
    for name, kind in METRIC_KINDS.items()
}
