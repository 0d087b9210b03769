"""What Dagster shows next to a check: the spec's description names the rule (never an outcome,
so it cannot contradict a failed result), the result's description says what was found, and the
regression metadata names the baseline's partitions, those left out and those not scored yet."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

pytest.importorskip("dagster")

from ctxprec_ops.dagster.checks import CHECK_KINDS, _description, check_metadata  # noqa: E402
from ctxprec_ops.monitoring import check_partition  # noqa: E402
from tests.synthetic_history import Day, beta_scores, day_keys, write_history  # noqa: E402


def test_spec_descriptions_name_the_rule_not_an_outcome():
    for name, (_severity, about) in CHECK_KINDS.items():
        assert about.startswith("Fails when"), name
        assert "No statistically significant" not in about


def test_regression_result_text_and_metadata(tmp_path):
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    rng = np.random.default_rng(4)
    keys = day_keys("2026-11-10", 12)  # 11-10 .. 11-21
    days = [Day(k, beta_scores(rng, 60, 0.72)) for k in keys[:8]]
    days += [Day(keys[8], beta_scores(rng, 60, 0.35))]  # 11-18 regressed
    days += [Day(keys[11], beta_scores(rng, 60, 0.35))]  # 11-21; 11-19 and 11-20 not scored yet
    write_history(eng, days)
    result = check_partition(eng, keys[11])
    eng.dispose()
    assert result.alerts_of("regression")
    text = _description(result, "regression")
    assert "below the" in text and "baseline incomplete: 2026-11-19, 2026-11-20 not yet scored" in text
    md = check_metadata(result, "regression")
    assert "2026-11-18" in md["baseline_excluded"].value.split(", ")
    assert md["baseline_not_yet_scored"].value == "2026-11-19, 2026-11-20"
    assert "2026-11-18" not in md["baseline_partitions"].value
