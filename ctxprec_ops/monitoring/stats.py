"""Pure statistics over per-case scores: summaries, t-intervals, Welch's and the paired t-test,
Holm's correction.

No I/O here: every function takes arrays or ``Moments`` (the sufficient statistics a SQL
``GROUP BY`` returns: n, sum, sum of squares, min, max) and returns numbers, so the alert rules
and ``compare`` can be tested with synthetic samples and checked against scipy.

**Zero variance.** A sample whose values all lie within ``ZERO_SPREAD`` of each other (max − min)
has variance exactly 0: a floating-point standard deviation of 2e-16 (from summing 0.9 fifty
times) is rounding, not spread, and must not make a t statistic of 1e15. Then:

- both sides without spread and equal means (within ``ZERO_SPREAD``): p = 1 — identical samples
  are no evidence of any difference;
- both sides without spread and different means: the difference is not noise, it is certain:
  p = 0 when it points the tested way, p = 1 otherwise (two-sided: p = 0);
- one side without spread: Welch's test is defined (the other side's variance carries the
  standard error) and is computed as usual.

Fewer than 2 cases on a side: no test (None), never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "ZERO_SPREAD",
    "Moments",
    "ScoreSummary",
    "TestResult",
    "summarize",
    "summary_of_moments",
    "mean_ci",
    "welch_less",
    "welch_test",
    "paired_test",
    "holm",
    "sparkline",
    "finite_or_none",
]

#: spread (max − min) below which a sample of scores in [0, 1] is constant
ZERO_SPREAD = 1e-12


def finite_or_none(value: float | None) -> float | None:
    """``nan``/``inf``/None -> None, anything else -> a plain float (JSON-safe)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _t_cdf(t: float, df: float) -> float:
    from scipy.special import stdtr  # scipy.special, not scipy.stats: a quarter of the import time

    return float(stdtr(df, t))


def _t_quantile(p: float, df: float) -> float:
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


@dataclass(frozen=True)
class Moments:
    """Sufficient statistics of one sample: ``n``, ``total`` (Σx), ``total_sq`` (Σx²), ``lo``/``hi``
    (min/max) and ``passed`` (cases that passed, None when unknown). Pool samples with ``+``."""

    n: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    lo: float | None = None
    hi: float | None = None
    passed: int | None = 0

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray, passed: Sequence[bool] | np.ndarray | None = None) -> Moments:
        arr = _as_array(values)
        if arr.size == 0:
            return cls()
        p = None if passed is None else int(np.count_nonzero(np.asarray(passed, dtype=bool)))
        return cls(int(arr.size), float(arr.sum()), float(np.dot(arr, arr)), float(arr.min()), float(arr.max()), p)

    def __add__(self, other: Moments) -> Moments:
        if not other.n:
            return self
        if not self.n:
            return other
        los = [v for v in (self.lo, other.lo) if v is not None]
        his = [v for v in (self.hi, other.hi) if v is not None]
        passed = None if self.passed is None or other.passed is None else self.passed + other.passed
        return Moments(
            self.n + other.n,
            self.total + other.total,
            self.total_sq + other.total_sq,
            min(los) if los else None,
            max(his) if his else None,
            passed,
        )

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    @property
    def constant(self) -> bool:
        """No spread: every value within ``ZERO_SPREAD`` of the others (or at most one value)."""
        if self.n < 2:
            return True
        if self.lo is None or self.hi is None:
            return self.var_raw() <= 0.0
        return (self.hi - self.lo) <= ZERO_SPREAD

    def var_raw(self) -> float:
        if self.n < 2:
            return 0.0
        return max(0.0, (self.total_sq - self.total * self.total / self.n) / (self.n - 1))

    @property
    def var(self) -> float | None:
        """Sample variance (ddof = 1); exactly 0 for a constant sample; None for n < 2."""
        if self.n < 2:
            return None
        return 0.0 if self.constant else self.var_raw()

    @property
    def std(self) -> float | None:
        v = self.var
        return None if v is None else math.sqrt(v)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.n if self.n and self.passed is not None else None


@dataclass(frozen=True)
class ScoreSummary:
    """Figures of one sample of per-case scores (a partition, or a pooled baseline).

    ``mean``/``median``/``std``/``pass_rate`` are None when ``n == 0`` (``median`` also when only
    the sample's moments were read); the CI is None when ``n < 2`` (a single case says nothing
    about spread).
    """

    n: int
    mean: float | None
    median: float | None
    std: float | None
    pass_rate: float | None
    ci_low: float | None
    ci_high: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return {k: (v if k == "n" else finite_or_none(v)) for k, v in asdict(self).items()}


def _as_array(values: Iterable[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    return arr[np.isfinite(arr)]


def _ci_of(m: Moments, confidence: float) -> tuple[float, float] | None:
    if m.n < 2 or m.mean is None:
        return None
    mean = m.mean
    var = m.var or 0.0
    if var == 0.0:
        return (mean, mean)
    half = _t_quantile(0.5 + confidence / 2.0, m.n - 1) * math.sqrt(var / m.n)
    return (max(0.0, mean - half), min(1.0, mean + half))


def mean_ci(scores: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float] | None:
    """Student-t confidence interval of the mean: ``mean ± t(1-a/2, n-1) · s/√n``.

    The t-interval (not a bootstrap) is exact for normal data and close to nominal for bounded
    scores at the partition sizes we see (n ≳ 20); it is deterministic, which keeps reports stable,
    and it needs only n, Σx and Σx², which SQL aggregates. Returns None for ``n < 2``; a
    zero-variance sample gets the degenerate interval ``(m, m)``. The interval is clipped to
    ``[0, 1]``, the range of the score.
    """
    return _ci_of(Moments.of(scores), confidence)


def summary_of_moments(m: Moments, *, median: float | None = None, confidence: float = 0.95) -> ScoreSummary:
    """The summary of a sample known by its moments (the median only if given)."""
    if not m.n:
        return ScoreSummary(0, None, None, None, None, None, None)
    ci = _ci_of(m, confidence)
    return ScoreSummary(
        n=m.n,
        mean=m.mean,
        median=median,
        std=m.std,
        pass_rate=m.pass_rate,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
    )


def summarize(
    scores: Sequence[float] | np.ndarray,
    passed: Sequence[bool] | np.ndarray | None = None,
    *,
    threshold: float | None = None,
    confidence: float = 0.95,
) -> ScoreSummary:
    """n, mean, median, std, pass rate and CI of one sample.

    The pass rate comes from ``passed`` (the stored per-case ``success``, which honours each
    run's threshold and strict mode); without it, from ``score >= threshold``.
    """
    arr = _as_array(scores)
    if arr.size == 0:
        return ScoreSummary(0, None, None, None, None, None, None)
    if passed is None and threshold is not None:
        passed = arr >= threshold
    m = Moments.of(arr, passed if passed is not None and np.size(passed) == arr.size else None)
    return summary_of_moments(m, median=float(np.median(arr)), confidence=confidence)


@dataclass(frozen=True)
class TestResult:
    """A two-sample comparison: ``delta`` (second − first, or the mean paired difference), its
    standard error and degrees of freedom, the two-sided p-value and the t-interval of ``delta``."""

    n: int
    delta: float | None
    se: float | None = None
    df: float | None = None
    p_value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    def to_dict(self) -> dict[str, float | int | None]:
        return {k: (v if k == "n" else finite_or_none(v)) for k, v in asdict(self).items()}

    @property
    def no_variance(self) -> bool:
        """The test ran on samples without spread (standard error 0; see the module's note on zero
        variance): its p-value is 0 or 1 and its interval has no width — show "no variance"."""
        return self.se is not None and self.se == 0.0


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= ZERO_SPREAD


def _t_result(n: int, delta: float, se: float, df: float, confidence: float) -> TestResult:
    """p (two-sided) and CI for ``delta`` with standard error ``se`` on ``df`` degrees of freedom;
    ``se == 0``: no noise, so p = 1 when ``delta`` is 0 and p = 0 otherwise, CI = (delta, delta)."""
    if se <= 0.0 or not math.isfinite(se):
        return TestResult(n, delta, 0.0, df, 1.0 if _same(delta, 0.0) else 0.0, delta, delta)
    t = delta / se
    p = 2.0 * _t_cdf(-abs(t), df)
    half = _t_quantile(0.5 + confidence / 2.0, df) * se
    return TestResult(n, delta, se, df, min(1.0, p), delta - half, delta + half)


def welch_test(baseline: Moments, candidate: Moments, *, confidence: float = 0.95) -> TestResult:
    """Welch's two-sample t-test of ``candidate`` − ``baseline`` (two-sided, unequal variances:
    ``scipy.stats.ttest_ind(candidate, baseline, equal_var=False)``) and the Welch–Satterthwaite
    t-interval of the difference of means. ``n`` is the smaller side. None figures when a side
    has fewer than 2 cases (the delta is still given when both have one)."""
    n = min(baseline.n, candidate.n)
    if baseline.mean is None or candidate.mean is None:
        return TestResult(n, None)
    delta = candidate.mean - baseline.mean
    if baseline.n < 2 or candidate.n < 2:
        return TestResult(n, delta)
    va, vb = (baseline.var or 0.0) / baseline.n, (candidate.var or 0.0) / candidate.n
    se = math.sqrt(va + vb)
    if se == 0.0:
        return _t_result(n, delta, 0.0, float(baseline.n + candidate.n - 2), confidence)
    df = (va + vb) ** 2 / ((va * va / (baseline.n - 1) if va else 0.0) + (vb * vb / (candidate.n - 1) if vb else 0.0))
    return _t_result(n, delta, se, df, confidence)


def paired_test(differences: Moments, *, confidence: float = 0.95) -> TestResult:
    """The paired t-test of the per-pair differences (candidate − baseline) — two-sided,
    ``scipy.stats.ttest_rel(candidate, baseline)`` — and the t-interval of the mean difference."""
    n = differences.n
    if differences.mean is None:
        return TestResult(0, None)
    delta = differences.mean
    if n < 2:
        return TestResult(n, delta)
    return _t_result(n, delta, math.sqrt((differences.var or 0.0) / n), float(n - 1), confidence)


def welch_less(
    sample: Sequence[float] | np.ndarray | Moments, baseline: Sequence[float] | np.ndarray | Moments
) -> float | None:
    """One-sided Welch's t-test p-value for "``sample`` mean < ``baseline`` mean".

    ``scipy.stats.ttest_ind(sample, baseline, equal_var=False, alternative='less')`` for samples
    with spread. Returns None when either side has fewer than 2 cases. Both sides constant (see
    the module's note on zero variance): equal -> p = 1; ``sample`` strictly below -> p = 0
    (certain); above -> p = 1.
    """
    a = sample if isinstance(sample, Moments) else Moments.of(sample)
    b = baseline if isinstance(baseline, Moments) else Moments.of(baseline)
    if a.n < 2 or b.n < 2 or a.mean is None or b.mean is None:
        return None
    va, vb = (a.var or 0.0) / a.n, (b.var or 0.0) / b.n
    if va == 0.0 and vb == 0.0:
        return 0.0 if a.mean < b.mean and not _same(a.mean, b.mean) else 1.0
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va * va / (a.n - 1) if va else 0.0) + (vb * vb / (b.n - 1) if vb else 0.0))
    p = _t_cdf((a.mean - b.mean) / se, df)
    return p if math.isfinite(p) else 1.0


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values (step-down; monotone; at most 1), in the given order.

    A test is significant at level α after the correction iff its adjusted p-value is < α; the
    chance that *any* of the tests is a false positive stays ≤ α whatever the dependence between
    them. None (no test) stays None and does not count as a test.
    """
    idx = [i for i, p in enumerate(p_values) if p is not None]
    m = len(idx)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda j: (p_values[j], j))):
        p = float(p_values[i])  # type: ignore[arg-type]
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None], *, lo: float | None = None, hi: float | None = None) -> str:
    """A compact text trend: one block character per value; missing values are a space.

    The scale spans ``[lo, hi]`` (default: the values' own range), so a flat series is flat.
    """
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return " " * len(values)
    lo = min(finite) if lo is None else lo
    hi = max(finite) if hi is None else hi
    span = hi - lo
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(" ")
        elif span <= 0:
            out.append(_BARS[len(_BARS) // 2])
        else:
            idx = int(round((min(max(v, lo), hi) - lo) / span * (len(_BARS) - 1)))
            out.append(_BARS[idx])
    return "".join(out)
