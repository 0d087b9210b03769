"""Nightly contextual precision of yesterday's retrieval logs (``retrieval_logs``).

plan_chunks -> score_chunk (mapped, one task per chunk) -> aggregate -> alert.
Warehouse: the Airflow connection ``ctxprec_warehouse`` (sqlite or postgres), else
``CTXPREC_WAREHOUSE_URL``. Judge: ``CTXPREC_JUDGE`` and the ``ctxprec_judge`` connection or
``OPENAI_API_KEY``. See docs/airflow.md.
"""

from ctxprec_ops.airflow import nightly_dag

dag = nightly_dag(
    "contextual_precision_nightly",
    metric="contextual_precision",
    doc_md=__doc__,
)
