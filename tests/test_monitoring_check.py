"""check_partition on synthetic histories written to real SQLite files (and once PostgreSQL)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.monitoring import AlertRules, check_partition, load_trend
from ctxprec_ops.monitoring.stats import mean_ci, summarize, welch_less
from tests.synthetic_history import Day, beta_scores, day_keys, steady_history, write_history

P = "2026-11-28"


@pytest.fixture
def engine(tmp_path):
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    yield eng
    eng.dispose()


def _rules(result):
    return [a.rule for a in result.alerts]


def _baseline(seed: int = 7, n: int = 60, mean: float = 0.72) -> list[Day]:
    return steady_history(np.random.default_rng(seed), "2026-11-21", 7, n=n, mean=mean)


def test_planted_regression_fires(engine):
    rng = np.random.default_rng(11)
    write_history(engine, _baseline() + [Day(P, beta_scores(rng, 60, 0.58))])
    r = check_partition(engine, P)
    assert r.fired and _rules(r) == ["regression"]
    a = r.alerts[0]
    assert a.severity == "warn" and a.kind == "regression" and a.partition_key == P
    assert r.regression.drop > 0.05 and r.regression.p_value < 0.01
    # the message names the partition, the figures and the rule
    assert a.message.startswith(f"{P} contextual_precision: mean {r.figures.summary.mean:.3f}")
    assert "7-partition baseline" in a.message and "Welch t-test p=" in a.message
    assert f"{r.baseline.summary.mean:.3f}" in a.message
    assert r.baseline.partitions == tuple(day_keys("2026-11-21", 7))
    assert r.baseline.summary.n == 420
    # the p-value is scipy's one-sided Welch test of exactly these samples
    with engine.connect() as conn:
        part = [
            x for (x,) in conn.execute(sa.text("select score from ctxprec_scores where partition_key=:p"), {"p": P})
        ]
        base = [
            x for (x,) in conn.execute(sa.text("select score from ctxprec_scores where partition_key<:p"), {"p": P})
        ]
    assert r.regression.p_value == pytest.approx(welch_less(part, base))
    assert r.figures.summary.mean == pytest.approx(float(np.mean(part)))


def test_small_noisy_lower_partition_does_not_fire(engine):
    rng = np.random.default_rng(3)
    base = [Day(k, beta_scores(rng, 10, 0.70, concentration=1.5)) for k in day_keys("2026-11-21", 7)]
    noisy = [0.95, 0.1, 0.9, 0.2, 0.85, 0.3, 0.9, 0.15, 0.8, 0.35]  # mean 0.55, very spread out
    write_history(engine, base + [Day(P, noisy)])
    r = check_partition(engine, P)
    assert r.regression.drop > 0.05  # lower by more than min_drop ...
    assert r.regression.p_value >= 0.01  # ... but not significantly so
    assert r.regression.verdict == "no regression" and not r.fired, r.summary()


def test_threshold_breach_mean_and_pass_rate(engine):
    rng = np.random.default_rng(5)
    write_history(engine, _baseline(mean=0.62) + [Day(P, beta_scores(rng, 60, 0.62))])
    r = check_partition(engine, P, min_mean=0.7, min_pass_rate=0.95)
    assert _rules(r) == ["min_mean", "min_pass_rate"]
    assert {a.severity for a in r.alerts} == {"error"} and r.errors == r.alerts
    mean, pr = r.figures.summary.mean, r.figures.summary.pass_rate
    assert mean < 0.7 and pr < 0.95
    assert f"mean {mean:.3f} is below min_mean 0.700" in r.alerts[0].message
    assert f"pass rate {pr:.1%}" in r.alerts[1].message
    # the same partition with lenient thresholds is clean
    assert not check_partition(engine, P, min_mean=0.3, min_pass_rate=0.2).fired


def test_zero_volume_day_fires_volume(engine):
    write_history(engine, _baseline())
    r = check_partition(engine, P)  # nothing at all for P: no scores, no failures, no run
    assert r.figures.rows == 0 and r.figures.summary.n == 0 and r.figures.run_status is None
    assert _rules(r) == ["volume"] and r.alerts[0].severity == "warn"
    # never scored is said as such, not as an empty source
    assert "not scored yet" in r.alerts[0].message and "median 60 rows" in r.alerts[0].message
    assert r.notes[0].startswith(f"{P} has not been scored yet")
    assert r.regression.verdict == "no scores"


def test_low_volume_fires_but_normal_volume_does_not(engine):
    rng = np.random.default_rng(9)
    write_history(
        engine, _baseline() + [Day(P, beta_scores(rng, 25, 0.72)), Day("2026-11-29", beta_scores(rng, 45, 0.72))]
    )
    assert "volume" in _rules(check_partition(engine, P))  # 25 < 30
    assert "volume" not in _rules(check_partition(engine, "2026-11-29"))  # 45 >= 30


def test_failure_rate_spike(engine):
    rng = np.random.default_rng(13)
    write_history(engine, _baseline() + [Day(P, beta_scores(rng, 40, 0.72), failed=20)])
    r = check_partition(engine, P)
    assert r.figures.rows == 60 and r.figures.rows_failed == 20
    assert _rules(r) == ["failure_rate"]
    assert "20 of 60 rows failed (33.3%)" in r.alerts[0].message
    assert not check_partition(engine, P, max_failure_rate=0.5).fired


def test_insufficient_baseline_is_a_note_not_an_alert(engine):
    rng = np.random.default_rng(17)
    write_history(engine, [Day("2026-11-27", beta_scores(rng, 60, 0.9)), Day(P, beta_scores(rng, 60, 0.3))])
    r = check_partition(engine, P)
    assert r.regression.verdict == "insufficient baseline" and not r.fired
    assert any("insufficient baseline: 1 partition(s) / 60 case(s)" in n for n in r.notes)
    assert "insufficient baseline" in r.summary()
    # with a lower requirement the same data does fire
    assert _rules(check_partition(engine, P, min_baseline_partitions=1)) == ["regression"]


def test_judge_change_does_not_mix_populations(engine):
    rng = np.random.default_rng(19)
    days = _baseline() + [Day(P, beta_scores(rng, 60, 0.4), judge_model="other-judge")]
    write_history(engine, days)
    r = check_partition(engine, P)
    assert r.population.judge_model == "other-judge"
    assert r.regression.verdict == "insufficient baseline" and not r.fired
    # pinning the old population compares like with like: that partition has no scores in it
    r_old = check_partition(engine, P, judge_model="gpt-4o-mini")
    assert r_old.figures.summary.n == 0 and r_old.figures.rows == 60


def test_result_is_json_safe_and_secret_free(engine, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-testsecret123456")
    write_history(engine, _baseline())
    r = check_partition(engine, P, min_mean=0.5)
    text = json.dumps(r.to_dict(), allow_nan=False)
    assert json.loads(text)["alerts"][0]["rule"] == "volume"
    assert json.loads(text)["figures"]["mean"] is None
    assert "sk-testsecret" not in text + r.summary()


def test_bad_arguments_are_clear(engine):
    write_history(engine, _baseline())
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        check_partition(engine, "28/11/2026")
    with pytest.raises(ValueError, match="min_mean must be between 0 and 1"):
        check_partition(engine, P, min_mean=7)


def test_missing_tables_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty.db"
    sa.create_engine(f"sqlite:///{empty}").connect().close()
    with pytest.raises(LookupError, match="no ctxprec_scores table"):
        check_partition(f"sqlite:///{empty}", P)
    missing = tmp_path / "missing.db"  # a reader never creates the file it was pointed at
    with pytest.raises(ValueError, match="does not exist"):
        check_partition(f"sqlite:///{missing}", P)
    assert not missing.exists()


def test_trend_keeps_silent_days_and_flags_alerts(engine):
    rng = np.random.default_rng(23)
    days = _baseline() + [Day(P, beta_scores(rng, 60, 0.5))] + [Day("2026-11-30", beta_scores(rng, 60, 0.72))]
    write_history(engine, days)  # 2026-11-29 has no rows at all
    df = load_trend(engine, days=10)
    assert list(df["partition_key"]) == day_keys("2026-11-21", 10)
    by_day = df.set_index("partition_key")
    assert by_day.loc["2026-11-29", "rows"] == 0 and by_day.loc["2026-11-29", "alerts"] == ["volume"]
    assert "regression" in by_day.loc[P, "alerts"]
    assert by_day.loc["2026-11-21", "alerts"] == []
    assert df.attrs["judge_model"] == "gpt-4o-mini"
    assert by_day.loc[P, "mean"] == pytest.approx(np.mean(days[7].scores))


def test_stats_ci_matches_t_interval():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, size=50)
    lo, hi = mean_ci(x)
    from scipy import stats

    ref = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (lo, hi) == pytest.approx(ref)
    assert mean_ci([0.5]) is None and mean_ci([0.4, 0.4]) == (0.4, 0.4)
    s = summarize([1.0, 0.0, 0.5], [True, False, True])
    assert s.n == 3 and s.pass_rate == pytest.approx(2 / 3) and s.median == 0.5
    assert welch_less([0.1, 0.1], [0.9, 0.9]) == 0.0 and welch_less([0.5], [0.1, 0.2]) is None


def test_rules_validate():
    with pytest.raises(ValueError):
        AlertRules(alpha=0)
    with pytest.raises(ValueError):
        AlertRules(volume_ratio=2)


def test_check_on_postgresql(request):
    try:
        pg_url = request.getfixturevalue("pg_url")
    except pytest.FixtureLookupError:
        pytest.skip("PostgreSQL fixture (tests/fixtures/postgres.py) not available")
    from ctxprec_ops.warehouse.engine import get_engine

    eng = get_engine(pg_url)  # a fresh database per test
    rng = np.random.default_rng(29)
    write_history(eng, _baseline() + [Day(P, beta_scores(rng, 60, 0.55), failed=2)])
    r = check_partition(pg_url, P)
    assert "regression" in _rules(r) and r.figures.rows == 62 and r.figures.rows_failed == 2
    assert r.baseline.summary.n == 420


def test_staleness_note():
    import datetime as dt

    from ctxprec_ops.monitoring.trend import staleness_note

    today = dt.date(2026, 12, 1)
    assert staleness_note("2026-11-30", today=today) is None
    assert "3 day(s) before yesterday" in staleness_note("2026-11-27", today=today)
    assert staleness_note(None) is None
