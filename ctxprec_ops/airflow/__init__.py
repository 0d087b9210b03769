"""Airflow 3 integration (``pip install "ctxprec-ops[airflow]"``): hook, operators, nightly DAGs,
the tables as Assets, OpenLineage facets and the webhook notifier.

The core package never imports Airflow; only this subpackage does.
"""

from .assets import failures_asset, scores_asset, source_asset
from .callbacks import failure_callbacks, log_failure
from .hooks import CtxPrecWarehouseHook
from .nightly import nightly_dag, nightly_dags, nightly_timetable, on_new_logs_dag, on_new_logs_dags
from .notifiers import CtxPrecWebhookNotifier
from .operators import (
    ContextualPrecisionAlertOperator,
    ContextualPrecisionFinalizeOperator,
    ContextualPrecisionOperator,
    ContextualPrecisionPlanOperator,
    JudgeOutageError,
)

__all__ = [
    "CtxPrecWarehouseHook",
    "ContextualPrecisionOperator",
    "ContextualPrecisionPlanOperator",
    "ContextualPrecisionFinalizeOperator",
    "ContextualPrecisionAlertOperator",
    "CtxPrecWebhookNotifier",
    "JudgeOutageError",
    "nightly_dag",
    "nightly_dags",
    "nightly_timetable",
    "on_new_logs_dag",
    "on_new_logs_dags",
    "scores_asset",
    "failures_asset",
    "source_asset",
    "log_failure",
    "failure_callbacks",
]
