"""Deterministic sampling (issue 15): ``sample_rate`` / ``max_rows`` pick the same rows on every
run and for both metrics, a higher rate is a superset, rows outside the sample are neither scores
nor failures, ``ctxprec_runs`` records ``sample_rate`` / ``rows_sampled`` with ``rows_total`` = all
rows, the CI comes from the sampled scores, and the volume rule uses all rows."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring.check import check_partition
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.pipeline.run_figures import run_figures
from ctxprec_ops.pipeline.sampling import Sample, plan_cutoff, sample_hash
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import conversation_table, create_logs, day_rows, log_row, query

DAY = "2026-11-28"
N = 300


def _ids(url: str, table: str, metric: str = "contextual_precision") -> set[str]:
    return {str(r[0]) for r in query(url, f"SELECT log_id FROM {table} WHERE metric = :m", m=metric)}


def _run(url: str, metric: str = "contextual_precision") -> sa.Row:
    with sa.create_engine(url).connect() as conn:
        return conn.execute(
            sa.text("SELECT * FROM ctxprec_runs WHERE metric = :m ORDER BY finished_at DESC"), {"m": metric}
        ).first()


@pytest.fixture
def url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows = day_rows(N)
    # a bad row (no retrieval context): a failure when sampled, nothing when not
    rows.append(log_row(N + 1, datetime(2026, 11, 28, 12), context=[]))
    create_logs(get_engine(url), rows)
    return url


def _score(url: str, **kw) -> object:
    return score_partition(PipelineConfig(warehouse=url, judge="lexical", chunk_size=64, **kw), DAY)


def test_same_rows_on_a_rerun_superset_at_a_higher_rate(url, tmp_path):
    summary = _score(url, sample_rate=0.2)
    first = _ids(url, "ctxprec_scores") | _ids(url, "ctxprec_failures")
    seed = "ctxprec-sample-1"
    want = {str(i) for i in range(1, N + 2) if sample_hash(str(i), seed) < int(0.2 * 2**64)}
    assert first == want and 35 <= len(first) <= 85  # ~20% of 301
    # rows outside the sample are neither scores nor failures
    assert not (_ids(url, "ctxprec_scores") & _ids(url, "ctxprec_failures"))
    assert summary.rows_total == N + 1 and summary.rows_sampled == len(first)
    assert summary.sample_rate == 0.2 and summary.rows_scored + summary.rows_failed == len(first)

    # a re-run from scratch picks exactly the same rows
    with sa.create_engine(url).begin() as conn:
        conn.exec_driver_sql("DELETE FROM ctxprec_scores")
        conn.exec_driver_sql("DELETE FROM ctxprec_failures")
    _score(url, sample_rate=0.2)
    assert _ids(url, "ctxprec_scores") | _ids(url, "ctxprec_failures") == first

    # a higher rate only adds rows
    bigger = _score(url, sample_rate=0.5)
    second = _ids(url, "ctxprec_scores") | _ids(url, "ctxprec_failures")
    assert first < second and bigger.rows_sampled == len(second) and bigger.rows_total == N + 1
    assert 120 <= len(second) <= 180


def test_max_rows_caps_the_sample_deterministically(url):
    s = _score(url, max_rows=25)
    got = _ids(url, "ctxprec_scores") | _ids(url, "ctxprec_failures")
    assert len(got) == 25 == s.rows_sampled and s.rows_total == N + 1 and s.sample_rate == 1.0
    # the 25 lowest hashes, so a larger max_rows is a superset
    ranked = sorted((sample_hash(str(i)), str(i)) for i in range(1, N + 2))
    assert got == {i for _, i in ranked[:25]}
    _score(url, max_rows=40)
    assert got < _ids(url, "ctxprec_scores") | _ids(url, "ctxprec_failures")
    # with a rate too: at most max_rows rows of the rate's sample
    cutoff, rows, sampled = plan_cutoff([str(i) for i in range(1, N + 2)], Sample(0.5, 30))
    assert rows == N + 1 and sampled == 30


def test_both_metrics_sample_the_same_log_ids(url):
    engine = get_engine(url)
    md = sa.MetaData()
    t = conversation_table(md)
    md.create_all(engine)
    start = datetime.fromisoformat(DAY)
    convs = [
        {
            "id": i,
            "event_time": start + timedelta(minutes=i),
            "expected_outcome": "Paris is the capital.",
            "turns": [
                {"role": "user", "content": "Capital of France?"},
                {
                    "role": "assistant",
                    "content": "Paris.",
                    "retrieval_context": ["Paris is the capital of France.", "Bananas are yellow."],
                },
            ],
        }
        for i in range(1, N + 2)
    ]
    with engine.begin() as conn:
        conn.execute(sa.insert(t), convs)
    _score(url, sample_rate=0.25)
    _score(url, sample_rate=0.25, metric="turn_contextual_precision")
    single = _ids(url, "ctxprec_scores") | _ids(url, "ctxprec_failures")
    turn = _ids(url, "ctxprec_scores", "turn_contextual_precision") | _ids(
        url, "ctxprec_failures", "turn_contextual_precision"
    )
    assert single == turn and 0 < len(single) < N


def test_ci_from_the_sampled_scores_and_volume_from_all_rows(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    days = [(datetime(2026, 11, 20) + timedelta(days=d)).date().isoformat() for d in range(9)]
    rows = []
    for d, day in enumerate(days):
        n = 60 if d < 8 else 20  # the last day's volume really drops
        rows += day_rows(n, day=day, start_id=1000 * (d + 1))
    create_logs(get_engine(url), rows)
    for day in days[:7]:  # baseline: every row scored
        score_partition(PipelineConfig(warehouse=url, judge="lexical"), day)
    # day 8: a 20% sample of a normal-volume day: no volume alert, CI over the sampled scores
    s = score_partition(PipelineConfig(warehouse=url, judge="lexical", sample_rate=0.2), days[7])
    assert s.rows_total == 60 and s.rows_sampled == s.rows_scored < 30
    scores = sorted(r[0] for r in query(url, "SELECT score FROM ctxprec_scores WHERE partition_key = :p", p=days[7]))
    passed = sum(
        1 for r in query(url, "SELECT success FROM ctxprec_scores WHERE partition_key = :p", p=days[7]) if r[0]
    )
    fig = run_figures(iter([np.array(scores, dtype=float)]), len(scores), passed)
    assert (s.ci_low, s.ci_high) == (pytest.approx(fig["ci_low"]), pytest.approx(fig["ci_high"]))
    result = check_partition(url, days[7])
    assert not result.alerts_of("volume"), result.alerts
    # day 9: a 20% sample of a day with a third of the volume: the volume rule still sees it
    score_partition(PipelineConfig(warehouse=url, judge="lexical", sample_rate=0.2), days[8])
    assert [a.rule for a in check_partition(url, days[8]).alerts_of("volume")] == ["volume"]


def test_cli_flags_env_and_bad_values(url, capsys, monkeypatch):
    monkeypatch.setenv("CTXPREC_SAMPLE_RATE", "0.1")
    assert main(["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical", "--quiet", "--json"]) == 0
    run = _run(url)
    assert run.sample_rate == 0.1 and run.rows_total == N + 1 and run.rows_sampled < 60
    assert (
        main(
            [
                "score",
                "--warehouse",
                url,
                "--partition",
                DAY,
                "--judge",
                "lexical",
                "--quiet",
                "--sample-rate",
                "1",
                "--max-rows",
                "7",
            ]
        )
        == 0
    )
    run = _run(url)
    assert run.sample_rate == 1.0 and run.rows_sampled == 7
    capsys.readouterr()
    for bad in (["--sample-rate", "0"], ["--sample-rate", "1.5"], ["--max-rows", "0"]):
        assert main(["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical", *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and ("--sample-rate" in err[0] or "--max-rows" in err[0]), err


def test_postgres_sampled_run(pg_url):
    create_logs(get_engine(pg_url), day_rows(120))
    s = score_partition(PipelineConfig(warehouse=pg_url, judge="lexical", sample_rate=0.3), DAY)
    got = _ids(pg_url, "ctxprec_scores")
    want = {str(i) for i in range(1, 121) if sample_hash(str(i)) < int(0.3 * 2**64)}
    assert got == want and s.rows_sampled == len(want) and s.rows_total == 120
    run = _run(pg_url)
    assert run.sample_rate == pytest.approx(0.3) and run.rows_sampled == len(want)
