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
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from ..calibration.correction import CorrectedEstimate, difference_estimate, labelled_rows
from ..warehouse.schema import existing_output_tables
from .alerts import Alert, AlertRules, _head
from .history import History

if TYPE_CHECKING:
    from .check import CheckResult

__all__ = ["CORRECTABLE", "corrected_by_partition", "attach_corrected", "apply_use_corrected"]

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
    head = _head(result.figures, result.metric)
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
