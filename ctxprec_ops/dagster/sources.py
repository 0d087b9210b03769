"""The log tables the production RAG system writes: upstream of the scores, for lineage only.

They are external ``AssetSpec``s (Dagster never materializes or loads them): each scores asset
reads its table itself through the warehouse resource, so it can be materialized alone.
"""

from dagster import AssetSpec

from ctxprec_ops.pipeline.kinds import MetricKind

__all__ = ["GROUP", "log_table_spec"]

GROUP = "ctxprec"


def log_table_spec(kind: MetricKind) -> AssetSpec:
    """The ``AssetSpec`` of the log table ``kind`` reads (keyed by its default table name)."""
    return AssetSpec(
        kind.default_table,
        description=f"Logs of the production RAG system that {kind.title} is computed from, written outside "
        f"Dagster. Table name: {kind.table_env}; column mapping: {kind.columns_env}.",
        group_name=GROUP,
        kinds={"sql"},
    )
