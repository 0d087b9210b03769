"""Nightly turn contextual precision of yesterday's conversations (``conversation_logs``).

A DAG of its own (same shape as ``contextual_precision_nightly``) so that each log family
fails, alerts, retries and backfills independently. See docs/airflow.md.
"""

from ctxprec_ops.airflow import nightly_dag

dag = nightly_dag(
    "turn_contextual_precision_nightly",
    metric="turn_contextual_precision",
    doc_md=__doc__,
)
