"""Asset-triggered variants of the nightly DAGs: ``contextual_precision_on_new_logs`` and
``turn_contextual_precision_on_new_logs`` run when an upstream DAG updates the log table's Asset
(one partitioned run per day it reports), instead of at 00:00 UTC.

Off unless ``CTXPREC_AIRFLOW_ON_NEW_LOGS`` is true (1/true/yes/on) where the DAG files are parsed:
with both files on, a day would be scored by the nightly run and by the asset-triggered one. See
docs/airflow.md.
"""

from ctxprec_ops.airflow import on_new_logs_dags
from ctxprec_ops.config import Settings

if Settings.from_env().airflow_on_new_logs:
    globals().update(on_new_logs_dags())
