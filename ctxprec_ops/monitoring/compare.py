"""``compare``: did the candidate (e.g. retriever v2) score better than the baseline (v1), overall
and per segment?

Rows are the population's scores in the partitions ``partition..until`` whose segment column
``by`` is ``baseline`` or ``candidate``. All three columns — ``by``, ``pair_on``, ``within`` —
are segment columns recorded at scoring time (``ctxprec score --segment``) or, when not
recorded, columns of the input table read by ``log_id`` after the fact
(``segment_data.compared_columns``). The population is chosen over the whole range
(``range_population``): the one scoring key of those rows that fits the named parts; several keys
fit — a judge changed mid-range — ``MixedPopulationsError`` names them (pooled they would be two
measurements; one alone would silently drop the other's rows); rows of other keys are listed
(``other_populations``) when one was named.

- **Paired** (``pair_on``): a pair is one value of ``pair_on`` (within one ``within`` segment)
  that has rows on both sides; a side's several rows for it (repeats, several days) are averaged
  first. The test is the paired t-test of the per-pair differences (candidate − baseline), the
  interval the t-interval of their mean. Rows whose ``pair_on`` value has no partner, or is NULL,
  are counted (``unpaired_*``) and left out. ``*_rows`` count rows, not pairs: the rows behind
  the pairs plus the unpaired ones.
- **Unpaired**: Welch's t-test of the two sides' rows, the Welch–Satterthwaite t-interval of the
  difference of means.

Why t-intervals and not a bootstrap: they need only counts, sums and sums of squares, which the
database aggregates (a million rows never leave it), they are deterministic, and at the sizes
compared (tens of pairs and up) the mean difference of bounded scores is close to normal.

Per ``within`` segment the same figures; ``significant`` is Holm-corrected across the segments
(family-wise error ≤ ``alpha``; see ``segments.py`` for why Holm). Overall ``significant`` is the
test's own p < ``alpha``. ``worse``: the candidate is significantly below the baseline overall or
in some segment (``--fail-if-worse`` exits 3 on it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..secrets import redact
from ..warehouse.schema import existing_output_tables
from ..warehouse.source import parse_partition_key
from .check import DEFAULT_METRIC
from .corrected import safe_corrected_comparison
from .history import partition_range
from .population import Population, engine_scope, resolve_population
from .range_population import OtherPopulation, range_population
from .segment_data import SegmentError, SegmentSource, compared_columns, label, value_filter
from .stats import Moments, TestResult, finite_or_none, holm, paired_test, welch_test

__all__ = ["Comparison", "ComparisonSegment", "compare"]


@dataclass
class ComparisonSegment:
    """The comparison within one segment value (or overall, ``value`` unused)."""

    value: str | None
    test: TestResult
    baseline: Moments
    candidate: Moments
    paired: bool
    pairs: int | None = None
    unpaired_baseline: int = 0
    unpaired_candidate: int = 0
    #: paired: the rows behind the pairs on each side (a side's repeats of a pair value count each)
    paired_rows_baseline: int = 0
    paired_rows_candidate: int = 0
    p_adjusted: float | None = None
    significant: bool = False

    @property
    def label(self) -> str:
        return label(self.value)

    @property
    def baseline_rows(self) -> int:
        """The baseline's rows in the comparison's range: paired ones plus those left unpaired."""
        return self.paired_rows_baseline + self.unpaired_baseline if self.paired else self.baseline.n

    @property
    def candidate_rows(self) -> int:
        return self.paired_rows_candidate + self.unpaired_candidate if self.paired else self.candidate.n

    def figures(self) -> dict[str, Any]:
        t = self.test
        return {
            "pairs": self.pairs,
            "baseline_rows": self.baseline_rows,
            "candidate_rows": self.candidate_rows,
            "unpaired_baseline": self.unpaired_baseline,
            "unpaired_candidate": self.unpaired_candidate,
            "baseline_mean": finite_or_none(self.baseline.mean),
            "candidate_mean": finite_or_none(self.candidate.mean),
            "delta": finite_or_none(t.delta),
            "ci_low": finite_or_none(t.ci_low),
            "ci_high": finite_or_none(t.ci_high),
            "p_value": finite_or_none(t.p_value),
        }


@dataclass
class Comparison:
    """Outcome of ``compare``; ``to_dict()`` is the ``--json`` object."""

    metric: str
    population: Population | None
    partitions: list[str]
    by: str
    baseline_value: str | None
    candidate_value: str | None
    pair_on: str | None
    within: str | None
    alpha: float
    overall: ComparisonSegment
    segments: list[ComparisonSegment] = field(default_factory=list)
    #: rows of the range under other populations, not compared (a population was named)
    other_populations: list[OtherPopulation] = field(default_factory=list)
    #: the sides' label-corrected means and delta (``corrected.corrected_comparison``); None: no labels
    corrected: dict[str, Any] | None = None

    @property
    def paired(self) -> bool:
        return self.pair_on is not None

    @property
    def method(self) -> str:
        return "paired t-test" if self.paired else "Welch t-test"

    @property
    def significant(self) -> bool:
        return self.overall.significant

    @property
    def worse_segments(self) -> list[ComparisonSegment]:
        return [s for s in self.segments if s.significant and (s.test.delta or 0.0) < 0]

    @property
    def worse(self) -> bool:
        """Significantly worse overall or in any segment."""
        return (self.overall.significant and (self.overall.test.delta or 0.0) < 0) or bool(self.worse_segments)

    def to_dict(self) -> dict[str, Any]:
        pop = self.population
        return {
            "metric": self.metric,
            "judge_model": pop.judge_model if pop else None,
            "prompt_version": pop.prompt_version if pop else None,
            "source_table": pop.source_table if pop else None,
            "mapping": pop.mapping if pop else None,
            "partitions": [self.partitions[0], self.partitions[-1]],
            "by": self.by,
            "baseline": self.baseline_value,
            "candidate": self.candidate_value,
            "pair_on": self.pair_on,
            "within": self.within,
            "method": self.method,
            "ci_method": "t-interval (95%)",
            "alpha": self.alpha,
            **self.overall.figures(),
            "significant": self.overall.significant,
            "worse": self.worse,
            "correction": "holm" if self.within else None,
            "segments": [
                {
                    "value": s.value,
                    **s.figures(),
                    "p_adjusted": finite_or_none(s.p_adjusted),
                    "significant": s.significant,
                }
                for s in self.segments
            ],
            "other_populations": [o.to_dict() for o in self.other_populations],
            "corrected": self.corrected,
        }

    def headline(self) -> str:
        o, t = self.overall, self.overall.test
        span = self.partitions[0] if len(self.partitions) == 1 else f"{self.partitions[0]}..{self.partitions[-1]}"
        size = f"{o.pairs} pairs" if self.paired else f"{o.baseline.n} vs {o.candidate.n} rows"
        if t.delta is None:
            sides = f"{label(self.candidate_value)} vs {label(self.baseline_value)}"
            return f"{self.metric} {span}: {self.by} {sides}: no data ({size})"
        ci = f" [95% CI {t.ci_low:+.3f}, {t.ci_high:+.3f}]" if t.ci_low is not None and not t.no_variance else ""
        p = f", p={t.p_value:.2g}" if t.p_value is not None else ", no test (n < 2)"
        if t.no_variance:  # a p of 0 or 1 and a zero-width interval would read as measured: say why
            alike = "every pair differs by exactly this" if self.paired else "each side's scores are all alike"
            p = f", no variance: {alike}"
        verdict = "significant" if o.significant else "not significant"
        return (
            f"{self.metric} {span}: {self.by} {label(self.candidate_value)} - {label(self.baseline_value)} = "
            f"{t.delta:+.3f}{ci} ({self.method}, {size}{p}; {verdict} at {self.alpha:g})"
        )

    def summary(self) -> str:
        lines = [self.headline()]
        o = self.overall
        if self.paired and (o.unpaired_baseline or o.unpaired_candidate):
            lines.append(
                f"unpaired rows left out: {o.unpaired_baseline} {label(self.baseline_value)}, "
                f"{o.unpaired_candidate} {label(self.candidate_value)} (no partner on {self.pair_on}, or NULL)"
            )
        for s in self.worse_segments:
            p = "no variance" if s.test.no_variance else f"Holm-adjusted p={s.p_adjusted:.2g}"
            lines.append(f"worse: {self.within}={s.label}: delta {s.test.delta:+.3f}, {p}")
        if self.other_populations:
            n = sum(o.rows for o in self.other_populations)
            lines.append(
                f"{n:,} rows of other populations in the range are not compared: "
                + "; ".join(o.describe() for o in self.other_populations)
            )
        if self.corrected is not None:
            lines.append(corrected_line(self.corrected))
        return redact("\n".join(lines))


def corrected_line(c: dict[str, Any]) -> str:
    """One line on the label-corrected comparison (``Comparison.corrected``)."""
    a, b = c["baseline"], c["candidate"]
    if c.get("delta") is None:
        return (
            f"labels: {a['labelled_rows']} / {b['labelled_rows']} fully labelled rows (baseline / candidate): "
            f"a corrected delta needs >= {a['minimum_rows']} on each side"
        )
    return (
        f"corrected with labels: delta {c['delta']:+.3f} [95% CI {c['ci_low']:+.3f}, {c['ci_high']:+.3f}] "
        f"(corrected means {a['mean']:.3f} vs {b['mean']:.3f}; "
        f"{a['labelled_rows']} / {b['labelled_rows']} labelled rows)"
    )


def _is_side(col: sa.ColumnElement[Any], value: str | None) -> sa.ColumnElement[bool]:
    return value_filter(col, value)


def _unpaired(
    conn: sa.Connection, src: SegmentSource, where: list, by: str, within: str | None, a: str | None, b: str | None
):
    """Moments per (within value, side) of the rows."""
    t = src.table
    side = sa.case((_is_side(src.col(by), a), sa.literal(0)), else_=sa.literal(1)).label("side")
    group: list[Any] = [side]
    if within is not None:
        group.insert(0, src.col(within))
    score = t.c.score
    q = (
        sa.select(*group, sa.func.count(score), sa.func.sum(score), sa.func.sum(score * score),
                  sa.func.min(score), sa.func.max(score))
        .where(*where)
        .group_by(*group)
    )  # fmt: skip
    out: dict[str | None, list[Moments]] = {}
    for row in conn.execute(q):
        w = row[0] if within is not None else None
        s_, n, total, sq, lo, hi = row[-6:]
        sides = out.setdefault(w, [Moments(), Moments()])
        sides[int(s_)] = Moments(int(n), float(total), float(sq), float(lo), float(hi), None)
    return out


def _paired(conn, src: SegmentSource, where: list, by: str, pair_on: str, within: str | None, a, b):
    """Per within value: moments of the per-pair differences and of each side's per-pair means,
    and the unpaired row counts (a pair value on one side only, or a NULL pair value)."""
    col_b, col_p = src.col(by), src.col(pair_on)
    t = src.table
    is_a, is_b = _is_side(col_b, a), _is_side(col_b, b)
    keys: list[Any] = [col_p] if within is None else [src.col(within), col_p]
    per_pair = (
        sa.select(
            *[k.label(f"k{i}") for i, k in enumerate(keys)],
            sa.func.avg(sa.case((is_a, t.c.score))).label("ma"),
            sa.func.avg(sa.case((is_b, t.c.score))).label("mb"),
            sa.func.count(sa.case((is_a, 1))).label("na"),
            sa.func.count(sa.case((is_b, 1))).label("nb"),
        )
        .where(*where, col_p.is_not(None))
        .group_by(*keys)
        .subquery()
    )
    p = per_pair.c
    d = p.mb - p.ma
    both = sa.and_(p.ma.is_not(None), p.mb.is_not(None))
    group = [p.k0] if within is not None else []
    q = sa.select(
        *group,
        sa.func.count(d), sa.func.sum(d), sa.func.sum(d * d), sa.func.min(d), sa.func.max(d),
        sa.func.sum(sa.case((both, p.ma))), sa.func.sum(sa.case((both, p.ma * p.ma))),
        sa.func.min(sa.case((both, p.ma))), sa.func.max(sa.case((both, p.ma))),
        sa.func.sum(sa.case((both, p.mb))), sa.func.sum(sa.case((both, p.mb * p.mb))),
        sa.func.min(sa.case((both, p.mb))), sa.func.max(sa.case((both, p.mb))),
        sa.func.sum(sa.case((p.mb.is_(None), p.na), else_=0)), sa.func.sum(sa.case((p.ma.is_(None), p.nb), else_=0)),
        sa.func.sum(sa.case((both, p.na), else_=0)), sa.func.sum(sa.case((both, p.nb), else_=0)),
    ).group_by(*group)  # fmt: skip
    out: dict[str | None, dict[str, Any]] = {}
    for row in conn.execute(q):
        w = row[0] if within is not None else None
        n, ds, dq, dlo, dhi, sa_, qa, loa, hia, sb, qb, lob, hib, ua, ub, ra, rb = row[len(group) :]
        n = int(n or 0)
        out[w] = {
            "d": _m(n, ds, dq, dlo, dhi), "a": _m(n, sa_, qa, loa, hia), "b": _m(n, sb, qb, lob, hib),
            "ua": int(ua or 0), "ub": int(ub or 0), "ra": int(ra or 0), "rb": int(rb or 0),
        }  # fmt: skip
    # rows whose pair value is NULL cannot be paired: counted per side
    side = sa.case((is_a, sa.literal(0)), else_=sa.literal(1))
    nq_group = [src.col(within)] if within is not None else []
    nq = sa.select(*nq_group, side, sa.func.count()).where(*where, col_p.is_(None)).group_by(*nq_group, side)
    for row in conn.execute(nq):
        w = row[0] if within is not None else None
        rec = out.setdefault(w, {"d": Moments(), "a": Moments(), "b": Moments(), "ua": 0, "ub": 0, "ra": 0, "rb": 0})
        rec["ua" if int(row[-2]) == 0 else "ub"] += int(row[-1])
    return out


def _m(n: int, total: Any, sq: Any, lo: Any, hi: Any) -> Moments:
    return Moments(n, float(total), float(sq), float(lo), float(hi), None) if n else Moments(passed=None)


def _pool(parts: Sequence[Moments]) -> Moments:
    out = Moments(passed=None)
    for m in parts:
        out = out + m
    return out


def compare(
    engine_or_url: Engine | str,
    partition: str,
    *,
    by: str,
    baseline: str | None,
    candidate: str | None,
    until: str | None = None,
    pair_on: str | None = None,
    within: str | None = None,
    metric: str = DEFAULT_METRIC,
    alpha: float = 0.05,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
    id_column: str | None = None,
    label_set: str = "default",
) -> Comparison:
    """Compare the ``candidate`` value of segment column ``by`` with the ``baseline`` value (None:
    the ``(null)`` segment) over the partitions ``partition..until`` (see the module's notes).
    ``id_column``: the input table's id column, for columns read from it (default ``id``)."""
    parse_partition_key(partition)
    end = until or partition
    if parse_partition_key(end) < parse_partition_key(partition):
        raise ValueError(f"--until {end} is before --partition {partition}")
    if baseline == candidate:
        raise ValueError(f"baseline and candidate are the same value {label(baseline)!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha}")
    cols = [c for c in (by, pair_on, within) if c is not None]
    if len(set(cols)) < len(cols):
        raise ValueError("--by, --pair-on and --within must name different columns")
    days = (parse_partition_key(end) - parse_partition_key(partition)).days + 1
    keys = partition_range(end, days)
    given = {"judge_model": judge_model, "prompt_version": prompt_version, "source_table": source_table,
             "mapping": mapping}  # fmt: skip
    with engine_scope(engine_or_url) as engine:
        tables = existing_output_tables(engine)
        with engine.connect() as conn:
            fallback = resolve_population(conn, tables, metric, partition_key=end, up_to=end, **given)
            src = compared_columns(conn, fallback, *cols, id_column=id_column or "id")
            sides = sa.or_(_is_side(src.col(by), baseline), _is_side(src.col(by), candidate))
            pop, others = range_population(conn, src, metric, keys, [*src.recorded(*cols), sides], given)
            pop = pop or fallback
            assert pop is not None
            t = src.table
            where = [
                pop.where(t),
                t.c.partition_key >= keys[0],
                t.c.partition_key <= keys[-1],
                *src.recorded(*cols),
                sides,
            ]
            if pair_on is None:
                groups = _unpaired(conn, src, where, by, within, baseline, candidate)
            else:
                groups = _paired(conn, src, where, by, pair_on, within, baseline, candidate)
            rows_a, rows_b = _side_rows(groups, pair_on is not None)
            if not rows_a or not rows_b:
                _no_rows(conn, src, pop, keys, by, baseline if not rows_a else candidate)
            corrected = safe_corrected_comparison(conn, src, pop, where, by, baseline, candidate, label_set)
    segs = []
    for w in sorted(groups, key=lambda v: (v is not None, v or "")):
        g = groups[w]
        if pair_on is None:
            a, b = g
            segs.append(ComparisonSegment(w, welch_test(a, b), a, b, False))
        else:
            segs.append(
                ComparisonSegment(
                    w, paired_test(g["d"]), g["a"], g["b"], True, g["d"].n, g["ua"], g["ub"], g["ra"], g["rb"]
                )
            )
    if pair_on is None:
        a, b = _pool([s.baseline for s in segs]), _pool([s.candidate for s in segs])
        overall = ComparisonSegment(None, welch_test(a, b), a, b, False)
    else:
        d = _pool([groups[s.value]["d"] for s in segs])
        overall = ComparisonSegment(
            None, paired_test(d), _pool([s.baseline for s in segs]), _pool([s.candidate for s in segs]), True,
            d.n, sum(s.unpaired_baseline for s in segs), sum(s.unpaired_candidate for s in segs),
            sum(s.paired_rows_baseline for s in segs), sum(s.paired_rows_candidate for s in segs),
        )  # fmt: skip
    overall.significant = overall.test.p_value is not None and overall.test.p_value < alpha
    if within is None:
        segs = []
    else:
        for s, adj in zip(segs, holm([s.test.p_value for s in segs])):
            s.p_adjusted = adj
            s.significant = adj is not None and adj < alpha
        segs.sort(key=lambda s: (s.test.delta is None, s.test.delta if s.test.delta is not None else math.inf, s.label))
    return Comparison(
        metric, pop, keys, by, baseline, candidate, pair_on, within, alpha, overall, segs, others, corrected
    )


def _side_rows(groups: dict[str | None, Any], paired: bool) -> tuple[int, int]:
    if paired:
        a = sum(g["ra"] + g["ua"] for g in groups.values())
        b = sum(g["rb"] + g["ub"] for g in groups.values())
        return a, b
    return sum(g[0].n for g in groups.values()), sum(g[1].n for g in groups.values())


def _no_rows(conn, src: SegmentSource, pop: Population, keys: list[str], by: str, missing: str | None) -> None:
    t = src.table
    q = (
        sa.select(src.col(by), sa.func.count())
        .where(pop.where(t), t.c.partition_key >= keys[0], t.c.partition_key <= keys[-1], *src.recorded(by))
        .group_by(src.col(by))
        .order_by(sa.func.count().desc())
        .limit(20)
    )
    found = ", ".join(f"{label(v)} ({n:,} rows)" for v, n in conn.execute(q))
    span = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
    raise SegmentError(
        f"no rows with {by} = {label(missing)!r} in {span}"
        + (f"; values there: {found}" if found else f"; no rows carry {by} there")
    )
