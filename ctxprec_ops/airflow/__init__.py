"""Airflow 3 integration (``pip install "ctxprec-ops[airflow]"``): hook, operators, nightly DAGs.

The core package never imports Airflow; only this subpackage does.
"""

from .callbacks import failure_callbacks, log_failure
from .hooks import CtxPrecWarehouseHook
from .nightly import nightly_dag, nightly_dags, nightly_timetable
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
    "JudgeOutageError",
    "nightly_dag",
    "nightly_dags",
    "nightly_timetable",
    "log_failure",
    "failure_callbacks",
]
