"""The log tables the production RAG system writes: upstream of the scores, for lineage only.

They are external ``AssetSpec``s (Dagster never materializes or loads them): each scores asset
reads its table itself through the warehouse resource, so it can be materialized alone.
"""

from dagster import AssetSpec

from ctxprec_ops.pipeline.kinds import MetricKind

__all__ = ["GROUP", "log_table_spec"]

GROUP = "ctxprec"


def log_table_spec(kind: MetricKind, key: str | None = None, group_name: str = GROUP) -> AssetSpec:
    """The ``AssetSpec`` of the log table ``kind`` reads (keyed by ``key``, default its default
    table name). A loader that writes the table reports it (a materialization or observation of
    this key), which is what the ``eager`` automation condition waits for."""
    return AssetSpec(
        key or kind.default_table,
        description=f"Logs of the production RAG system that {kind.title} is computed from, written outside "
        f"Dagster. Table name: {kind.table_env}; column mapping: {kind.columns_env}.",
        group_name=group_name,
        kinds={"sql"},
    )
