"""Rendered template values -> typed settings, and task results -> XCom-safe dicts.

Every numeric operator argument is templated and accepts the string Jinja renders
(``"{{ params.x }}"``); these helpers turn it back into a number (or None) and fail the task
with a one-line ``AirflowFailException`` — not retried — when it is not one.
"""

from __future__ import annotations

import json
import math
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from ..secrets import redact
from ..warehouse.source import PartitionKeyError, parse_partition_key

__all__ = ["NONE_STRINGS", "opt_float", "opt_int", "partition_value", "columns_value", "public"]

NONE_STRINGS = ("", "none", "null")


def _is_none(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in NONE_STRINGS)


def opt_float(value: Any, name: str, *, lo: float | None = None, hi: float | None = None) -> float | None:
    if _is_none(value):
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise AirflowFailException(f"{name} must be a number, got {value!r}") from None
    if math.isnan(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise AirflowFailException(f"{name} must be between {lo} and {hi}, got {value!r}")
    return v


def opt_int(value: Any, name: str, *, lo: int = 1) -> int | None:
    v = opt_float(value, name)
    if v is None:
        return None
    if v != int(v) or v < lo:
        raise AirflowFailException(f"{name} must be an integer >= {lo}, got {value!r}")
    return int(v)


def partition_value(value: Any) -> str:
    """The rendered ``partition_key``: a ``YYYY-MM-DD`` day, or a clear failure."""
    key = "" if value is None else str(value).strip()
    if key.lower() in NONE_STRINGS:
        raise AirflowFailException(
            "no partition to score: this run has no logical date; trigger it with the "
            "partition_key param (YYYY-MM-DD) or with a logical date"
        )
    try:
        parse_partition_key(key)
    except PartitionKeyError as exc:
        raise AirflowFailException(str(exc)) from None
    return key


def columns_value(value: Any) -> dict[str, str] | None:
    """The ``columns`` argument: a mapping, or the JSON object a template rendered."""
    if _is_none(value):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise AirflowFailException(f"columns must be a JSON object of column names, got {value!r}") from None
    if not isinstance(value, dict):
        raise AirflowFailException(f"columns must map logical column names to columns, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def public(d: dict[str, Any]) -> dict[str, Any]:
    """Only JSON scalars, rounded for display; nothing that could carry a row or a secret."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, float):
            out[k] = None if math.isnan(v) else round(v, 6)
        elif v is None or isinstance(v, (int, bool)):
            out[k] = v
        elif isinstance(v, str):
            out[k] = redact(v)
        elif isinstance(v, dict) and all(isinstance(x, (int, float)) for x in v.values()):
            out[k] = dict(v)
    return out
