"""Pure statistics over per-case scores: summaries, the t-interval of the mean, Welch's test.

No I/O here: every function takes arrays and returns numbers, so the alert rules can be tested
with synthetic samples.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["ScoreSummary", "summarize", "mean_ci", "welch_less", "sparkline", "finite_or_none"]


def finite_or_none(value: float | None) -> float | None:
    """``nan``/``inf``/None -> None, anything else -> a plain float (JSON-safe)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class ScoreSummary:
    """Figures of one sample of per-case scores (a partition, or a pooled baseline).

    ``mean``/``median``/``std``/``pass_rate`` are None when ``n == 0``; the CI is None when
    ``n < 2`` (a single case says nothing about spread).
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


def mean_ci(scores: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float] | None:
    """Student-t confidence interval of the mean: ``mean ± t(1-a/2, n-1) · s/√n``.

    The t-interval (not a bootstrap) is exact for normal data and close to nominal for bounded
    scores at the partition sizes we see (n ≳ 20); it is deterministic, which keeps reports stable.
    Returns None for ``n < 2``; a zero-variance sample gets the degenerate interval ``(m, m)``.
    The interval is clipped to ``[0, 1]``, the range of the score.
    """
    arr = _as_array(scores)
    n = arr.size
    if n < 2:
        return None
    m = float(arr.mean())
    s = float(arr.std(ddof=1))
    if s == 0.0:
        return (m, m)
    from scipy import stats as _sp  # imported when needed: scipy.stats is slow to import

    half = float(_sp.t.ppf(0.5 + confidence / 2.0, n - 1)) * s / math.sqrt(n)
    return (max(0.0, m - half), min(1.0, m + half))


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
    n = int(arr.size)
    if n == 0:
        return ScoreSummary(0, None, None, None, None, None, None)
    if passed is not None:
        p = np.asarray(passed, dtype=float)
        pass_rate = float(p.mean()) if p.size else None
    elif threshold is not None:
        pass_rate = float((arr >= threshold).mean())
    else:
        pass_rate = None
    ci = mean_ci(arr, confidence)
    return ScoreSummary(
        n=n,
        mean=float(arr.mean()),
        median=float(np.median(arr)),
        std=float(arr.std(ddof=1)) if n > 1 else None,
        pass_rate=pass_rate,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
    )


def welch_less(sample: Sequence[float] | np.ndarray, baseline: Sequence[float] | np.ndarray) -> float | None:
    """One-sided Welch's t-test p-value for "``sample`` mean < ``baseline`` mean".

    ``scipy.stats.ttest_ind(sample, baseline, equal_var=False, alternative='less')``. Returns None
    when either side has fewer than 2 cases. When both samples are constant scipy has no answer:
    a constant sample strictly below a constant baseline is certain (p = 0), anything else p = 1.
    """
    a, b = _as_array(sample), _as_array(baseline)
    if a.size < 2 or b.size < 2:
        return None
    if a.std() == 0.0 and b.std() == 0.0:
        return 0.0 if a.mean() < b.mean() else 1.0
    from scipy import stats as _sp

    with warnings.catch_warnings():  # near-constant samples: scipy warns, the p-value stays usable
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(_sp.ttest_ind(a, b, equal_var=False, alternative="less").pvalue)
    return p if math.isfinite(p) else 1.0


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
