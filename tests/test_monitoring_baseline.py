"""The regression baseline: partitions that fired a regression alert stay out of later baselines
(configurable), the baseline says which partitions it used, and a baseline whose days are not
scored yet (a Dagster backfill runs days concurrently) says so."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import AlertRules, check_partition, load_trend
from tests.synthetic_history import Day, beta_scores, day_keys, write_history

STEADY = day_keys("2026-11-14", 7)  # 11-14 .. 11-20 at 0.72
DIP = ["2026-11-21", "2026-11-22", "2026-11-23"]  # three regressed days at 0.40
RECOVERY = "2026-11-24"  # back at 0.72


@pytest.fixture
def url(tmp_path):
    path = tmp_path / "wh.db"
    eng = sa.create_engine(f"sqlite:///{path}")
    rng = np.random.default_rng(3)
    days = [Day(k, beta_scores(rng, 80, 0.72)) for k in STEADY]
    days += [Day(k, beta_scores(rng, 80, 0.40)) for k in DIP]
    days.append(Day(RECOVERY, beta_scores(rng, 80, 0.72)))
    write_history(eng, days)
    eng.dispose()
    return f"sqlite:///{path}"


def test_regressed_partitions_stay_out_of_later_baselines(url):
    steady_mean = check_partition(url, DIP[0]).baseline.summary.mean
    for day in DIP:  # each dip day is compared with the steady days, not with the dip before it
        r = check_partition(url, day)
        assert [a.rule for a in r.alerts] == ["regression"], day
        assert r.baseline.summary.mean == pytest.approx(steady_mean)
        assert set(r.baseline.partitions) == set(STEADY)
    rec = check_partition(url, RECOVERY)
    assert rec.baseline.partitions == tuple(STEADY) and rec.baseline.excluded == tuple(DIP)
    assert abs(rec.regression.drop) < 0.05  # no phantom "+0.3 vs baseline" on the recovery day
    assert f"left out as regressions: {', '.join(DIP)}" in rec.summary()
    assert rec.to_dict()["baseline"]["excluded"] == DIP


def test_pooling_regressions_is_configurable(url):
    pooled = check_partition(url, RECOVERY, exclude_regressions_from_baseline=False)
    assert set(DIP) <= set(pooled.baseline.partitions) and pooled.baseline.excluded == ()
    assert pooled.regression.drop < -0.1  # the contaminated baseline makes the recovery look like a jump
    df = load_trend(url, days=11, rules=AlertRules(exclude_regressions_from_baseline=False))
    assert df.set_index("partition_key").loc[DIP[-1], "baseline_mean"] < 0.65  # dragged down by the dip


def test_trend_uses_the_same_clean_baseline(url):
    df = load_trend(url, days=11).set_index("partition_key")
    assert df.loc[DIP[2], "baseline_mean"] == pytest.approx(df.loc[DIP[0], "baseline_mean"])
    assert [d for d in df.index if df.loc[d, "alerts"]] == DIP


def test_check_cli_shows_the_baseline_partitions_and_the_flag(url, capsys):
    assert main(["check", "--warehouse", url, "--partition", RECOVERY]) == 0
    out = capsys.readouterr().out
    assert "baseline: 7 partition(s) 2026-11-14..2026-11-20" in out and "left out as regressions" in out
    assert main(["check", "--warehouse", url, "--partition", RECOVERY, "--keep-regressions-in-baseline"]) == 0
    out = capsys.readouterr().out
    assert "2026-11-23" in out.split("baseline: ", 1)[1].splitlines()[0] and "left out" not in out


def test_report_names_the_baseline_partitions(url, tmp_path):
    from ctxprec_ops.monitoring import render_report

    html = render_report(url, tmp_path / "r.html", days=11).read_text(encoding="utf-8")
    assert 'id="baseline-used"' in html and "left out as regressions: 2026-11-21, 2026-11-22, 2026-11-23" in html


def test_baseline_incomplete_while_earlier_days_are_not_scored(tmp_path):
    """A backfill scoring days concurrently: 11-18 and 11-19 have no run yet when 11-20 is checked."""
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    rng = np.random.default_rng(5)
    keys = day_keys("2026-11-12", 9)  # 11-12 .. 11-20
    write_history(eng, [Day(k, beta_scores(rng, 60, 0.72)) for k in keys if k not in ("2026-11-18", "2026-11-19")])
    r = check_partition(eng, "2026-11-20")
    assert "2026-11-18" not in r.baseline.partitions
    assert r.baseline.missing == ("2026-11-18", "2026-11-19")
    assert r.notes[0].startswith("baseline incomplete: 2026-11-18, 2026-11-19 not yet scored")
    assert "baseline incomplete: 2026-11-18, 2026-11-19 not yet scored" in r.summary()
    # once they are scored, the note goes away
    write_history(eng, [Day(k, beta_scores(rng, 60, 0.72)) for k in ("2026-11-18", "2026-11-19")])
    r = check_partition(eng, "2026-11-20")
    assert r.baseline.missing == () and not any("incomplete" in n for n in r.notes)
    # days before the first partition the warehouse knows are not "missing"
    assert check_partition(eng, "2026-11-13").baseline.missing == ()
    eng.dispose()
