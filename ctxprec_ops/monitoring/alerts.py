"""Alert rules over a partition's figures and its trailing baseline (pure functions).

Rules (each an ``Alert`` with a one-line message naming the partition, the figures and the rule):

- ``min_mean`` / ``min_pass_rate`` (severity ``error``): threshold breaches, only when configured.
- ``regression`` (``warn``): the mean is more than ``min_drop`` below the pooled baseline mean AND
  a one-sided Welch's t-test gives ``p < alpha``. A small or noisy partition does not fire on
  noise. Without a baseline of at least ``min_baseline_partitions`` partitions and
  ``min_baseline_cases`` cases there is no regression verdict ("insufficient baseline" note); a
  partition with fewer than ``min_cases`` scored cases gets none either, and the note says that
  the *partition* is too small (with the minimum), not the baseline.
- ``volume`` (``warn``): rows seen < ``volume_ratio`` x the baseline's median rows per partition;
  a partition with no rows at all is checked too (a silent pipeline is an incident).
- ``failure_rate`` (``warn``): failed rows / rows seen > ``max_failure_rate``.

The score baseline leaves out partitions that fired the regression rule themselves
(``exclude_regressions_from_baseline``, default True): as in statistical process control, an
out-of-control partition is not part of the reference, so a multi-day dip neither drags the
baseline down (hiding its own later days) nor makes the recovery day look like a jump.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from .figures import BaselineFigures, PartitionFigures
from .rules import AlertRules
from .stats import Moments, finite_or_none, welch_less

__all__ = ["Alert", "RegressionTest", "evaluate_rules", "partition_head", "RULE_KINDS"]

Severity = Literal["error", "warn"]

#: rule name -> the family the orchestrators map to a check (threshold | regression | volume)
RULE_KINDS = {
    "min_mean": "threshold",
    "min_pass_rate": "threshold",
    "regression": "regression",
    "volume": "volume",
    "failure_rate": "volume",
}


@dataclass(frozen=True)
class Alert:
    """One fired rule. ``severity`` is ``error`` for thresholds, ``warn`` for the others."""

    rule: str
    severity: Severity
    partition_key: str
    metric: str
    message: str
    value: float | None = None
    limit: float | None = None
    #: ``column=value`` of the segment whose rows fired it (``check --by``); None for the partition
    segment: str | None = None

    @property
    def kind(self) -> str:
        return RULE_KINDS.get(self.rule, self.rule)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["value"], d["limit"] = finite_or_none(self.value), finite_or_none(self.limit)
        d["kind"] = self.kind
        return d


@dataclass(frozen=True)
class RegressionTest:
    """Outcome of the regression rule, fired or not (kept for metadata and reports)."""

    verdict: Literal["regression", "no regression", "insufficient baseline", "partition too small", "no scores"]
    drop: float | None = None  # baseline mean - partition mean (positive = worse)
    p_value: float | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict,
            "drop": finite_or_none(self.drop),
            "p_value": finite_or_none(self.p_value),
            "detail": self.detail,
        }


def _p(p: float) -> str:
    return f"{p:.2g}" if p < 0.0001 else f"{p:.4f}"


def partition_head(fig: PartitionFigures, metric: str) -> str:
    """``2026-11-28 contextual_precision`` (plus ``, sample of 120 of 1,000 rows`` for a sample)."""
    label = fig.sample_label()
    return f"{fig.partition_key} {metric}" + (f" ({label})" if label else "")


def _regression(
    metric: str, fig: PartitionFigures, sample: Moments, base: BaselineFigures, rules: AlertRules
) -> tuple[RegressionTest, Alert | None]:
    s, b = fig.summary, base.summary
    if s.n == 0 or s.mean is None:
        return RegressionTest("no scores", detail="no scored cases in the partition"), None
    if s.n < rules.min_cases:
        enough = (
            f"the baseline is fine: {len(base.partitions)} partition(s) / {b.n} case(s)"
            if len(base.partitions) >= rules.min_baseline_partitions and b.n >= rules.min_baseline_cases
            else f"the baseline has {len(base.partitions)} partition(s) / {b.n} case(s)"
        )
        return RegressionTest(
            "partition too small",
            drop=(b.mean - s.mean) if b.mean is not None else None,
            detail=(
                f"partition too small: {s.n} scored case(s), the regression test needs >= {rules.min_cases} "
                f"({enough}); no regression verdict"
            ),
        ), None
    if len(base.partitions) < rules.min_baseline_partitions or b.n < rules.min_baseline_cases or b.mean is None:
        return RegressionTest(
            "insufficient baseline",
            detail=(
                f"insufficient baseline: {len(base.partitions)} partition(s) / {b.n} case(s), "
                f"need >= {rules.min_baseline_partitions} / >= {rules.min_baseline_cases}; no regression verdict"
            ),
        ), None
    drop = b.mean - s.mean
    p = welch_less(sample, base.moments)
    if p is None:  # pragma: no cover - both sides have >= 2 cases here
        return RegressionTest("partition too small", drop=drop, detail="no regression verdict"), None
    if drop > rules.min_drop and p < rules.alpha:
        msg = (
            f"{partition_head(fig, metric)}: mean {s.mean:.3f} is {drop:.3f} below the "
            f"{len(base.partitions)}-partition baseline {b.mean:.3f} "
            f"(Welch t-test p={_p(p)} < {rules.alpha:g}; min_drop {rules.min_drop:g})"
        )
        return RegressionTest("regression", drop=drop, p_value=p), Alert(
            "regression", "warn", fig.partition_key, metric, msg, s.mean, b.mean
        )
    why = []
    if drop <= rules.min_drop:
        why.append(f"drop {drop:+.3f} <= min_drop {rules.min_drop:g}")
    if p >= rules.alpha:
        why.append(f"p={_p(p)} >= {rules.alpha:g}")
    return RegressionTest("no regression", drop=drop, p_value=p, detail="; ".join(why)), None


def evaluate_rules(
    metric: str,
    fig: PartitionFigures,
    sample: Moments,
    base: BaselineFigures,
    rules: AlertRules,
) -> tuple[list[Alert], RegressionTest, list[str]]:
    """Apply every rule to one partition; return (alerts, regression outcome, notes).

    ``sample`` is the moments of the partition's per-case scores (the Welch test's sample).
    """
    key, s = fig.partition_key, fig.summary
    head = partition_head(fig, metric)
    alerts: list[Alert] = []
    notes: list[str] = []

    if rules.min_mean is not None and s.mean is not None and s.mean < rules.min_mean:
        alerts.append(
            Alert(
                "min_mean",
                "error",
                key,
                metric,
                f"{head}: mean {s.mean:.3f} is below min_mean {rules.min_mean:.3f} (n={s.n})",
                s.mean,
                rules.min_mean,
            )
        )
    if rules.min_pass_rate is not None and s.pass_rate is not None and s.pass_rate < rules.min_pass_rate:
        alerts.append(
            Alert(
                "min_pass_rate",
                "error",
                key,
                metric,
                f"{head}: pass rate {s.pass_rate:.1%} is below min_pass_rate {rules.min_pass_rate:.1%} (n={s.n})",
                s.pass_rate,
                rules.min_pass_rate,
            )
        )
    if s.n == 0 and (rules.min_mean is not None or rules.min_pass_rate is not None):
        notes.append("no scored cases: the threshold rules could not be evaluated")

    reg, reg_alert = _regression(metric, fig, sample, base, rules)
    if reg_alert is not None:
        alerts.append(reg_alert)
    elif reg.verdict in ("insufficient baseline", "partition too small"):
        notes.append(reg.detail)

    # volume rules
    if base.median_rows is not None and base.median_rows > 0:
        floor = rules.volume_ratio * base.median_rows
        volume = fig.volume if fig.volume is not None else fig.rows  # all rows, also when a sample was scored
        if volume < floor:
            if volume:
                what = f"{volume} rows"
            elif fig.run_status is None:  # no run recorded: never scored, rather than empty
                what = "no rows scored or failed (no run recorded: not scored yet?)"
            else:
                what = "no rows at all (the run found none in the source)"
            alerts.append(
                Alert(
                    "volume",
                    "warn",
                    key,
                    metric,
                    f"{head}: volume drop, {what} (< {rules.volume_ratio:.0%} of the baseline median "
                    f"{base.median_rows:g} rows per partition over {len(base.volume_partitions)} partitions)",
                    float(volume),
                    floor,
                )
            )
    else:
        notes.append("no earlier partitions with rows: the volume rule could not be evaluated")
    fr = fig.failure_rate
    if rules.max_failure_rate is not None and fr is not None and fr > rules.max_failure_rate:
        alerts.append(
            Alert(
                "failure_rate",
                "warn",
                key,
                metric,
                f"{head}: {fig.rows_failed} of {fig.rows} rows failed ({fr:.1%}), "
                f"above max_failure_rate {rules.max_failure_rate:.0%}",
                fr,
                rules.max_failure_rate,
            )
        )
    return alerts, reg, notes
