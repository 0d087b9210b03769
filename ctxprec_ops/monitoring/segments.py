"""Per-segment checks: ``check --by COL`` and ``trend --by COL``.

Each value of a segment column (``ctxprec score --segment COL``) is checked like a partition: its
scores of the day against the pooled scores of the same value on the previous scored partitions
(the same rules as ``check``: thresholds, the regression rule with its one-sided Welch test, and
the volume rule on the segment's scored rows). Then, across the segments of the day:

- a value with fewer than ``min_rows`` scored rows that day is listed as **too few rows** and
  not alerted on (a tenant with three queries a day is noise, not a regression);
- the regression p-values of the other segments are corrected with **Holm's** step-down method,
  and a segment's regression alert fires only when its Holm-adjusted p is below ``alpha``. Holm
  controls the family-wise error rate — the chance that *any* segment alert of the day is false —
  at ``alpha`` whatever the dependence between segments (they share the judge, the prompt and the
  day's traffic, so their tests are not independent): an alert pages a person, so a false one per
  check is what has to be rare. Benjamini–Hochberg would bound the *share* of false alerts instead
  (more power with many segments, but a guarantee that assumes positive dependence and tolerates a
  false page now and then); it is the better choice for exploring, which is ``compare``'s job, and
  ``compare`` reports Holm-corrected significance too so that both tell the same story.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlalchemy.engine import Engine

from ..secrets import redact
from ..warehouse.source import parse_partition_key
from .alerts import Alert
from .check import DEFAULT_METRIC, CheckResult, check_history, lookback
from .corrected import attach_segment_corrected
from .history import History, PartitionData, load_history, partition_range
from .population import Population, engine_scope
from .rules import AlertRules
from .segment_data import label, segment_moments, segment_source
from .stats import finite_or_none, holm

__all__ = ["SegmentResult", "SegmentCheck", "check_segments", "segment_checks", "segment_trend", "DEFAULT_MIN_ROWS"]

#: scored rows a segment needs on the checked day to be alerted on
DEFAULT_MIN_ROWS = 20

Status = Literal["alert", "ok", "too few rows"]


@dataclass
class SegmentResult:
    """One segment value on one day: its check and its standing after the correction."""

    value: str | None
    result: CheckResult
    status: Status
    p_adjusted: float | None = None

    @property
    def label(self) -> str:
        return label(self.value)

    @property
    def rows(self) -> int:
        return self.result.figures.summary.n

    @property
    def mean(self) -> float | None:
        return self.result.figures.summary.mean

    @property
    def baseline_mean(self) -> float | None:
        return self.result.baseline.summary.mean

    @property
    def delta(self) -> float | None:
        """Mean minus baseline mean (negative: worse)."""
        drop = self.result.regression.drop
        return None if drop is None else -drop

    @property
    def p_value(self) -> float | None:
        return self.result.regression.p_value

    @property
    def alerts(self) -> list[Alert]:
        return self.result.alerts

    def to_dict(self) -> dict[str, Any]:
        s = self.result.figures.summary
        return {
            "value": self.value,
            "label": self.label,
            "status": self.status,
            "rows": self.rows,
            "mean": finite_or_none(self.mean),
            "ci_low": finite_or_none(s.ci_low),
            "ci_high": finite_or_none(s.ci_high),
            "baseline_mean": finite_or_none(self.baseline_mean),
            "baseline_rows": self.result.baseline.summary.n,
            "delta": finite_or_none(self.delta),
            "p_value": finite_or_none(self.p_value),
            "p_adjusted": finite_or_none(self.p_adjusted),
            "verdict": self.result.regression.verdict,
            "alerts": [a.to_dict() for a in self.alerts],
            "corrected": self.result.corrected.to_dict() if self.result.corrected is not None else None,
        }


@dataclass
class SegmentCheck:
    """Every value of one segment column on one partition."""

    partition_key: str
    metric: str
    by: str
    population: Population | None
    rules: AlertRules
    min_rows: int
    segments: list[SegmentResult] = field(default_factory=list)
    correction: str = "holm"

    @property
    def alerting(self) -> list[SegmentResult]:
        return [s for s in self.segments if s.status == "alert"]

    @property
    def too_few(self) -> list[SegmentResult]:
        return [s for s in self.segments if s.status == "too few rows"]

    @property
    def fired(self) -> bool:
        return bool(self.alerting)

    @property
    def tested(self) -> int:
        """Segments whose regression p-value entered Holm's correction."""
        return sum(1 for s in self.segments if s.p_adjusted is not None)

    @property
    def alerts(self) -> list[Alert]:
        return [a for s in self.alerting for a in s.alerts]

    def by_delta(self) -> list[SegmentResult]:
        """Worst first: the segments sorted by delta (those without one last)."""
        return sorted(self.segments, key=lambda s: (s.delta is None, s.delta if s.delta is not None else 0.0, s.label))

    def too_few_line(self) -> str | None:
        if not self.too_few:
            return None
        items = ", ".join(f"{self.by}={s.label} ({s.rows} rows)" for s in self.too_few)
        return f"too few rows (< {self.min_rows}, not alerted on): {items}"

    def summary(self) -> str:
        lines = [
            f"{self.partition_key} {self.metric} by {self.by}: {len(self.segments)} segment(s), "
            f"{len(self.alerting)} alerting (regression p-values Holm-corrected across "
            f"{self.tested} segment(s))"
        ]
        lines += [f"  [{a.severity}] {a.rule}: {a.message}" for a in self.alerts]
        few = self.too_few_line()
        if few:
            lines.append(few)
        return redact("\n".join(lines))

    def to_dict(self) -> dict[str, Any]:
        return {
            "partition_key": self.partition_key,
            "metric": self.metric,
            "by": self.by,
            "fired": self.fired,
            "correction": self.correction,
            "min_rows": self.min_rows,
            "segments": [s.to_dict() for s in self.by_delta()],
        }


def _segment_history(history: History, value_moments: dict[str, Any]) -> History:
    parts = {pk: PartitionData(pk, m, rows=m.n) for pk, m in value_moments.items()}
    keys = sorted(parts)
    return History(history.metric, history.population, parts, keys, keys, list(history.run_keys))


def _named(alert: Alert, by: str, value: str | None, rows: int, extra: str = "") -> Alert:
    return replace(
        alert, message=f"{by}={label(value)} ({rows} rows): {alert.message}{extra}", segment=f"{by}={label(value)}"
    )


def _finish(check: SegmentCheck, raw: list[tuple[str | None, CheckResult]]) -> SegmentCheck:
    """Apply the minimum row count and Holm's correction; name the segment in each alert."""
    rules, by = check.rules, check.by
    candidates = [(v, r) for v, r in raw if r.figures.summary.n >= check.min_rows]
    tested = [
        r.regression.p_value if r.regression.verdict in ("regression", "no regression") else None for _, r in candidates
    ]
    adjusted = dict(zip((id(r) for _, r in candidates), holm(tested)))
    m = sum(1 for p in tested if p is not None)
    for value, r in raw:
        if r.figures.summary.n < check.min_rows:
            r.alerts = []
            check.segments.append(SegmentResult(value, r, "too few rows"))
            continue
        adj = adjusted.get(id(r))
        kept: list[Alert] = []
        for a in r.alerts:
            if a.rule != "regression":
                kept.append(_named(a, by, value, r.figures.summary.n))
            elif adj is not None and adj < rules.alpha:
                extra = f"; Holm-adjusted p={adj:.2g} over {m} segment(s)"
                kept.append(_named(a, by, value, r.figures.summary.n, extra))
        if r.regression.verdict == "regression" and not any(a.rule == "regression" for a in kept):
            r.regression = replace(
                r.regression,
                verdict="no regression",
                detail=f"Holm-adjusted p={adj:.2g} >= {rules.alpha:g} over {m} segment(s)" if adj is not None else "",
            )
        r.alerts = kept
        check.segments.append(SegmentResult(value, r, "alert" if kept else "ok", adj))
    return check


def segment_checks(
    engine: Engine,
    history: History,
    by: str,
    keys: Sequence[str],
    rules: AlertRules,
    *,
    min_rows: int = DEFAULT_MIN_ROWS,
    schema: str | None = None,
) -> list[SegmentCheck]:
    """One ``SegmentCheck`` per partition of ``keys`` (oldest first), from a loaded population
    ``history``: the segments' figures of those days and their baselines' in one ``GROUP BY``."""
    pop = history.population
    wanted: set[str] = set(keys)
    for k in keys:
        wanted.update(history.scored_before(k, lookback(rules)))
    with engine.connect() as conn:
        src = segment_source(conn, pop, by, schema=schema)
        assert pop is not None
        moments = segment_moments(conn, src, pop, by, sorted(wanted))
        checked = _checked(history, keys, moments, rules)
        for key, raw in checked:
            attach_segment_corrected(conn, src, pop, by, key, raw, rules)
    out = []
    for key, raw in checked:
        check = SegmentCheck(key, history.metric, by, pop, rules, min_rows)
        out.append(_finish(check, raw))
    return out


def _checked(
    history: History, keys: Sequence[str], moments: dict[tuple[str, str | None], Any], rules: AlertRules
) -> list[tuple[str, list[tuple[str | None, CheckResult]]]]:
    """Per partition of ``keys``: each segment value's check against its own baseline."""
    per_value: dict[str | None, dict[str, Any]] = {}
    for (pk, value), m in moments.items():
        per_value.setdefault(value, {})[pk] = m
    histories = {v: _segment_history(history, parts) for v, parts in per_value.items()}
    out = []
    for key in keys:
        raw = []
        for value in sorted(histories, key=lambda v: (v is not None, v or "")):
            h = histories[value]
            if key in h.partitions or h.scored_before(key, 1):
                raw.append((value, check_history(h, key, rules)))
        out.append((key, raw))
    return out


def check_segments(
    engine_or_url: Engine | str,
    partition_key: str,
    by: str,
    *,
    metric: str = DEFAULT_METRIC,
    rules: AlertRules | None = None,
    min_rows: int = DEFAULT_MIN_ROWS,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
) -> SegmentCheck:
    """Check every value of segment column ``by`` on one partition (see the module's rules)."""
    parse_partition_key(partition_key)
    rules = rules or AlertRules()
    if min_rows < 1:
        raise ValueError(f"min_rows must be at least 1, got {min_rows}")
    with engine_scope(engine_or_url) as engine:
        history = load_history(
            engine, metric, population_partition=partition_key, up_to=partition_key,
            judge_model=judge_model, prompt_version=prompt_version, source_table=source_table, mapping=mapping,
        )  # fmt: skip
        return segment_checks(engine, history, by, [partition_key], rules, min_rows=min_rows)[0]


def segment_trend(
    engine_or_url: Engine | str,
    by: str,
    *,
    metric: str = DEFAULT_METRIC,
    days: int = 14,
    end: str | None = None,
    rules: AlertRules | None = None,
    min_rows: int = DEFAULT_MIN_ROWS,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
) -> list[SegmentCheck]:
    """``check_segments`` for every day of the trend window (as ``trend_results`` chooses it)."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    if end is not None:
        parse_partition_key(end)
    rules = rules or AlertRules()
    with engine_scope(engine_or_url) as engine:
        index = load_history(
            engine, metric, up_to=end, judge_model=judge_model, prompt_version=prompt_version,
            source_table=source_table, mapping=mapping,
        )  # fmt: skip
        known = sorted(set(index.seen_keys) | set(index.scored_keys))
        if not known:
            return []
        last = end or known[-1]
        keys = partition_range(last, days, start=min(known[0], last))
        return segment_checks(engine, index, by, keys, rules, min_rows=min_rows)
