"""Reliability: concurrent and crashed ``ctxprec score`` processes pay the judge once per row.

Real processes (the ``ctxprec`` command), a real judge (the local OpenAI-protocol server, which
counts the requests it answers; one request per planted row) and real warehouses:

- three runs started together on one SQLite file: each row is judged by one of them;
- two runs on PostgreSQL whose plans differ (rows inserted between the plans, so no chunk keeps
  its bounds): a row the first run is judging is not judged again by the second;
- a run on a DuckDB file killed with SIGKILL, then run again with the default claim lease
  (600 s): the re-run takes over the dead run's claims at once (DuckDB lets one process write a
  file) and completes, saying whose claims it took over and why.
"""

from __future__ import annotations

import subprocess
import time

import sqlalchemy as sa

from ctxprec_ops.warehouse.engine import get_engine, release_sqlite_files
from tests.fixtures.warehouse_data import create_logs
from tests.helpers.planted import planted_rows
from tests.test_reliability_crash import run_until_killed, score_cmd, scorer_env


def _cmd(url: str, run_id: str, *, chunk: int, concurrency: int) -> list[str]:
    argv = score_cmd(url, run_id)
    argv[argv.index("--chunk-size") + 1] = str(chunk)
    argv[argv.index("--concurrency") + 1] = str(concurrency)
    return argv


def _finish(procs: list[subprocess.Popen], timeout: float = 300) -> list[tuple[int, str]]:
    out = []
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        out.append((proc.returncode, err.decode(errors="replace")))
    return out


def _scored(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return sorted(r[0] for r in conn.exec_driver_sql("SELECT log_id FROM ctxprec_scores"))
    finally:
        engine.dispose()


def test_three_score_processes_on_one_sqlite_file_judge_each_row_once(judge_server, tmp_path):
    """Three ``ctxprec score`` runs of one partition started together on one SQLite file (an
    orchestrator retry overlapping a backfill and a manual run): 200 rows, 200 judge requests."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    rows, truth = planted_rows(200, seed=5)
    create_logs(get_engine(url), rows)
    release_sqlite_files()
    env = scorer_env(judge_server)
    judge_server.latency = 0.05
    procs = [
        subprocess.Popen(
            _cmd(url, f"run-{n}", chunk=25, concurrency=4), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for n in range(3)
    ]
    ended = _finish(procs)
    assert all(rc == 0 for rc, _ in ended), [err[-2000:] for _, err in ended]
    assert _scored(url) == sorted(truth)
    assert judge_server.calls == len(truth), f"{judge_server.calls} judge requests for {len(truth)} rows"


def test_two_postgres_runs_planned_apart_judge_each_row_once(judge_server, pg_url):
    """The first run is judging when 110 rows arrive, one between every two of its rows, and a
    second run starts: its chunks share no bounds with the first's. 220 rows, 220 requests."""
    first, truth = planted_rows(110, seed=6, start_id=1)
    for r in first:  # ids 10, 20, ...: room for one new row between every two
        r["id"] = int(r["id"]) * 10
    truth = {str(int(k) * 10): v for k, v in truth.items()}
    engine = get_engine(pg_url)
    create_logs(engine, first)
    env = scorer_env(judge_server)
    judge_server.latency = 0.3  # the first run is still judging its read-ahead chunks when the second reads
    early = subprocess.Popen(
        _cmd(pg_url, "early", chunk=20, concurrency=4), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 90
    while judge_server.calls < 4 and early.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert early.poll() is None, "the first run ended before the rows arrived"
    later, later_truth = planted_rows(110, seed=7, start_id=1001)  # node texts of their own
    for r in later:
        r["id"] = (int(r["id"]) - 1000) * 10 + 5
    truth.update({str((int(k) - 1000) * 10 + 5): v for k, v in later_truth.items()})
    create_logs(engine, later)
    late = subprocess.Popen(
        _cmd(pg_url, "late", chunk=20, concurrency=4), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    (early_rc, early_err), (late_rc, late_err) = _finish([early, late])
    assert late_rc == 0, late_err[-2000:]
    assert _scored(pg_url) == sorted(truth)
    assert judge_server.calls == len(truth), f"{judge_server.calls} judge requests for {len(truth)} rows"
    # the first run may end before the second has scored the rows that arrived after its plan:
    # it then says so (partial, not succeeded), naming them
    assert early_rc == 0 or "in neither ctxprec_scores nor ctxprec_failures" in early_err, early_err[-2000:]


def test_a_duckdb_rerun_after_sigkill_takes_over_the_dead_runs_claims_at_once(judge_server, duckdb_url):
    """Killed mid-run, a run leaves claim rows with a 600 s lease behind; the re-run does not wait
    for them (it used to sit at "80/120 rows" until they expired): it names the dead run and
    completes, judging only what the killed run did not."""
    url = duckdb_url
    rows, truth = planted_rows(120, seed=8)
    create_logs(get_engine(url), rows)
    release_sqlite_files()  # one process writes a DuckDB file at a time: the scorer's turn
    env = scorer_env(judge_server)  # no CTXPREC_CLAIM_LEASE_SECONDS: the default lease
    judge_server.latency = 0.1
    run_until_killed(_cmd(url, "killed", chunk=20, concurrency=4), env, lambda: judge_server.calls >= 30)
    paid = judge_server.calls
    judge_server.latency = 0.0
    started = time.monotonic()
    argv = _cmd(url, "rerun", chunk=20, concurrency=4)
    argv.remove("--quiet")
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert took < 120, f"the re-run took {took:.0f} s: it waited for a dead run's leases"
    said = done.stdout + done.stderr
    assert "run killed" in said and "has ended" in said, said[-3000:]
    assert _scored(url) == sorted(truth)
    assert judge_server.calls <= len(truth) + 4, (
        f"{judge_server.calls} requests for {len(truth)} rows ({paid} before the kill)"
    )
