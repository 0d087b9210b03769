"""The log tables the production RAG system writes: upstream of the scores, for lineage only.

They are external ``AssetSpec``s (Dagster never materializes or loads them): each scores asset
reads its table itself through the warehouse resource, so it can be materialized alone.
"""

from dagster import AssetSpec

__all__ = ["retrieval_logs", "conversation_logs", "SOURCE_FOR_METRIC"]

GROUP = "ctxprec"

retrieval_logs = AssetSpec(
    "retrieval_logs",
    description="Retrieval logs of the production RAG system (one row per retrieval), written outside Dagster. "
    "Table name: CTXPREC_SOURCE_TABLE.",
    group_name=GROUP,
    kinds={"sql"},
)

conversation_logs = AssetSpec(
    "conversation_logs",
    description="Multi-turn conversation logs with per-turn retrieval context, written outside Dagster. "
    "Table name: CTXPREC_CONVERSATION_TABLE.",
    group_name=GROUP,
    kinds={"sql"},
)

SOURCE_FOR_METRIC = {
    "contextual_precision": retrieval_logs,
    "turn_contextual_precision": conversation_logs,
}
