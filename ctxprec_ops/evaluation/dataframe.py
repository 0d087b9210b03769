"""Score a pandas DataFrame of retrievals: ``score_dataframe(df)`` returns it with score columns.

One row is one retrieval (query, ranked nodes, expected answer). A row that cannot be scored
gets its ``error`` filled and ``score`` NaN; every other row is scored normally.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..cases.results import MetricResult
from ..cases.single_turn import LLMTestCase
from ..errors import CtxPrecError
from ..judge import defaults
from ..judge.models import JudgeModel
from ..metrics.contextual_precision import ContextualPrecisionMetric
from ..secrets import redact
from .evaluate import evaluate

__all__ = ["score_dataframe", "DEFAULT_COLUMNS", "RESULT_COLUMNS"]

#: logical field -> default column name (``id`` and ``actual_output`` are optional)
DEFAULT_COLUMNS: dict[str, str] = {
    "input": "input",
    "actual_output": "actual_output",
    "expected_output": "expected_output",
    "retrieval_context": "retrieval_context",
    "id": "id",
}
_REQUIRED = ("input", "expected_output", "retrieval_context")
#: columns added to the returned frame (existing columns of these names are replaced)
RESULT_COLUMNS = (
    "score",
    "success",
    "reason",
    "error",
    "verdicts",
    "prompt_tokens",
    "completion_tokens",
    "cost",
)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists / arrays: not a scalar missing value
        return False


def _text(value: Any) -> Any:
    return None if _missing(value) else value


def _nodes(value: Any) -> Any:
    """A list of nodes from a cell: list/tuple/array as is, JSON text parsed, missing -> None."""
    if _missing(value):
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise CtxPrecError("retrieval_context is text but not a JSON array of strings") from None
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):  # numpy / arrow arrays
        value = value.tolist()
    return value


def _case(row: Mapping[str, Any], cols: Mapping[str, str], position: int) -> LLMTestCase:
    case_id = _text(row.get(cols["id"])) if cols.get("id") in row else None
    return LLMTestCase(
        input=_text(row[cols["input"]]),
        actual_output=_text(row.get(cols["actual_output"])) if cols.get("actual_output") in row else None,
        expected_output=_text(row[cols["expected_output"]]),
        retrieval_context=_nodes(row[cols["retrieval_context"]]),
        id=case_id if case_id is not None else str(position),
    )


def score_dataframe(
    df: pd.DataFrame,
    *,
    judge: str | JudgeModel | None = None,
    threshold: float = 0.5,
    columns: Mapping[str, str] | None = None,
    concurrency: int = defaults.CONCURRENCY,
    strict_mode: bool = False,
    include_reason: bool = True,
    max_nodes_per_call: int = defaults.MAX_NODES_PER_CALL,
    show_progress: bool | None = None,
    samples: int = 1,
) -> pd.DataFrame:
    """Return a copy of ``df`` with ``score``, ``success``, ``reason``, ``error``, ``verdicts``,
    ``prompt_tokens``, ``completion_tokens`` and ``cost`` added (same index, same row order).

    ``judge``: a model name, ``"lexical"`` or a ``JudgeModel`` (default: ``CTXPREC_JUDGE``, else
    ``gpt-4o-mini`` with ``OPENAI_API_KEY``, else ``lexical``). ``columns`` maps the fields
    ``input``, ``expected_output``, ``retrieval_context`` (list of strings or JSON text),
    ``actual_output`` and ``id`` to column names when they differ. A row that cannot be scored
    (missing or malformed field, judge failure) gets ``error`` and a NaN ``score``. ``samples``:
    the majority of that many sampled answers per node (odd; each verdict then has ``agreement``).
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"score_dataframe() needs a pandas DataFrame, got {type(df).__name__}")
    cols = {**DEFAULT_COLUMNS, **dict(columns or {})}
    unknown = set(cols) - set(DEFAULT_COLUMNS)
    if unknown:
        raise ValueError(f"unknown column mapping key(s): {', '.join(sorted(unknown))}")
    absent = [f"{cols[f]!r} (for {f})" for f in _REQUIRED if cols[f] not in df.columns]
    if absent:
        raise ValueError(f"the DataFrame has no column {', '.join(absent)}; pass columns={{...}} to map them")

    metric = ContextualPrecisionMetric(
        threshold=threshold,
        model=judge,
        include_reason=include_reason,
        strict_mode=strict_mode,
        max_nodes_per_call=max_nodes_per_call,
        samples=samples,
    )
    n = len(df)
    errors: list[str | None] = [None] * n
    cases: list[LLMTestCase] = []
    positions: list[int] = []
    for pos, row in enumerate(df.to_dict("records")):
        try:
            cases.append(_case(row, cols, pos))
            positions.append(pos)
        except CtxPrecError as exc:
            errors[pos] = redact(str(exc))

    results: list[MetricResult | None] = [None] * n
    if cases:
        evaluated = evaluate(cases, [metric], concurrency=concurrency, show_progress=show_progress)
        for pos, res in zip(positions, evaluated.results):
            results[pos] = res

    def col(get) -> list[Any]:
        return [get(r) if r is not None else None for r in results]

    out = df.copy()
    out["score"] = pd.Series(col(lambda r: r.score), index=df.index, dtype="float64")
    out["success"] = pd.Series(
        [bool(r.success) if r is not None else False for r in results], index=df.index, dtype=bool
    )
    out["reason"] = pd.Series(col(lambda r: r.reason), index=df.index, dtype=object)
    out["error"] = pd.Series(
        [r.error if r is not None else e for r, e in zip(results, errors)], index=df.index, dtype=object
    )
    out["verdicts"] = pd.Series(
        col(lambda r: [v.model_dump() for v in r.verdicts] if r.error is None else None),
        index=df.index,
        dtype=object,
    )
    out["prompt_tokens"] = pd.Series(col(lambda r: r.prompt_tokens), index=df.index, dtype="Int64")
    out["completion_tokens"] = pd.Series(col(lambda r: r.completion_tokens), index=df.index, dtype="Int64")
    out["cost"] = pd.Series(col(lambda r: r.cost), index=df.index, dtype="float64")
    return out
