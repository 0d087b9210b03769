"""Label-corrected means: the judge's mean over every row, corrected with a few gold labels.

**Estimator** (the difference estimator of survey sampling; prediction-powered inference with
the judge as the predictor). A partition has N scored rows; the judge's mean over them, J, is
known exactly. n of them, drawn uniformly at random (``ctxprec labels sample``), are fully
labelled; each gives a gold score g_i (the same formula over the labels) and the judge's score
j_i, so d_i = g_i − j_i is the judge's error on that row. Then

    corrected = J + mean(d)                                                 (unbiased for the
    95% CI    = corrected ± t_{n−1, 0.975} · sqrt((1 − n/N) · s²_d / n)     gold mean of the N rows)

**Target: the partition's own rows.** The number a partition reports is the mean over its rows,
and J is that mean for the judge with no sampling error at all; the only unknown is the judge's
error over the rows nobody labelled. The finite-population factor (1 − n/N) says so: with every
row labelled the interval has zero width (the gold mean is then known), with few labels of many
rows it is the usual t-interval. (For "the retriever in general" a superpopulation target would
add the day's own sampling noise, which the raw 95% CI already shows.)

**When every labelled row agrees with the judge** (s_d = 0) the t-interval would have zero width
and claim certainty from, say, 10 rows. Then the share of rows where judge and gold differ is at
most 3/n at 95% (the rule of three) and each such row moves the mean by at most 1, so the interval
is corrected ± (1 − n/N) · min(1, 3/n).

**Minimum: ``MIN_LABELLED_ROWS`` = 10 fully labelled rows.** Below it the t-interval's normal
approximation fails for these bounded, zero-heavy differences (the simulation in
``bench/bench_correction.py`` measures coverage well under 95% at n = 5) and t_{n−1} makes the
interval too wide to act on; the raw figures are reported with a note instead.

Everything is clipped to [0, 1], the range of the score. Assumptions (the docs page "Can I trust
the score?"): the labelled rows are a uniform random draw of the partition's scored rows, and the
labels use the prompt's definition of relevance.

``labelled_rows`` reads, per partition, the fully labelled score rows of a population (the
``ctxprec_labels`` rows joined to ``ctxprec_scores`` in SQL: only labelled rows come back).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql import FromClause

from ..scoring.formula import apply_strict, contextual_precision
from .label_table import DEFAULT_LABEL_SET, LABELS, labels_table, verdict_count

__all__ = [
    "MIN_LABELLED_ROWS",
    "METHOD",
    "CorrectedEstimate",
    "LabelledRow",
    "difference_estimate",
    "labelled_rows",
    "t_quantile",
]

MIN_LABELLED_ROWS = 10
METHOD = "difference estimator"
#: differences within this of each other have no spread (rounding, not disagreement)
_ZERO = 1e-12


def t_quantile(p: float, df: float) -> float:
    from scipy.special import stdtrit  # scipy.special, not scipy.stats: a quarter of the import time

    return float(stdtrit(df, p))


def _clip(v: float | None) -> float | None:
    return None if v is None else min(1.0, max(0.0, v))


@dataclass(frozen=True)
class CorrectedEstimate:
    """The corrected mean of one population's rows with its 95% interval (``mean`` None: fewer
    labelled rows than the minimum; ``note`` says so)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    labelled_rows: int
    rows: int  # N: the judge's scored rows the estimate is about
    judge_mean: float | None
    correction: float | None  # mean(gold − judge) over the labelled rows: what is added to the judge's mean
    label_set: str = DEFAULT_LABEL_SET
    method: str = METHOD
    minimum_rows: int = MIN_LABELLED_ROWS
    level: float = 0.95
    #: rows with some labels but not every node labelled (left out of the estimate)
    partial_rows: int = 0
    #: half-width's standard-error equivalent (for combining two estimates), None without one
    se: float | None = field(default=None, repr=False)
    df: float | None = field(default=None, repr=False)

    @property
    def available(self) -> bool:
        return self.mean is not None

    @property
    def note(self) -> str | None:
        if self.available:
            return None
        return (
            f"{self.labelled_rows} fully labelled row(s) in label set {self.label_set!r}: the correction needs at "
            f"least {self.minimum_rows} (ctxprec labels sample / import); the figures are the judge's"
        )

    def describe(self) -> str:
        """``corrected mean 0.612 [95% CI 0.571-0.655] (31 labelled rows of 250; judge's mean 0.700)``."""
        if not self.available:
            return self.note or ""
        return (
            f"corrected mean {self.mean:.3f} [95% CI {self.ci_low:.3f}-{self.ci_high:.3f}] "
            f"({self.labelled_rows} labelled rows of {self.rows}; judge's mean {self.judge_mean:.3f}, "
            f"correction {self.correction:+.3f})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``corrected`` object of ``check --json`` (JSON-safe)."""
        return {
            "mean": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "labelled_rows": self.labelled_rows,
            "method": self.method,
            "rows": self.rows,
            "judge_mean": self.judge_mean,
            "correction": self.correction,
            "label_set": self.label_set,
            "minimum_rows": self.minimum_rows,
            "partial_rows": self.partial_rows,
            "note": self.note,
        }


def difference_estimate(
    judge_mean: float | None,
    rows: int,
    gold: Sequence[float],
    judge: Sequence[float],
    *,
    level: float = 0.95,
    minimum: int = MIN_LABELLED_ROWS,
    label_set: str = DEFAULT_LABEL_SET,
) -> CorrectedEstimate:
    """The corrected mean of ``rows`` rows whose judge mean is ``judge_mean``, from the labelled
    rows' gold and judge scores (see the module docstring)."""
    if len(gold) != len(judge):
        raise ValueError("gold and judge scores must pair up")
    n = len(gold)
    if judge_mean is None or n < max(minimum, 2) or rows <= 0:
        return CorrectedEstimate(None, None, None, n, max(rows, 0), judge_mean, None, label_set, minimum_rows=minimum)
    big_n = max(rows, n)  # the labelled rows are rows of the partition
    d = [g - j for g, j in zip(gold, judge)]
    mean_d = math.fsum(d) / n
    fpc = 1.0 - n / big_n
    t = t_quantile(0.5 + level / 2, n - 1)
    if max(d) - min(d) <= _ZERO:
        half = fpc * min(1.0, 3.0 / n)  # the rule of three: see the module docstring
        se = half / t if t else 0.0
    else:
        var = math.fsum((x - mean_d) ** 2 for x in d) / (n - 1)
        se = math.sqrt(fpc * var / n)
        half = t * se
    mean = judge_mean + mean_d
    return CorrectedEstimate(
        _clip(mean),
        _clip(mean - half),
        _clip(mean + half),
        n,
        big_n,
        judge_mean,
        mean_d,
        label_set,
        minimum_rows=minimum,
        level=level,
        se=se,
        df=float(n - 1),
    )


@dataclass(frozen=True)
class LabelledRow:
    """A score row with labels: its gold score when every node is labelled (else None)."""

    partition_key: str
    log_id: str
    judge: float
    gold: float | None

    @property
    def complete(self) -> bool:
        return self.gold is not None


def gold_score(labels: dict[int, bool], verdicts: Any, judge: float) -> float | None:
    """The formula over the labels of nodes 1..n (n = the row's verdicts); None when a node is
    unlabelled. A score stored under ``strict_mode`` (0 although its verdicts score above 0)
    gets a strict gold score too."""
    n = verdict_count(verdicts)
    if n == 0 or any(k not in labels for k in range(1, n + 1)):
        return None
    gold = contextual_precision([labels[k] for k in range(1, n + 1)])
    raw = _verdict_score(verdicts)
    if raw is not None and abs(raw - judge) > 1e-9 and judge in (0.0, 1.0):
        gold = apply_strict(gold, True)
    return gold


def _verdict_score(verdicts: Any) -> float | None:
    import json

    if isinstance(verdicts, (str, bytes)):
        verdicts = json.loads(verdicts)
    try:
        ordered = sorted(verdicts, key=lambda v: int(v["node"]))
        return contextual_precision([bool(v["relevant"]) for v in ordered])
    except (KeyError, TypeError, ValueError):
        return None


def labelled_rows(
    conn: Connection,
    scores: FromClause,
    where: Sequence[sa.ColumnElement[bool]],
    *,
    label_set: str = DEFAULT_LABEL_SET,
    source_table: str | None = None,
    schema: str | None = None,
) -> list[LabelledRow]:
    """The score rows matching ``where`` (a population's rows of some partitions) that have labels
    in ``label_set``, each with its gold score when fully labelled. Labels are matched on the
    score row's ``source_table`` (``source_table`` when the scores table has no such column)."""
    from ..warehouse.reflect import table_names

    if LABELS not in table_names(conn, schema):
        return []
    lt = labels_table(schema)
    on = [lt.c.log_id == scores.c.log_id, lt.c.label_set == label_set]
    if "source_table" in scores.c:
        on.append(lt.c.source_table == scores.c.source_table)
    elif source_table is not None:
        on.append(lt.c.source_table == source_table)
    q = (
        sa.select(scores.c.partition_key, scores.c.log_id, scores.c.score, scores.c.verdicts, lt.c.node, lt.c.relevant)
        .select_from(scores.join(lt, sa.and_(*on)))
        .where(*where, scores.c.score.is_not(None))
    )
    rows: dict[tuple[str, str], tuple[float, Any, dict[int, bool]]] = {}
    for pk, log_id, score, verdicts, node, relevant in conn.execute(q):
        key = (str(pk), str(log_id))
        rec = rows.get(key)
        if rec is None:
            rec = rows[key] = (float(score), verdicts, {})
        rec[2][int(node)] = bool(relevant)
    out = []
    for (pk, log_id), (judge, verdicts, labels) in sorted(rows.items()):
        out.append(LabelledRow(pk, log_id, judge, gold_score(labels, verdicts, judge)))
    return out
