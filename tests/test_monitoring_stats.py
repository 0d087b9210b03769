"""The monitoring statistics against scipy (random data, hypothesis) and the degenerate cases:
constant samples (zero variance detected with a tolerance), identical samples, n = 1; and the
same guarantees end to end through ``check_partition`` on real SQLite tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats as sps

from ctxprec_ops.monitoring import check_partition
from ctxprec_ops.monitoring.stats import Moments, holm, mean_ci, paired_test, welch_less, welch_test
from tests.synthetic_history import Day, day_keys, write_history

scores = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=2, max_size=60)


def _spread(x) -> bool:
    return float(np.ptp(np.asarray(x, dtype=float))) > 1e-9


@given(scores, scores)
def test_welch_less_matches_scipy(a, b):
    p = welch_less(a, b)
    if not (_spread(a) or _spread(b)):
        return  # both constant: covered by the degenerate-case tests
    ref = sps.ttest_ind(a, b, equal_var=False, alternative="less").pvalue
    assert p == pytest.approx(float(ref), rel=1e-6, abs=1e-9)


@given(scores, scores)
def test_welch_test_matches_scipy_two_sided_and_its_interval(a, b):
    r = welch_test(Moments.of(a), Moments.of(b))
    assert r.delta == pytest.approx(np.mean(b) - np.mean(a), abs=1e-12)
    if not (_spread(a) or _spread(b)):
        return
    ref = sps.ttest_ind(b, a, equal_var=False)
    assert r.p_value == pytest.approx(float(ref.pvalue), rel=1e-6, abs=1e-9)
    ci = ref.confidence_interval(0.95)
    assert (r.ci_low, r.ci_high) == pytest.approx((float(ci.low), float(ci.high)), rel=1e-6, abs=1e-9)


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=60))
def test_paired_test_matches_scipy_ttest_rel(pairs):
    base = np.array([p[0] for p in pairs])
    cand = np.array([p[1] for p in pairs])
    d = cand - base
    r = paired_test(Moments.of(d))
    assert r.n == len(pairs) and r.delta == pytest.approx(d.mean(), abs=1e-12)
    if float(np.ptp(d)) == 0.0:  # constant differences: certain (or no) change
        assert r.p_value == (1.0 if abs(d.mean()) <= 1e-12 else 0.0)
        return
    if not _spread(d):  # a spread of ~1e-9: a real t-test, too close to rounding for the reference
        return
    ref = sps.ttest_rel(cand, base)
    assert r.p_value == pytest.approx(float(ref.pvalue), rel=1e-6, abs=1e-9)
    ci = ref.confidence_interval(0.95)
    assert (r.ci_low, r.ci_high) == pytest.approx((float(ci.low), float(ci.high)), rel=1e-6, abs=1e-9)


def test_pooled_moments_equal_the_moments_of_the_pooled_sample():
    rng = np.random.default_rng(3)
    parts = [rng.uniform(0, 1, size=n) for n in (5, 40, 1, 17)]
    pooled = Moments()
    for p in parts:
        pooled = pooled + Moments.of(p)
    flat = np.concatenate(parts)
    assert pooled.n == flat.size and pooled.mean == pytest.approx(flat.mean())
    assert pooled.var == pytest.approx(flat.var(ddof=1)) and (pooled.lo, pooled.hi) == (flat.min(), flat.max())


@pytest.mark.parametrize("value", [0.9, 0.1, 0.3, 1.0, 0.0])
def test_identical_constant_samples_give_p_1(value):
    # 0.9 summed 50 times is not 50 x 0.9: the float standard deviation is ~1e-16, not 0
    part, base = [value] * 50, [value] * 200
    assert welch_less(part, base) == 1.0
    r = welch_test(Moments.of(base), Moments.of(part))
    assert r.p_value == 1.0 and r.delta == pytest.approx(0.0, abs=1e-12)


def test_constant_but_different_samples_are_certain():
    assert welch_less([0.1] * 50, [0.9] * 200) == 0.0  # below, without noise: certain
    assert welch_less([0.9] * 50, [0.1] * 200) == 1.0  # above: no evidence of "less"
    r = welch_test(Moments.of([0.9] * 30), Moments.of([0.6] * 30))
    assert r.p_value == 0.0 and (r.ci_low, r.ci_high) == pytest.approx((-0.3, -0.3))
    # a constant side against a spread side is an ordinary Welch test
    rng = np.random.default_rng(1)
    spread = rng.uniform(0.5, 1.0, size=40)
    ref = sps.ttest_ind([0.7] * 40, spread, equal_var=False, alternative="less").pvalue
    assert welch_less([0.7] * 40, spread) == pytest.approx(float(ref))


def test_near_constant_within_tolerance_is_constant():
    noisy = [0.9 + (1e-15 if i % 2 else -1e-15) for i in range(50)]
    assert Moments.of(noisy).var == 0.0
    assert welch_less(noisy, [0.9] * 200) == 1.0


def test_one_case_or_none_gives_no_test_never_a_crash():
    assert welch_less([0.5], [0.1, 0.2]) is None and welch_less([], [0.1, 0.2]) is None
    r = welch_test(Moments.of([0.5]), Moments.of([0.2, 0.4]))
    assert r.p_value is None and r.delta == pytest.approx(-0.2)
    assert welch_test(Moments(), Moments.of([0.2])).delta is None
    assert paired_test(Moments.of([0.3])).p_value is None and paired_test(Moments()).delta is None
    assert mean_ci([0.5]) is None and mean_ci([0.4, 0.4]) == (0.4, 0.4)


def test_holm_adjusts_step_down_and_stays_monotone():
    adj = holm([0.01, 0.04, None, 0.03, 0.5])
    # sorted 0.01, 0.03, 0.04, 0.5 over m = 4 tests: 0.04, 0.09, max(0.09, 0.08), max(.., 0.5)
    assert adj == pytest.approx([0.04, 0.09, None, 0.09, 0.5]) or adj[2] is None
    assert adj[2] is None
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert holm([]) == []


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_never_below_the_raw_p_and_controls_like_bonferroni(ps):
    adj = holm(ps)
    m = len(ps)
    for p, a in zip(ps, adj):
        assert a is not None and p - 1e-15 <= a <= 1.0
        assert a <= min(1.0, m * p) + 1e-12  # never stricter than Bonferroni
    # step-down: the smallest p is multiplied by m
    i = int(np.argmin(ps))
    assert adj[i] == pytest.approx(min(1.0, m * ps[i]))


# -- end to end: real tables, check_partition -------------------------------------------------


@pytest.fixture
def engine(tmp_path):
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    yield eng
    eng.dispose()


@pytest.mark.parametrize("value", [0.9, 0.1])
def test_constant_partition_equal_to_a_constant_baseline_never_alerts(engine, value):
    """Issue 32 item 4: 50 scores equal to a 200-row baseline's constant gave p ~ 4e-32 and, with
    min_drop 0, a false regression alert."""
    base = [Day(k, [value] * 50) for k in day_keys("2026-11-24", 4)]
    write_history(engine, base + [Day("2026-11-28", [value] * 50)])
    r = check_partition(engine, "2026-11-28", min_drop=0.0)
    assert r.baseline.summary.n == 200
    assert r.regression.p_value == 1.0 and r.regression.verdict == "no regression"
    assert not r.fired, r.summary()


def test_constant_partition_below_a_constant_baseline_alerts(engine):
    base = [Day(k, [0.9] * 50) for k in day_keys("2026-11-24", 4)]
    write_history(engine, base + [Day("2026-11-28", [0.6] * 50)])
    r = check_partition(engine, "2026-11-28")
    assert r.regression.verdict == "regression" and r.regression.p_value == 0.0
    assert [a.rule for a in r.alerts] == ["regression"]


def test_one_row_partition_says_the_partition_is_too_small(engine):
    """Issue 32 item 6(d): a 1-row partition against a 210-row baseline said "insufficient
    baseline"; the baseline is fine, the partition is small: say so, with the minimum."""
    rng = np.random.default_rng(5)
    base = [Day(k, [float(x) for x in rng.uniform(0.5, 1.0, size=30)]) for k in day_keys("2026-11-21", 7)]
    write_history(engine, base + [Day("2026-11-28", [0.2])])
    r = check_partition(engine, "2026-11-28")
    assert r.baseline.summary.n == 210
    assert r.regression.verdict == "partition too small" and not r.alerts_of("regression")
    note = next(n for n in r.notes if "partition too small" in n)
    assert "1 scored case(s)" in note and "needs >= 2" in note and "baseline is fine: 7 partition(s) / 210" in note
    assert "insufficient baseline" not in r.summary()
    assert math.isclose(r.regression.drop, r.baseline.summary.mean - 0.2)
