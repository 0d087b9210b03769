"""A ``ctxprec score`` process killed with SIGKILL mid-run, then run again: nothing is lost (every
row scored once, the ledger whole) and nothing is paid twice beyond the judge calls that were in
flight when it died (requests counted at the local OpenAI-protocol judge server).

The scenario runs once per backend (a module fixture); each test asserts one of the two promises.
Claim leases (DuckDB, Snowflake) last ``LEASE_S`` here, so the re-run takes over the dead run's
leases within seconds: how long a re-run waits for a dead process's lease is not what these tests
assert (with the default 600 s lease the re-run waits that long).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.fixtures.isolation import clean_cwd, clean_env, run_isolated

from .backends import Backend, Warehouse
from .invariants import DAY, assert_each_row_once, logs, run_row

N_ROWS = 60
CHUNK = 20
CONCURRENCY = 4
#: killed once the server has seen this many requests: mid-way through the second chunk
KILL_AT = 30
#: a judge call's time (a hosted judge's pace): a case waits for its verdicts' commit while a commit
#: of the judgment cache takes at most as long as a call (``pipeline/verdict_flush.py``); fakesnow's
#: commits take longer than a 50 ms call on a loaded machine
LATENCY_S = 0.25
LEASE_S = 2


@dataclass
class Crash:
    warehouse: Warehouse
    killed_calls: int
    rerun_calls: int
    rerun: subprocess.CompletedProcess


def _score_argv(wh: Warehouse, run_id: str) -> list[str]:
    return wh.cli(
        "score", "--warehouse", wh.url, "--partition", DAY, "--judge", "judge-test-model",
        "--chunk-size", str(CHUNK), "--concurrency", str(CONCURRENCY), "--quiet", "--run-id", run_id,
    )  # fmt: skip


def _kill_when(argv: list[str], env: dict[str, str], ready, timeout: float = 120) -> None:
    """Start ``argv`` and SIGKILL it as soon as ``ready()`` (fails if it ends first)."""
    proc = subprocess.Popen(argv, cwd=clean_cwd(), env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if ready():
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                return
            time.sleep(0.005)
        _, err = proc.communicate(timeout=10) if proc.poll() is not None else (b"", b"")
        pytest.fail(f"the scorer ended before the kill point (rc {proc.returncode}): {err.decode()[-2000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def crash(backend: Backend, judge_server_session) -> Iterator[Crash]:
    server = judge_server_session
    server.reset()
    env = {
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",
        "NO_PROXY": "127.0.0.1,localhost",
        "CTXPREC_CLAIM_LEASE_SECONDS": str(LEASE_S),
    }
    with backend.database() as wh:
        wh.open()
        wh.create_source(logs(range(1, N_ROWS + 1)))
        wh.close()  # the warehouse is the subprocesses' now
        try:
            server.latency = LATENCY_S
            _kill_when(_score_argv(wh, "killed"), env, lambda: server.calls >= KILL_AT)
            time.sleep(2 * LATENCY_S)  # requests sent before the kill have all arrived
            killed_calls = server.calls
            server.latency = 0.0
            rerun = run_isolated(_score_argv(wh, "rerun"), env, timeout=180)
            rerun_calls = server.calls - killed_calls
        finally:
            server.reset()
        wh.open()
        try:
            yield Crash(wh, killed_calls, rerun_calls, rerun)
        finally:
            wh.close()


def test_a_rerun_after_sigkill_loses_nothing(crash):
    assert crash.rerun.returncode == 0, crash.rerun.stderr[-2000:]
    ids = list(range(1, N_ROWS + 1))
    assert_each_row_once(crash.warehouse, ids)
    run = run_row(crash.warehouse, "rerun")
    assert run["status"] == "succeeded"
    assert (run["rows_total"], run["rows_scored"], run["rows_failed"]) == (N_ROWS, N_ROWS, 0)
    killed = crash.warehouse.query("SELECT status FROM ctxprec_runs WHERE run_id = 'killed'")
    assert all(status != "succeeded" for (status,) in killed), killed


def test_a_rerun_after_sigkill_pays_only_for_the_calls_in_flight(crash):
    assert crash.rerun.returncode == 0, crash.rerun.stderr[-2000:]
    total = crash.killed_calls + crash.rerun_calls
    assert N_ROWS <= total <= N_ROWS + CONCURRENCY, (
        f"{total} judge calls ({crash.killed_calls} before the kill, {crash.rerun_calls} after) for {N_ROWS} rows: "
        f"at most {CONCURRENCY} (the calls in flight) may be paid twice"
    )
