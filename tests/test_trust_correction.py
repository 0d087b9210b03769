"""The corrected mean's statistics: the estimator against a reference computation (scipy), its
edge cases, and a simulation with judges whose errors are known (bench/bench_correction.py, the
same code docs/trust.md's table comes from): the 95% interval covers the true gold mean about
95% of the time, the raw mean's error is visible, the corrected error shrinks with more labels."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from ctxprec_ops.calibration.correction import MIN_LABELLED_ROWS, difference_estimate

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_correction", ROOT / "bench" / "bench_correction.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("n, big_n, seed", [(10, 200, 0), (37, 300, 1), (120, 150, 2)])
def test_the_estimator_matches_a_scipy_reference(n, big_n, seed):
    rng = np.random.default_rng(seed)
    judge = rng.uniform(0.2, 0.8, n)
    gold = np.clip(judge + rng.normal(0.05, 0.15, n), 0, 1)
    judge_mean = 0.5
    est = difference_estimate(judge_mean, big_n, list(gold), list(judge))
    d = gold - judge
    se = math.sqrt((1 - n / big_n) * np.var(d, ddof=1) / n)
    half = sps.t.ppf(0.975, n - 1) * se
    mean = judge_mean + d.mean()
    assert est.mean == pytest.approx(mean, abs=1e-12)
    assert est.ci_low == pytest.approx(mean - half, abs=1e-12) and est.ci_high == pytest.approx(mean + half, abs=1e-12)
    assert est.correction == pytest.approx(d.mean()) and (est.labelled_rows, est.rows) == (n, big_n)


def test_every_row_labelled_gives_the_gold_mean_exactly():
    gold, judge = [0.2, 1.0, 0.5, 0.75], [0.4, 0.9, 0.5, 0.25]
    est = difference_estimate(sum(judge) / 4, 4, gold, judge, minimum=2)
    assert est.mean == pytest.approx(sum(gold) / 4) and est.ci_low == est.ci_high == pytest.approx(est.mean)


def test_no_disagreement_is_not_certainty():
    """All labelled rows agree with the judge: the rule of three bounds the rest, not zero width."""
    est = difference_estimate(0.6, 1000, [0.5] * 30, [0.5] * 30)
    assert est.mean == pytest.approx(0.6)
    assert est.ci_high - est.mean == pytest.approx((1 - 30 / 1000) * 3 / 30)


def test_below_the_minimum_there_is_no_estimate_and_a_note():
    est = difference_estimate(0.6, 100, [0.5] * (MIN_LABELLED_ROWS - 1), [0.4] * (MIN_LABELLED_ROWS - 1))
    assert est.mean is None and est.ci_low is None and not est.available
    assert "needs at least 10" in est.note and est.to_dict()["labelled_rows"] == MIN_LABELLED_ROWS - 1


def test_the_interval_is_clipped_to_the_score_range():
    est = difference_estimate(0.97, 50, [1.0] * 10 + [0.0], [0.5] * 10 + [0.0])
    assert est.mean == 1.0 and est.ci_high == 1.0 and 0.0 <= est.ci_low <= 1.0


@pytest.fixture(scope="module")
def simulated():
    bench = _bench()
    return bench, bench.simulate(partitions=400, rows=300, labels=(10, 20, 40), seed=0)


def test_the_corrected_interval_covers_the_truth_about_95_percent(simulated):
    bench, results = simulated
    for judge in bench.JUDGES:
        for n in (20, 40):
            cell = results[(judge.name, n)]
            assert cell.estimates == 400
            assert 0.92 <= cell.coverage <= 0.98, (judge.name, n, cell.coverage)


def test_the_raw_mean_is_off_and_the_corrected_error_shrinks_with_labels(simulated):
    bench, results = simulated
    raw = {j.name: results[(j.name, 20)].raw_error / 400 for j in bench.JUDGES}
    assert raw["over-calls"] > 0.03 and raw["under-calls"] < -0.08 and raw["favours the top"] > 0.04
    for judge in bench.JUDGES:
        rmse = [results[(judge.name, n)].rmse for n in (10, 20, 40)]
        widths = [results[(judge.name, n)].width for n in (10, 20, 40)]
        assert rmse[0] > rmse[1] > rmse[2] and widths[0] > widths[1] > widths[2], judge.name
        # with 40 labels the corrected mean is much closer to the truth than the judge's
        assert rmse[2] < abs(raw[judge.name]), judge.name
        # and the judge's own 95% CI (sampling noise only) rarely contains the gold mean
        assert results[(judge.name, 20)].raw_coverage < 0.5, judge.name


def test_the_known_judges_make_the_errors_they_say():
    import random

    bench = _bench()
    rng = random.Random(3)
    over, under = bench.JUDGES[0], bench.JUDGES[1]
    fp = sum(over.verdict(rng, False, 5) for _ in range(20000)) / 20000
    fn = sum(not under.verdict(rng, True, 1) for _ in range(20000)) / 20000
    assert fp == pytest.approx(0.25, abs=0.01) and fn == pytest.approx(0.30, abs=0.01)
    top = bench.JUDGES[2]
    assert sum(top.verdict(rng, False, 1) for _ in range(20000)) / 20000 == pytest.approx(0.3, abs=0.01)
    assert sum(not top.verdict(rng, True, 4) for _ in range(20000)) / 20000 == pytest.approx(0.5, abs=0.01)
