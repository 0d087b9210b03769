"""Label-corrected figures in monitoring: each checked partition's ``corrected`` estimate, and the
``use_corrected`` threshold rule.

``attach_corrected`` gives every ``CheckResult`` of a loaded history its
``calibration.correction.CorrectedEstimate`` (None: no labelled row of the population in that
partition), read in one query for all the partitions shown. With ``AlertRules.use_corrected``
the ``min_mean`` rule compares the **corrected** mean (when there are enough labelled rows; else
the judge's mean, and a note says why) and its message says which it used. Nothing else
changes: the regression rule compares the judge with itself on earlier days (a judge's constant
bias cancels out of that difference), the volume and failure-rate rules count rows, and the
pass-rate rule stays the judge's.

Only ``contextual_precision`` populations are corrected (labels are node judgments of a
single-turn retrieval).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from ..calibration.correction import CorrectedEstimate, difference_estimate, labelled_rows, t_quantile
from ..warehouse.schema import existing_output_tables
from .alerts import Alert, AlertRules, partition_head
from .history import History, load_history, moments_by
from .population import Population, engine_scope
from .segment_data import SegmentSource, value_filter

if TYPE_CHECKING:
    from .check import CheckResult

__all__ = [
    "CORRECTABLE",
    "corrected_by_partition",
    "attach_corrected",
    "attach_segment_corrected",
    "apply_use_corrected",
    "corrected_comparison",
    "safe_corrected_comparison",
    "corrected_estimate",
]

log = logging.getLogger("ctxprec_ops.monitoring")

#: the metrics node labels can correct
CORRECTABLE = frozenset({"contextual_precision"})


def corrected_by_partition(
    engine: Engine, history: History, keys: Sequence[str], label_set: str
) -> dict[str, CorrectedEstimate]:
    """``{partition: estimate}`` for the partitions of ``keys`` with labelled rows of the history's
    population (the judge's mean and N from the loaded history)."""
    pop = history.population
    if pop is None or pop.metric not in CORRECTABLE or not keys:
        return {}
    tables = existing_output_tables(engine)
    t = tables.scores
    with engine.connect() as conn:
        rows = labelled_rows(
            conn,
            t,
            [pop.where(t), t.c.partition_key.in_(list(keys))],
            label_set=label_set,
            source_table=pop.source_table,
        )
    by_key: dict[str, list] = {}
    for r in rows:
        by_key.setdefault(r.partition_key, []).append(r)
    out = {}
    for key, group in by_key.items():
        complete = [r for r in group if r.complete]
        m = history.get(key).moments
        est = difference_estimate(
            m.mean if m.n else None,
            m.n,
            [r.gold for r in complete if r.gold is not None],
            [r.judge for r in complete],
            label_set=label_set,
        )
        out[key] = dataclasses.replace(est, partial_rows=len(group) - len(complete))
    return out


def apply_use_corrected(result: CheckResult, rules: AlertRules) -> None:
    """The ``min_mean`` rule on the corrected mean (``rules.use_corrected``), in place."""
    if not rules.use_corrected or rules.min_mean is None:
        return
    est = result.corrected
    s = result.figures.summary
    if est is None or not est.available:
        why = est.note if est is not None else f"no labelled rows in label set {rules.label_set!r}"
        result.notes.append(f"use_corrected: {why}; min_mean was checked against the judge's mean")
        return
    raw_fired = any(a.rule == "min_mean" for a in result.alerts)
    result.alerts = [a for a in result.alerts if a.rule != "min_mean"]
    head = partition_head(result.figures, result.metric)
    judge = f"judge's mean {s.mean:.3f}" if s.mean is not None else "no judge mean"
    if est.mean is not None and est.mean < rules.min_mean:
        result.alerts.insert(
            0,
            Alert(
                "min_mean",
                "error",
                result.partition_key,
                result.metric,
                f"{head}: corrected mean {est.mean:.3f} [95% CI {est.ci_low:.3f}-{est.ci_high:.3f}] is below "
                f"min_mean {rules.min_mean:.3f} ({est.labelled_rows} labelled rows of {est.rows}; {judge})",
                est.mean,
                rules.min_mean,
            ),
        )
    else:
        extra = f"; the {judge} alone would have fired" if raw_fired else ""
        result.notes.append(
            f"min_mean {rules.min_mean:.3f} checked against the corrected mean {est.mean:.3f} "
            f"({est.labelled_rows} labelled rows){extra}"
        )


def attach_corrected(engine: Engine, history: History, results: Sequence[CheckResult], rules: AlertRules) -> None:
    """Set ``corrected`` on each result and apply ``use_corrected``; a failure to read the labels
    never fails the check (a note says the corrected figures are unavailable)."""
    try:
        ests = corrected_by_partition(engine, history, [r.partition_key for r in results], rules.label_set)
    except Exception as exc:  # a bonus figure: the judge's figures and rules stand on their own
        log.warning("corrected figures not computed: %s", type(exc).__name__)
        for r in results:
            r.notes.append(f"corrected figures unavailable ({type(exc).__name__})")
        ests = {}
    for r in results:
        r.corrected = ests.get(r.partition_key)
        apply_use_corrected(r, rules)


def attach_segment_corrected(
    conn: Connection,
    src: SegmentSource,
    population: Population,
    by: str,
    partition_key: str,
    results: Sequence[tuple[str | None, CheckResult]],
    rules: AlertRules,
) -> None:
    """Each segment value's corrected estimate on ``partition_key`` (its labelled rows among the
    value's rows of that day; the judge's mean and N are the segment's own), and ``use_corrected``
    applied to its ``min_mean`` rule. A failure to read the labels never fails the check."""
    if population.metric not in CORRECTABLE or not results:
        return
    seg = src.table
    where = [population.where(seg), seg.c.partition_key == partition_key, *src.recorded(by)]
    try:
        scores = existing_output_tables(conn.engine).scores
        labelled = labelled_rows(
            conn,
            scores,
            [population.where(scores), scores.c.partition_key == partition_key,
             scores.c.log_id.in_(sa.select(seg.c.log_id).where(*where))],
            label_set=rules.label_set,
            source_table=population.source_table,
        )  # fmt: skip
        value_of = {
            str(log_id): value for log_id, value in conn.execute(sa.select(seg.c.log_id, src.col(by)).where(*where))
        }
    except Exception as exc:  # a bonus figure: the judge's figures and rules stand on their own
        log.warning("corrected segment figures not computed: %s", type(exc).__name__)
        return
    by_value: dict[str | None, list] = {}
    for r in labelled:
        if r.log_id in value_of:
            by_value.setdefault(value_of[r.log_id], []).append(r)
    for value, result in results:
        group = by_value.get(value)
        if group:
            complete = [r for r in group if r.complete]
            s = result.figures.summary
            est = difference_estimate(
                s.mean if s.n else None,
                s.n,
                [r.gold for r in complete if r.gold is not None],
                [r.judge for r in complete],
                label_set=rules.label_set,
            )
            result.corrected = dataclasses.replace(est, partial_rows=len(group) - len(complete))
        apply_use_corrected(result, rules)


def _side_estimate(
    conn: Connection, src: SegmentSource, where: list, side: sa.ColumnElement[bool], rows: list, label_set: str
) -> CorrectedEstimate:
    got = moments_by(conn, src.table, [*where, side], [])
    m = got[0][1] if got else None
    complete = [r for r in rows if r.complete]
    est = difference_estimate(
        m.mean if m is not None else None,
        m.n if m is not None else 0,
        [r.gold for r in complete if r.gold is not None],
        [r.judge for r in complete],
        label_set=label_set,
    )
    return dataclasses.replace(est, partial_rows=len(rows) - len(complete))


def safe_corrected_comparison(*args: object, **kwargs: object) -> dict[str, object] | None:
    """``corrected_comparison``, or None (logged) when the labels cannot be read: a comparison
    never fails over its corrected figures."""
    try:
        return corrected_comparison(*args, **kwargs)  # type: ignore[arg-type]
    except Exception as exc:
        log.warning("corrected comparison not computed: %s", type(exc).__name__)
        return None


def corrected_comparison(
    conn: Connection,
    src: SegmentSource,
    population: Population,
    where: list,
    by: str,
    baseline: str | None,
    candidate: str | None,
    label_set: str,
) -> dict[str, object] | None:
    """``compare``'s corrected figures: each side's corrected mean over its rows (``where``: the
    compared rows of the segments table) and the corrected delta (candidate − baseline) with a
    95% interval (Welch–Satterthwaite degrees of freedom over the two sides' labelled rows).
    None when no compared row is labelled; the delta is None unless both sides have enough."""
    if population.metric not in CORRECTABLE:
        return None
    scores = existing_output_tables(conn.engine).scores
    seg = src.table
    # a log id is in one partition (the day of its event time): the compared rows' ids select them
    labelled = labelled_rows(
        conn,
        scores,
        [population.where(scores), scores.c.log_id.in_(sa.select(seg.c.log_id).where(*where))],
        label_set=label_set,
        source_table=population.source_table,
    )
    if not labelled:
        return None
    side_of: dict[tuple[str, str], int] = {}
    col = src.col(by)
    q = sa.select(seg.c.partition_key, seg.c.log_id, value_filter(col, baseline)).where(*where)
    for pk, log_id, is_a in conn.execute(q):
        side_of[(str(pk), str(log_id))] = 0 if is_a else 1
    rows: list[list] = [[], []]
    for r in labelled:
        side = side_of.get((r.partition_key, r.log_id))
        if side is not None:
            rows[side].append(r)
    a = _side_estimate(conn, src, where, value_filter(col, baseline), rows[0], label_set)
    b = _side_estimate(conn, src, where, value_filter(col, candidate), rows[1], label_set)
    out: dict[str, object] = {
        "baseline": a.to_dict(),
        "candidate": b.to_dict(),
        "delta": None,
        "ci_low": None,
        "ci_high": None,
        "method": "difference of the sides' corrected means (difference estimator), Welch t-interval",
    }
    if a.available and b.available and a.se is not None and b.se is not None:
        assert a.mean is not None and b.mean is not None
        va, vb = a.se**2, b.se**2
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / ((va**2 / a.df if a.df else 0) + (vb**2 / b.df if b.df else 0) or 1e-300)
        half = t_quantile(0.975, max(df, 1.0)) * se
        delta = b.mean - a.mean
        out.update(delta=delta, ci_low=delta - half, ci_high=delta + half)
    return out


def corrected_estimate(
    engine_or_url: Engine | str,
    partition_key: str,
    *,
    metric: str = "contextual_precision",
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
    label_set: str = "default",
) -> CorrectedEstimate | None:
    """The label-corrected mean of one partition's population (default: its most recent judge
    model / prompt version), or None when none of its rows is labelled (read-only)."""
    with engine_scope(engine_or_url) as engine:
        history = load_history(
            engine, metric, keys=[partition_key], population_partition=partition_key, up_to=partition_key,
            judge_model=judge_model, prompt_version=prompt_version, source_table=source_table, mapping=mapping,
        )  # fmt: skip
        return corrected_by_partition(engine, history, [partition_key], label_set).get(partition_key)
