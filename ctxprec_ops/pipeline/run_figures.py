"""The score figures of a ``ctxprec_runs`` row, computed from a partition's scores streamed in
ascending order, one batch at a time (pure; memory is one batch however large the partition).

Mean and variance combine per-batch moments (Chan et al.'s pairwise update); the median is
picked at its rank while the sorted stream passes by. Because the input order is canonical
(sorted) and batches have a fixed size, the figures are bit-for-bit reproducible whatever order
the database stored the rows in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported by whoever makes the arrays: scoring workers never need it
    import numpy as np

__all__ = ["run_figures", "t_975", "EMPTY_FIGURES", "ScoresChanged"]


class ScoresChanged(ValueError):
    """The streamed scores are not the ``n`` counted: a concurrent writer added (or replaced) rows
    between the two reads, on a family whose read transaction is not one snapshot."""


EMPTY_FIGURES: dict[str, float | None] = {
    "mean_score": None, "median_score": None, "pass_rate": None, "ci_low": None, "ci_high": None,
}  # fmt: skip


def run_figures(sorted_batches: Iterable[np.ndarray], n: int, passed: int) -> dict[str, float | None]:
    """Mean, median, pass rate and the 95% Student-t interval of the mean,
    ``mean ± t(0.975, n-1)·s/√n`` clipped to [0, 1] (None below 2 scores; ``(m, m)`` when all
    scores are equal) — the interval the monitoring reports use too.

    ``sorted_batches`` are float64 arrays whose concatenation is the ``n`` scores in ascending
    order; ``passed`` is how many of them passed. ``ValueError`` when the batches do not hold
    exactly ``n`` scores (``ScoresChanged``).
    """
    if n == 0:
        return dict(EMPTY_FIGURES)
    lo_rank, hi_rank = (n - 1) // 2, n // 2  # the median is the mean of these two (equal when n is odd)
    lo = hi = first = last = math.nan
    seen, mean, m2 = 0, 0.0, 0.0
    for batch in sorted_batches:
        k = int(batch.size)
        if k == 0:
            continue
        if seen == 0:
            first = float(batch[0])
        last = float(batch[-1])
        if seen <= lo_rank < seen + k:
            lo = float(batch[lo_rank - seen])
        if seen <= hi_rank < seen + k:
            hi = float(batch[hi_rank - seen])
        b_mean = float(batch.mean())
        b_m2 = float(((batch - b_mean) ** 2).sum())
        total = seen + k
        delta = b_mean - mean
        mean += delta * k / total
        m2 += b_m2 + delta * delta * seen * k / total
        seen = total
    if seen != n:
        raise ScoresChanged(f"expected {n} scores, the stream held {seen}")
    if first == last:  # all equal: exact figures, no rounding noise in a zero spread
        mean, m2 = first, 0.0
    ci_low = ci_high = None
    if n >= 2:
        if m2 == 0.0:
            ci_low = ci_high = mean
        else:
            half = t_975(n - 1) * math.sqrt(m2 / (n - 1)) / math.sqrt(n)
            ci_low, ci_high = max(0.0, mean - half), min(1.0, mean + half)
    return {
        "mean_score": mean,
        "median_score": (lo + hi) / 2,
        "pass_rate": passed / n,
        "ci_low": ci_low,
        "ci_high": ci_high,
    }


#: the standard normal distribution's 0.975 quantile
_Z975 = 1.959963984540054
#: degrees of freedom from which ``t_975`` sums its series (within ~1e-15 of scipy's value there)
SERIES_DF = 1000


def t_975(df: int) -> float:
    """Student's t 0.975 quantile with ``df`` degrees of freedom: scipy's ``stdtrit``, or from
    ``SERIES_DF`` on the Cornish-Fisher series of the t quantile in powers of 1/df (its terms to
    1/df^4 are within a few ulps of scipy's there), which spares a large partition's run the
    ~0.3 s import of ``scipy.special``."""
    if df < SERIES_DF:
        from scipy.special import stdtrit

        return float(stdtrit(df, 0.975))
    z = _Z975
    z2 = z * z
    g1 = z * (z2 + 1) / 4
    g2 = z * ((5 * z2 + 16) * z2 + 3) / 96
    g3 = z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / 384
    g4 = z * ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) / 92160
    v = 1.0 / df
    return z + v * (g1 + v * (g2 + v * (g3 + v * g4)))
