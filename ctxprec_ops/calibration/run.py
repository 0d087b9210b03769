"""``calibrate()``: run judge(s) on labelled cases and measure their agreement with the labels.

For every ``log_id`` of the label set the retrieval-log row is read (through the column mapping,
like ``score``), the judge scores it with ``ContextualPrecisionMetric`` (all nodes, as in
production), and each labelled node's verdict is compared with its label. Cases whose every
node is labelled also compare the judge's score with the label-based score (the same formula
over the labels). Each judge's figures are upserted into ``ctxprec_calibrations``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Text, cast, select, type_coerce
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import JSON

from ..cases.contexts import node_count
from ..cases.single_turn import LLMTestCase
from ..errors import CtxPrecError, InvalidTestCaseError
from ..judge import defaults
from ..metrics.contextual_precision import ContextualPrecisionMetric
from ..pipeline.columns import SourceColumns
from ..pipeline.rows import row_to_test_case
from ..scoring.formula import contextual_precision
from ..scoring.samples import check_samples
from ..warehouse.engine import get_engine, read_connection, write_transaction
from ..warehouse.source import SourceTable, reflect_source
from .labels import LabelSet
from .stats import Agreement, CaseLabels, Estimate, agreement
from .table import FIGURES, write_calibration

__all__ = ["CalibrationResult", "LabelledCases", "calibrate", "load_cases", "read_cases", "compare"]

log = logging.getLogger("ctxprec_ops.calibration")

#: a judge to calibrate: a model name / ``JudgeModel``, or (judge, template class) to compare prompts
JudgeSpec = Any


@dataclass
class LabelledCases:
    """The label set's rows as test cases, and what could not be used (with why)."""

    cases: list[LLMTestCase]
    labels: dict[str, dict[int, bool]]
    skipped: dict[str, str] = field(default_factory=dict)  # log_id -> reason


@dataclass
class CalibrationResult:
    judge_model: str
    prompt_version: str
    label_set: str
    labels_name: str
    agreement: Agreement
    case_labels: list[CaseLabels]
    failed_cases: dict[str, str]  # log_id -> why the judge could not score it (or why it was skipped)
    judge_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0

    def to_row(self, at: datetime) -> dict[str, Any]:
        a = self.agreement
        row: dict[str, Any] = {
            "judge_model": self.judge_model,
            "prompt_version": self.prompt_version,
            "label_set": self.label_set,
            "labels_name": self.labels_name[:255],
            "cases": a.cases,
            "nodes": a.nodes,
            "scored_cases": a.scored_cases,
            "failed_cases": len(self.failed_cases),
            "tp": a.tp,
            "fp": a.fp,
            "fn": a.fn,
            "tn": a.tn,
            "judge_calls": self.judge_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "calibrated_at": at,
        }
        for f in FIGURES:
            e: Estimate = getattr(a, f)
            row[f], row[f"{f}_low"], row[f"{f}_high"] = e.value, e.low, e.high
        return row


def _read_rows(engine: Engine, src: SourceTable, ids: Sequence[str]) -> list[dict[str, Any]]:
    cols = []
    for logical, col in src.columns.items():
        if logical == "event_time":
            continue
        expr: ColumnElement[Any] = col
        if logical == "retrieval_context":
            expr = cast(col, Text()) if isinstance(col.type, JSON) else type_coerce(col, Text())
        cols.append(expr.label(logical))
    keys: list[Any] = []
    for i in ids:
        try:
            keys.append(src.coerce_id(i))
        except ValueError:
            continue  # a non-integer id cannot match an integer id column
    rows: list[dict[str, Any]] = []
    with read_connection(engine) as conn:
        for start in range(0, len(keys), 500):
            result = conn.execute(select(*cols).where(src.id.in_(keys[start : start + 500])))
            names = list(result.keys())
            rows += [dict(zip(names, r)) for r in result]
    return rows


def read_cases(
    engine: Engine,
    ids: Sequence[str],
    *,
    source_table: str = "retrieval_logs",
    columns: SourceColumns | dict[str, str] | None = None,
    schema: str | None = None,
) -> dict[str, LLMTestCase | str]:
    """``log_id -> LLMTestCase`` of the rows ``ids`` of ``source_table`` (read through the column
    mapping, as ``score`` reads them), or ``log_id -> why`` for a missing or unusable row."""
    cols = columns if isinstance(columns, SourceColumns) else SourceColumns.from_mapping(columns)
    mapping = {k: v for k, v in cols.as_dict().items() if k not in ("retrieved_ids", "relevant_ids")}
    src = reflect_source(
        engine, source_table, schema, mapping, columns_env="CTXPREC_SOURCE_COLUMNS", optional=cols.optional_missing_ok()
    )
    found = {str(r["id"]): r for r in _read_rows(engine, src, list(ids))}
    out: dict[str, LLMTestCase | str] = {}
    for log_id in ids:
        row = found.get(log_id)
        if row is None:
            out[log_id] = f"no row with id {log_id!r} in {source_table}"
            continue
        try:
            out[log_id] = row_to_test_case(row)
        except InvalidTestCaseError as exc:
            out[log_id] = str(exc)
    return out


def load_cases(
    engine: Engine,
    labels: LabelSet,
    *,
    source_table: str = "retrieval_logs",
    columns: SourceColumns | dict[str, str] | None = None,
    schema: str | None = None,
) -> LabelledCases:
    """The labelled rows as ``LLMTestCase``s; unknown ids, bad rows and labels of nodes the row
    does not have are reported in ``skipped`` (a case with some valid labels is kept)."""
    cases = read_cases(engine, list(labels.labels), source_table=source_table, columns=columns, schema=schema)
    out = LabelledCases([], {})
    for log_id, nodes in labels.labels.items():
        case = cases[log_id]
        if isinstance(case, str):
            out.skipped[log_id] = case
            continue
        n = node_count(case.retrieval_context)  # the judged nodes (a source's items are one)
        kept = {k: v for k, v in nodes.items() if k <= n}
        if len(kept) < len(nodes):
            out.skipped[log_id] = f"labels of node(s) {sorted(set(nodes) - set(kept))} ignored: the row has {n} nodes"
        if kept:
            out.cases.append(case)
            out.labels[log_id] = kept
    return out


def _case_labels(
    case: LLMTestCase, labels: dict[int, bool], verdicts: dict[int, bool], judge_score: float | None
) -> CaseLabels:
    ranks = sorted(labels)
    n = node_count(case.retrieval_context)  # the judged nodes (a source's items are one)
    complete = ranks == list(range(1, n + 1))
    return CaseLabels(
        log_id=str(case.id),
        labels=tuple(labels[k] for k in ranks),
        verdicts=tuple(verdicts[k] for k in ranks),
        label_score=contextual_precision([labels[k] for k in ranks]) if complete else None,
        judge_score=judge_score if complete else None,
    )


def _judge_one(
    spec: JudgeSpec,
    data: LabelledCases,
    label_set: LabelSet,
    *,
    concurrency: int,
    resamples: int,
    seed: int,
    samples: int = 1,
) -> CalibrationResult:
    from ..evaluation.evaluate import evaluate

    judge, template = spec if isinstance(spec, tuple) else (spec, None)
    metric = ContextualPrecisionMetric(model=judge, evaluation_template=template, samples=samples)
    evaluation = evaluate(data.cases, [metric], concurrency=concurrency, show_progress=False)
    case_labels: list[CaseLabels] = []
    failed = dict(data.skipped)
    for case, r in zip(data.cases, evaluation.results):
        if r.error is not None or r.score is None:
            failed[str(case.id)] = r.error or "scoring failed"
            continue
        verdicts = {v.node: bool(v.relevant) for v in r.verdicts}
        raw = contextual_precision([verdicts[k] for k in sorted(verdicts)])
        case_labels.append(_case_labels(case, data.labels[str(case.id)], verdicts, raw))
    return CalibrationResult(
        judge_model=metric.evaluation_model,
        prompt_version=metric.prompt_version,
        label_set=label_set.digest,
        labels_name=label_set.name,
        agreement=agreement(case_labels, resamples=resamples, seed=seed),
        case_labels=case_labels,
        failed_cases=failed,
        judge_calls=evaluation.judge_calls,
        prompt_tokens=evaluation.prompt_tokens,
        completion_tokens=evaluation.completion_tokens,
        cost=evaluation.cost,
    )


def calibrate(
    warehouse: str | Engine,
    labels: LabelSet,
    judges: Sequence[JudgeSpec],
    *,
    source_table: str = "retrieval_logs",
    columns: SourceColumns | dict[str, str] | None = None,
    schema: str | None = None,
    output_schema: str | None = None,
    concurrency: int = defaults.CONCURRENCY,
    resamples: int = 1000,
    seed: int = 0,
    log_fn: Callable[[str], None] | None = None,
    samples: int = 1,
) -> list[CalibrationResult]:
    """Calibrate each of ``judges`` against ``labels``; store and return one result per judge.

    A judge is a model name (``"gpt-4o-mini"``, ``"lexical"``), a ``JudgeModel``, or a tuple
    ``(judge, template_class)`` to calibrate a prompt. ``samples`` > 1 calibrates the majority
    of that many sampled answers per node (its own row: the prompt version ends in
    ``+samples=N``). Raises ``CtxPrecError`` when no labelled row can be used.
    """
    if not judges:
        raise ValueError("calibrate needs at least one judge")
    check_samples(samples)
    engine = get_engine(warehouse)
    data = load_cases(engine, labels, source_table=source_table, columns=columns, schema=schema)
    if not data.cases:
        reasons = "; ".join(f"{k}: {v}" for k, v in list(data.skipped.items())[:3])
        raise CtxPrecError(f"none of the {len(labels.labels)} labelled log ids can be used ({reasons})")
    if log_fn:
        log_fn(
            f"{len(data.cases)} labelled cases ({sum(len(v) for v in data.labels.values())} node labels) from "
            f"{source_table}; {len(data.skipped)} log id(s) skipped or partly used"
        )
    results = []
    for spec in judges:
        result = _judge_one(
            spec, data, labels, concurrency=concurrency, resamples=resamples, seed=seed, samples=samples
        )
        with write_transaction(engine) as conn:
            write_calibration(conn, result.to_row(datetime.now(UTC)), output_schema)
        results.append(result)
    return results


def compare(
    a: CalibrationResult, b: CalibrationResult, *, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, Estimate]:
    """``b − a`` for every figure over the cases both judges scored, with a paired bootstrap CI
    (the same resampled cases for both): an interval that excludes 0 is a real difference."""
    import numpy as np

    from .stats import point_figures  # the figure computation shared with ``agreement``

    common = sorted({c.log_id for c in a.case_labels} & {c.log_id for c in b.case_labels})
    by_a = {c.log_id: c for c in a.case_labels}
    by_b = {c.log_id: c for c in b.case_labels}

    def arrays(cases: list[CaseLabels]) -> tuple[Any, Any, Any]:
        conf = np.zeros((len(cases), 4), dtype=np.int64)
        scores = np.zeros((len(cases), 2))
        scored = np.zeros(len(cases), dtype=bool)
        for i, c in enumerate(cases):
            for lab, ver in zip(c.labels, c.verdicts):
                conf[i, (0 if ver else 3) if lab == ver else (1 if ver else 2)] += 1
            if c.label_score is not None and c.judge_score is not None:
                scores[i], scored[i] = (c.label_score, c.judge_score), True
        return conf, scores, scored

    ca, cb = [by_a[i] for i in common], [by_b[i] for i in common]
    A, B = arrays(ca), arrays(cb)
    idx_all = np.arange(len(common))

    def diff(idx: Any) -> list[float | None]:
        pa, pb = point_figures(ca, idx, *A), point_figures(cb, idx, *B)
        return [None if x is None or y is None else y - x for x, y in zip(pa, pb)]

    point = diff(idx_all)
    draws: list[list[float]] = [[] for _ in FIGURES]
    if len(common) >= 2:
        rng = np.random.default_rng(seed)
        for _ in range(resamples):
            for j, v in enumerate(diff(rng.integers(0, len(common), len(common)))):
                if v is not None:
                    draws[j].append(v)
    alpha = (1 - level) / 2
    out = {}
    for j, f in enumerate(FIGURES):
        if point[j] is None or not draws[j]:
            out[f] = Estimate(point[j])
        else:
            out[f] = Estimate(point[j], float(np.quantile(draws[j], alpha)), float(np.quantile(draws[j], 1 - alpha)))
    return out
