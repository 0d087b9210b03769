"""Nightly DAGs of ctxprec-ops, one per metric kind: ``contextual_precision_nightly`` (retrieval
logs), ``turn_contextual_precision_nightly`` (conversation logs).

Each: plan_chunks -> score_chunk (mapped, one task per chunk) -> aggregate -> alert, on a
data-interval timetable (``{{ ds }}`` = the day scored). Warehouse: the Airflow connection
``ctxprec_warehouse`` (sqlite or postgres), else ``CTXPREC_WAREHOUSE_URL``. Judge:
``CTXPREC_JUDGE`` and the ``ctxprec_judge`` connection or ``OPENAI_API_KEY``. See docs/airflow.md.
"""

from ctxprec_ops.airflow import nightly_dags

globals().update(nightly_dags())
