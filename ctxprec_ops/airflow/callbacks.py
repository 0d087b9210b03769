"""Failure callbacks for the ctxprec DAGs.

``log_failure`` is the default ``on_failure_callback``: one redacted line naming the DAG, task,
partition, try and error. Add notifiers next to it (``[log_failure, SlackNotifier(...)]``), or
name them without editing a DAG file through ``CTXPREC_AIRFLOW_ON_FAILURE`` (comma-separated
``module:attribute`` paths; an attribute that is a class or factory is called with no arguments).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..secrets import redact

__all__ = ["log_failure", "failure_message", "failure_callbacks", "ON_FAILURE_ENV"]

log = logging.getLogger("ctxprec_ops.airflow")
ON_FAILURE_ENV = "CTXPREC_AIRFLOW_ON_FAILURE"


def failure_message(context: Any) -> str:
    """``ctxprec task failed: dag=… task=…[i] partition=… try=N: <Error>: <message>`` (redacted)."""
    ti = context.get("ti") or context.get("task_instance")
    dag_id = getattr(ti, "dag_id", None) or getattr(context.get("dag"), "dag_id", "?")
    task_id = getattr(ti, "task_id", "?")
    map_index = getattr(ti, "map_index", -1)
    task = f"{task_id}[{map_index}]" if map_index is not None and map_index >= 0 else task_id
    params = context.get("params") or {}
    partition = (params.get("partition_key") if hasattr(params, "get") else None) or context.get("ds") or "?"
    exc = context.get("exception")
    error = f"{type(exc).__name__}: {exc}" if exc is not None else "unknown error"
    line = (
        f"ctxprec task failed: dag={dag_id} task={task} partition={partition} "
        f"run={context.get('run_id', '?')} try={getattr(ti, 'try_number', '?')}: {error}"
    )
    return redact(" ".join(line.split()))


def log_failure(context: Any) -> None:
    """Default ``on_failure_callback``: log one redacted line (never raises)."""
    try:
        log.error("%s", failure_message(context))
    except Exception:  # a callback must never mask the task's own failure
        log.exception("ctxprec failure callback could not format the failure")


def _load(path: str) -> Callable[[Any], None]:
    module_name, sep, attr = path.strip().partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"{ON_FAILURE_ENV}: expected 'module:attribute', got {path!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"{ON_FAILURE_ENV}: {path!r} is not callable")
    return obj


def failure_callbacks(
    extra: list[Callable[[Any], None]] | None = None, settings: Settings | None = None
) -> list[Callable[[Any], None]]:
    """``[log_failure, *extra, *the callbacks named in CTXPREC_AIRFLOW_ON_FAILURE]``."""
    callbacks: list[Callable[[Any], None]] = [log_failure, *(extra or [])]
    for path in (settings or Settings.from_env()).airflow_on_failure:
        callbacks.append(_load(path))
    return callbacks
