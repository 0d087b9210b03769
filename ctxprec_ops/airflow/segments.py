"""Segments in the Airflow operators: the ``segments`` / ``by`` arguments as a template renders
them, and the alert task's per-segment alerts (``check_segments``), each naming its segment."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from ..secrets import redact

__all__ = ["parse_segment_arg", "segment_alerts"]

_NONE = ("", "none", "null")


def parse_segment_arg(value: Any, name: str = "segments") -> list[str] | None:
    """Segment columns: a list, or the JSON list (or comma-separated names) a template rendered."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NONE):
        return None
    from ..pipeline.columns import parse_segments

    if isinstance(value, str) and not value.strip().startswith("["):
        value = json.dumps([v.strip() for v in value.split(",") if v.strip()])
    try:
        return list(parse_segments(value, name))
    except ValueError as exc:
        raise AirflowFailException(str(exc)) from None


def segment_alerts(
    call: Callable[..., Any], log: Any, engine: Any, key: str, metric: str, result: Any, by: list[str]
) -> list[Any]:
    """The alerts of each value of the ``by`` columns on partition ``key`` (the population of the
    partition's ``result``), each check made through ``call`` (the operator's error policy) and
    its summary logged to ``log``."""
    from ..monitoring.segment_data import SegmentError
    from ..monitoring.segments import check_segments

    pop, out = result.population, []

    def one(col: str) -> Any:
        try:
            return check_segments(
                engine, key, col, metric=metric, rules=result.rules,
                judge_model=pop.judge_model, prompt_version=pop.prompt_version, source_table=pop.source_table,
                mapping=pop.mapping,
            )  # fmt: skip
        except SegmentError as exc:  # not recorded for this population: say so, check the others
            log.warning("%s", exc)
            return None

    for col in by if pop is not None else ():
        seg = call(one, col)
        if seg is not None:
            for line in redact(seg.summary()).splitlines():
                log.info("%s", line)
            out.extend(seg.alerts)
    return out
