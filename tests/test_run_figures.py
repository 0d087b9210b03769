"""The ctxprec_runs figures from sorted score batches, against numpy/scipy on the whole sample."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from ctxprec_ops.pipeline.run_figures import ScoresChanged, run_figures

scores = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=60)


def batches(values, size):
    arr = np.sort(np.asarray(values, dtype=np.float64))
    return [arr[i : i + size] for i in range(0, arr.size, size)]


@given(scores, st.integers(1, 9))
def test_streamed_figures_match_the_whole_sample(values, size):
    arr = np.asarray(values)
    passed = int((arr >= 0.5).sum())
    got = run_figures(batches(values, size), len(values), passed)
    assert got["mean_score"] == pytest.approx(arr.mean(), abs=1e-12)
    assert got["median_score"] == np.median(arr)  # exact: picked, not computed
    assert got["pass_rate"] == passed / len(values)
    if len(values) < 2:
        assert got["ci_low"] is None and got["ci_high"] is None
        return
    sd = arr.std(ddof=1)
    if np.all(arr == arr[0]):
        assert got["ci_low"] == got["ci_high"] == got["mean_score"] == arr[0]
        return
    half = stats.t.ppf(0.975, len(values) - 1) * sd / math.sqrt(len(values))
    assert got["ci_low"] == pytest.approx(max(0.0, arr.mean() - half), abs=1e-9)
    assert got["ci_high"] == pytest.approx(min(1.0, arr.mean() + half), abs=1e-9)


def test_equal_scores_give_a_zero_width_interval():
    got = run_figures(batches([0.1] * 1001, 100), 1001, 0)
    assert got["mean_score"] == got["median_score"] == got["ci_low"] == got["ci_high"] == 0.1


def test_empty_partition_and_a_mismatched_count():
    assert run_figures([], 0, 0) == {
        "mean_score": None,
        "median_score": None,
        "pass_rate": None,
        "ci_low": None,
        "ci_high": None,
    }
    # a ValueError, and its own class: finalizing reads again when a concurrent writer caused it
    with pytest.raises(ScoresChanged, match="expected 5 scores, the stream held 3"):
        run_figures(batches([0.2, 0.4, 0.6], 2), 5, 0)


def test_the_t_quantile_is_scipys_below_and_above_the_series_threshold():
    """``t_975`` takes scipy's ``stdtrit`` for small samples and a series (no scipy import) for
    large ones: within a few ulps of scipy's value on both sides of the threshold."""
    from scipy.special import stdtrit

    from ctxprec_ops.pipeline.run_figures import SERIES_DF, t_975

    dfs = [1, 2, 5, 30, SERIES_DF - 1, SERIES_DF, SERIES_DF + 1, 1234, 10**4, 99_999, 10**6, 10**7, 2**40]
    dfs += [int(x) for x in np.geomspace(SERIES_DF, 10**9, 200)]
    for df in dfs:
        assert t_975(df) == pytest.approx(float(stdtrit(df, 0.975)), rel=4e-15, abs=0), df
