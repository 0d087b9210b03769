"""Reliability: the ``ctxprec score`` process is SIGKILLed at several points of a partition
(before its first chunk commits, right after a chunk commits, mid-way through a later chunk),
then re-run to completion — on SQLite (WAL) and on PostgreSQL.

What must hold after every kill: chunks are atomic (the scores present are whole chunks), and the
judgment cache holds at least the nodes of the scored rows — and of every row judged before the
kill, since judgments are committed as they arrive. After the final run: exactly one score row
per input row, each with its correct score, no failure records, no row judged twice, and a
consistent ledger (see ``assert_ledger``). And the judge is paid at most once per row plus the
calls in flight at each kill (``test_two_sigkills_pay_only_for_the_calls_in_flight``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs
from tests.helpers.planted import DAY, expected_score, planted_rows, verdict_list

CTXPREC = str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "ctxprec")
N_ROWS = 240
CHUNK = 40


def scorer_env(server) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXPREC_")}
    env.update(
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="test-key",
        NO_PROXY="127.0.0.1,localhost",
        CTXPREC_RETRY_INITIAL_WAIT="0.01",
        CTXPREC_RETRY_MAX_WAIT="0.2",
    )
    return env


def score_cmd(url: str, run_id: str) -> list[str]:
    return [
        CTXPREC,
        "score",
        "--warehouse",
        url,
        "--partition",
        DAY,
        "--judge",
        "judge-test-model",
        "--chunk-size",
        str(CHUNK),
        "--concurrency",
        "4",
        "--quiet",
        "--run-id",
        run_id,
    ]


def run_until_killed(cmd: list[str], env: dict[str, str], when: Callable[[], bool], timeout: float = 90) -> None:
    """Start ``cmd`` and SIGKILL it as soon as ``when()`` is true (fails if it ends first)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if when():
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                assert proc.returncode == -signal.SIGKILL
                return
            time.sleep(0.005)
        out, err = proc.communicate(timeout=5) if proc.poll() is not None else (b"", b"")
        pytest.fail(f"the scorer ended before the kill point (rc {proc.returncode}): {err.decode()[-2000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def scalar(engine, sql: str, default=0):
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(sql).scalar_one()
    except SQLAlchemyError:  # the scorer has not created the output tables yet
        return default


def assert_chunks_atomic(engine, truth) -> set[str]:
    """Only whole chunks are visible, and the judgment cache holds the scored rows' nodes."""
    with engine.connect() as conn:
        scored = {r[0] for r in conn.exec_driver_sql("SELECT log_id FROM ctxprec_scores")}
        n_failures = conn.exec_driver_sql("SELECT count(*) FROM ctxprec_failures").scalar_one()
        n_judgments = conn.exec_driver_sql("SELECT count(*) FROM ctxprec_judgments").scalar_one()
    order = sorted(truth, key=int)
    chunks = [set(order[i : i + CHUNK]) for i in range(0, len(order), CHUNK)]
    for c in chunks:
        assert c <= scored or not (c & scored), "a chunk was half written"
    assert n_failures == 0
    # every scored row's nodes, and those of rows judged but not written yet (committed as they arrived)
    assert sum(len(truth[i]) for i in scored) <= n_judgments <= sum(map(len, truth.values()))
    return scored


def assert_ledger(engine, killed: list[str], final: str) -> None:
    """A consistent ledger: the final run's row equals the tables; every killed run has a row
    that is visibly not a finished run (``interrupted``, never ended: ``finished_at`` NULL)
    and never claims rows."""
    with engine.connect() as conn:
        runs = {r.run_id: r for r in conn.execute(sa.text("SELECT * FROM ctxprec_runs"))}
        n_scores = conn.exec_driver_sql("SELECT count(*) FROM ctxprec_scores").scalar_one()
    assert set(runs) == {*killed, final}
    last = runs[final]
    assert last.status == "succeeded" and last.finished_at is not None
    assert last.rows_total == last.rows_scored == n_scores == N_ROWS and last.rows_failed == 0
    for run_id in killed:
        r = runs[run_id]
        assert r.status == "interrupted", (run_id, r.status)
        assert r.finished_at is None and r.started_at is not None
        assert final in (r.error_message or "")


@pytest.fixture(params=["sqlite", "postgresql"])
def warehouse(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'crash.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    rows, truth = planted_rows(N_ROWS, seed=7)
    engine = get_engine(url)
    create_logs(engine, rows)
    return url, engine, truth


def test_sigkill_at_several_points_then_rerun_loses_and_duplicates_nothing(judge_server, warehouse):
    url, engine, truth = warehouse
    env = scorer_env(judge_server)
    judge_server.latency = 0.02  # slow enough to aim the kills
    killed: list[str] = []

    # 1. killed after 10 judge requests: before its first chunk (40 rows) can commit
    run_until_killed(score_cmd(url, "kill-early"), env, lambda: judge_server.calls >= 10)
    killed.append("kill-early")
    assert assert_chunks_atomic(engine, truth) == set()

    # 2. killed right after the first chunk commits
    run_until_killed(
        score_cmd(url, "kill-after-commit"), env, lambda: scalar(engine, "SELECT count(*) FROM ctxprec_scores") >= CHUNK
    )
    killed.append("kill-after-commit")
    after_commit = assert_chunks_atomic(engine, truth)
    assert len(after_commit) >= CHUNK

    # 3. killed half-way through a later chunk (the server has seen part of its requests)
    seen = judge_server.calls
    run_until_killed(score_cmd(url, "kill-mid-chunk"), env, lambda: judge_server.calls >= seen + CHUNK + CHUNK // 2)
    killed.append("kill-mid-chunk")
    before_final = assert_chunks_atomic(engine, truth)
    assert after_commit <= before_final and len(before_final) < N_ROWS

    # 4. the final run completes; it judges only what no killed run committed, scores or judgments
    calls = judge_server.calls
    judge_server.latency = 0.0
    done = subprocess.run(score_cmd(url, "final"), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with engine.connect() as conn:
        paid = conn.exec_driver_sql(
            "SELECT count(*) FROM ctxprec_scores WHERE run_id = 'final' AND judge_calls > 0"
        ).scalar_one()
    assert judge_server.calls - calls == paid <= N_ROWS - len(before_final)

    with engine.connect() as conn:
        rows = list(conn.execute(sa.text("SELECT log_id, score, verdicts, run_id FROM ctxprec_scores")))
    assert sorted(r.log_id for r in rows) == sorted(truth)  # exactly one score row per input row
    for r in rows:
        assert r.score == pytest.approx(expected_score(truth[r.log_id]), abs=1e-12)
        assert [v["relevant"] for v in verdict_list(r.verdicts)] == truth[r.log_id]
        assert r.run_id == "final" or r.log_id in before_final
    assert_chunks_atomic(engine, truth)
    assert_ledger(engine, killed, "final")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_sigkills_pay_only_for_the_calls_in_flight(judge_server, request, tmp_path, backend):
    """300 rows, chunks of 25, 8 requests in flight, a judge answering in 0.25 s; the scorer is
    SIGKILLed twice mid-chunk, then run to the end. Judgments are committed as they arrive (before
    their request's slot serves another row), so each kill throws away at most the 8 calls in
    flight: 376-401 requests for 300 rows when they were committed with their chunk only."""
    url = f"sqlite:///{tmp_path / 'kills.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    rows, truth = planted_rows(300, seed=11)
    engine = get_engine(url)
    create_logs(engine, rows)
    env = scorer_env(judge_server)
    judge_server.latency = 0.25

    def cmd(run_id: str) -> list[str]:
        argv = score_cmd(url, run_id)
        argv[argv.index("--chunk-size") + 1] = "25"
        argv[argv.index("--concurrency") + 1] = "8"
        return argv

    run_until_killed(cmd("kill-1"), env, lambda: judge_server.calls >= 70)
    first = judge_server.calls
    run_until_killed(cmd("kill-2"), env, lambda: judge_server.calls >= first + 90)
    done = subprocess.run(cmd("final"), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with engine.connect() as conn:
        scored = sorted(r[0] for r in conn.exec_driver_sql("SELECT log_id FROM ctxprec_scores"))
    assert scored == sorted(truth)
    asked = Counter(m.group(1) for r in judge_server.requests if (m := re.search(r"row (\d+) passage", str(r["json"]))))
    twice = sorted((int(k), n) for k, n in asked.items() if n > 1)
    assert 300 <= judge_server.calls <= 300 + 2 * 8, f"{judge_server.calls} requests for 300 rows, asked again: {twice}"
