"""The params of the ctxprec DAGs (shown and overridable on a manual trigger) and the templated
operator arguments that read them. Each setting param is built from its declaration
(``ctxprec_ops.config.Settings``): its JSON type, bounds and description are the setting's, its
default the value the settings hold where the DAG file is parsed."""

from __future__ import annotations

import types
import typing
from typing import Any

from airflow.sdk import Param

from ..config import Settings

__all__ = ["ALERT_PARAMS", "SETTING_PARAMS", "dag_params", "setting_param", "templated_arguments"]

#: the settings every task of a ctxprec DAG takes from the params (the operators' argument names)
SETTING_PARAMS = (
    "threshold",
    "chunk_size",
    "concurrency",
    "judge_max_retries",
    "max_rpm",
    "max_tpm",
    "outage_tolerance",
    "sample_rate",
    "max_rows",
    "judge_samples",
)
#: the settings the alert task takes from the params
ALERT_PARAMS = ("min_mean", "min_pass_rate", "min_drop", "use_corrected")

_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def _json_type(field: str) -> str:
    annotation = Settings.model_fields[field].annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = (
        args[0]
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else annotation
    )
    return _JSON_TYPES.get(base, "string")  # type: ignore[arg-type]


def setting_param(settings: Settings, field: str) -> Param:
    """The param of the setting ``field``: its declared type, bounds and description, null allowed
    (= the setting's value), default the value ``settings`` hold."""
    bounds = Settings.bounds(field)
    schema: dict[str, Any] = bounds.json_schema() if bounds is not None else {}
    return Param(
        getattr(settings, field),
        type=[_json_type(field), "null"],
        description=f"{Settings.model_fields[field].description} ({Settings.variable(field)})",
        **schema,
    )


def dag_params(settings: Settings, pool: str | None) -> dict[str, Param]:
    """``partition_key`` plus the judge, chunking, sampling and alert settings, defaulting to ``settings``."""
    params: dict[str, Param] = {
        "partition_key": Param(
            None,
            type=["null", "string"],
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            description="Day to score (YYYY-MM-DD); empty = the run's data interval day",
        ),
    }
    params.update({field: setting_param(settings, field) for field in (*SETTING_PARAMS, *ALERT_PARAMS)})
    params["judge_pool"] = Param(
        pool,
        type=["null", "string"],
        enum=[pool],
        description="Airflow pool of the score_chunk tasks (set by nightly_dag(pool=...) or "
        "CTXPREC_AIRFLOW_POOL when the DAG file is parsed; shown, not changeable)",
    )
    return params


def templated_arguments(partition_template: str) -> dict[str, Any]:
    """The operator arguments every task of a ctxprec DAG takes from the params."""
    return {"partition_key": partition_template, **{field: f"{{{{ params.{field} }}}}" for field in SETTING_PARAMS}}
