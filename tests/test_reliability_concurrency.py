"""Reliability: two worker processes score the same partition's chunks at the same instant (what an
Airflow retry overlapping a still-running task, or a Dagster backfill overlapping a scheduled run,
does), on PostgreSQL and on SQLite (WAL, busy timeout, ``BEGIN IMMEDIATE``).

What must hold: neither worker fails (no unique-key error, deadlock or "table exists" error from
the races on fresh output tables), every good row has exactly one score (correct), every bad row
exactly one failure record, no row is in both tables, the judgment cache holds each node once,
and each worker's ledger row describes the whole partition.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, log_row
from tests.helpers.planted import DAY, expected_score, planted_rows, verdict_list

WORKER = str(Path(__file__).parent / "helpers" / "score_worker.py")
N_GOOD = 200
BAD = {  # id: retrieval_context / expected_output problems
    9001: {"retrieval_context": None},
    9002: {"retrieval_context": ["fine RELEVANT", 3]},
    9003: {"expected_output": None},
    9004: {"retrieval_context": []},
}


def seed(url: str) -> dict[str, list[bool]]:
    rows, truth = planted_rows(N_GOOD, seed=11)
    for rid, values in BAD.items():
        row = log_row(rid, datetime(2026, 11, 28, 12))
        row.update(values)
        rows.append(row)
    create_logs(get_engine(url), rows)
    return truth


def run_pair(server, url: str, tmp_path: Path, workers: list[tuple[str, str]]) -> list[dict]:
    """Start one subprocess per (mode, run_id), release them together, return their summaries."""
    go = tmp_path / "go"
    env = dict(os.environ, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key", NO_PROXY="127.0.0.1,localhost")
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, mode, url, DAY, run_id, str(go), "25"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for mode, run_id in workers
    ]
    deadline = time.monotonic() + 90
    while len(list(tmp_path.glob("go.*.ready"))) < len(procs):  # all imported, all waiting
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a worker did not start"
        time.sleep(0.01)
    go.touch()
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, (stdout, stderr[-3000:])
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def assert_nothing_lost_or_doubled(url: str, truth: dict[str, list[bool]], server, summaries: list[dict]) -> None:
    engine = get_engine(url)
    with engine.connect() as conn:
        scores = list(conn.execute(sa.text("SELECT log_id, score, verdicts FROM ctxprec_scores")))
        failures = list(conn.execute(sa.text("SELECT log_id, error_type, error_message FROM ctxprec_failures")))
        n_judgments, n_keys = conn.execute(sa.text("SELECT count(*), count(DISTINCT key) FROM ctxprec_judgments")).one()
        runs = list(conn.execute(sa.text("SELECT * FROM ctxprec_runs")))
    scored = [r.log_id for r in scores]
    assert len(scored) == len(set(scored)) == N_GOOD and set(scored) == set(truth)
    for r in scores:
        assert r.score == pytest.approx(expected_score(truth[r.log_id]), abs=1e-12)
        assert [v["relevant"] for v in verdict_list(r.verdicts)] == truth[r.log_id]
    failed = [f.log_id for f in failures]
    assert sorted(failed) == sorted(str(i) for i in BAD) and len(set(failed)) == len(failed)
    assert all(f.error_type == "invalid_input" for f in failures)
    assert n_judgments == n_keys == sum(len(v) for v in truth.values())
    # each row judged at least once and at most once per worker
    assert N_GOOD <= server.calls <= len(summaries) * N_GOOD
    for s in summaries:
        assert (s["rows_total"], s["rows_scored"], s["rows_failed"]) == (N_GOOD + len(BAD), N_GOOD, len(BAD))
        assert s["status"] == "succeeded" and s["failures_by_type"] == {"invalid_input": len(BAD)}
    assert {r.run_id for r in runs} == {s["run_id"] for s in summaries}
    assert all(r.status == "succeeded" and r.rows_total == N_GOOD + len(BAD) for r in runs)


@pytest.mark.parametrize(
    "workers",
    [
        [("partition", "dagster-backfill"), ("chunks", "airflow-run")],
        [("chunks", "airflow-run"), ("chunks", "airflow-run")],  # a retry overlapping its own first try
    ],
    ids=["partition-vs-chunks", "same-run-twice"],
)
def test_two_processes_on_postgres_lose_and_duplicate_nothing(judge_server, pg_url, tmp_path, workers):
    truth = seed(pg_url)
    judge_server.latency = 0.003
    summaries = run_pair(judge_server, pg_url, tmp_path, workers)
    assert_nothing_lost_or_doubled(pg_url, truth, judge_server, summaries)


def test_two_processes_on_sqlite_lose_and_duplicate_nothing(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    truth = seed(url)
    judge_server.latency = 0.003
    summaries = run_pair(judge_server, url, tmp_path, [("partition", "dagster-backfill"), ("chunks", "airflow-run")])
    assert_nothing_lost_or_doubled(url, truth, judge_server, summaries)
