"""Airflow operators over ``ctxprec_ops.pipeline`` and ``ctxprec_ops.monitoring`` (one import path).

The operators live by what they do: ``base`` (shared arguments, config building, outcome policy),
``scoring`` (plan, score), ``finalize`` (aggregate, alert), ``lineage`` (OpenLineage facets),
``assets`` (the Airflow Assets of the tables). This module re-exports them.
"""

from __future__ import annotations

from .base import DEFAULT_JUDGE_CONN_ID, CtxPrecBaseOperator, CtxPrecTaskError, JudgeOutageError, apply_decision
from .finalize import ContextualPrecisionAlertOperator, ContextualPrecisionFinalizeOperator
from .scoring import ContextualPrecisionOperator, ContextualPrecisionPlanOperator

__all__ = [
    "ContextualPrecisionPlanOperator",
    "ContextualPrecisionOperator",
    "ContextualPrecisionFinalizeOperator",
    "ContextualPrecisionAlertOperator",
    "CtxPrecBaseOperator",
    "JudgeOutageError",
    "CtxPrecTaskError",
    "DEFAULT_JUDGE_CONN_ID",
    "apply_decision",
]
